"""The conda-build render emulation (feedstock_tools/conda/recipe_render.py) on small recipes in tmp_path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from feedstock_tools.__main__ import main
from feedstock_tools.common.errors import ToolError
from feedstock_tools.conda.first_pass import render_first_pass
from feedstock_tools.conda.recipe_render import (
    apply_pin_expressions,
    expand_variants,
    find_used_variables_in_text,
    hash_of,
    render_recipe,
    render_variant_data,
)

KEYS = (
    "libprotobuf",
    "blas_impl",
    "python",
    "python_min",
    "c_compiler",
    "c_compiler_version",
    "c_stdlib_version",
    "nccl",
)


@pytest.mark.parametrize(
    ("line", "used"),
    [
        ("    - libprotobuf", {"libprotobuf"}),
        ("    - libprotobuf  # [linux]", {"libprotobuf"}),
        ("    - libprotobuf >=5", set()),  # a version range is not a use of the key
        ("    - python >=3.10", set()),
        ("  string: cpu_{{ blas_impl }}_h{{ PKG_HASH }}", {"blas_impl"}),
        ("{% if blas_impl == 'mkl' %}", {"blas_impl"}),
        ("{% set x = blas_impl %}", {"blas_impl"}),  # single-line set and for statements count
        ("{% for dep in python_deps %}", set()),  # ... but only a standalone name
        ("{% for python in deps %}", set()),  # ... after "in": the loop variable is not a use (#5447, #5514)
        ("{% set deps = ['python >=3.10'] %}", {"python"}),
        ("    - {{ compiler('c') }}", {"c_compiler", "c_compiler_version"}),
        ("    - {{ stdlib('c') }}", {"c_stdlib_version"}),
        ("    - python {{ python_min }}.*", {"python_min"}),  # a key stands alone (conda-build >= 24.11)
        ("    - {{python_min}}", {"python_min"}),
        ("    - {{ pin_compatible('nccl') }}", {"nccl"}),
    ],
)
def test_used_variables_follow_conda_builds_text_rules(line, used):
    assert find_used_variables_in_text(KEYS, line) == used


def test_selectors_count_only_in_the_selector_pass():
    line = "    - foo  # [nccl == '2']"
    assert find_used_variables_in_text(KEYS, line, selectors_only=True) == {"nccl"}
    # a space, a bracket and a key followed by a space reads as a selector to conda-build
    assert find_used_variables_in_text(KEYS, '{% set x = ["python >=3"] %}', selectors_only=True) == {
        "python"
    }
    assert find_used_variables_in_text(KEYS, '{% set x = ["python"] %}', selectors_only=True) == set()


@pytest.mark.parametrize(
    ("version", "min_pin", "max_pin", "expected"),
    [
        ("2.13.0", "x.x.x.x.x.x", "x.x", ">=2.13.0,<2.14.0a0"),
        ("2.13.0", "x.x.x.x.x.x", "x", ">=2.13.0,<3.0a0"),
        ("2.13.1", "x.x", "x.x.x", ">=2.13,<2.13.2.0a0"),
        ("2.14.0.rc1", "x.x.x.x.x.x", "x.x", ">=2.14.0.rc1,<2.15.0a0"),
    ],
)
def test_pin_expressions(version, min_pin, max_pin, expected):
    assert apply_pin_expressions(version, min_pin, max_pin) == expected


def test_expand_variants_moves_zipped_keys_together():
    config = {
        "python": ["3.10", "3.11"],
        "is_python_min": [True, False],
        "blas_impl": ["mkl", "generic"],
        "zip_keys": [["python", "is_python_min"]],
    }
    variants = expand_variants(config)
    assert [(v["python"], v["is_python_min"], v["blas_impl"]) for v in variants] == [
        ("3.10", True, "mkl"),
        ("3.10", True, "generic"),
        ("3.11", False, "mkl"),
        ("3.11", False, "generic"),
    ]
    assert all(v["zip_keys"] == config["zip_keys"] for v in variants)


def test_zipped_keys_of_different_length_are_a_clear_error():
    with pytest.raises(ToolError, match="zipped keys python, is_python_min have different lengths"):
        expand_variants(
            {"python": ["3.10", "3.11"], "is_python_min": [True], "zip_keys": [["python", "is_python_min"]]}
        )


def test_hash_leaves_out_python_without_a_build_string_but_not_with_one():
    assert hash_of({}) == ""
    recipe_hash = hash_of({"blas_impl": "mkl"})
    assert len(recipe_hash) == 8 and recipe_hash.startswith("h")
    assert hash_of({"blas_impl": "mkl"}) != hash_of({"blas_impl": "generic"})


TOY_RECIPE = """\
{% set version = "1.2.3" %}
package:
  name: toy-split
  version: {{ version }}
build:
  number: 4
requirements:
  host:
    - libprotobuf
outputs:
  - name: libtoy
    script: build.sh
    build:
      string: {{ blas_impl }}_h{{ PKG_HASH }}_{{ PKG_BUILDNUM }}
      run_exports:
        - {{ pin_subpackage('libtoy', max_pin='x.x') }}
    requirements:
      host:
        - libprotobuf
  - name: pytoy
    build:
      string: py{{ CONDA_PY }}_h{{ PKG_HASH }}_{{ PKG_BUILDNUM }}
      skip: true  # [blas_impl == "skipme"]
    requirements:
      host:
        - python
        - {{ pin_subpackage('libtoy', exact=True) }}
      run:
        - python
        - {{ pin_subpackage('libtoy', exact=True) }}
"""


@pytest.fixture
def toy_recipe(tmp_path: Path) -> Path:
    recipe = tmp_path / "recipe"
    recipe.mkdir()
    (recipe / "meta.yaml").write_text(TOY_RECIPE)
    (recipe / "build.sh").write_text("echo building\n")
    return recipe


TOY_CONFIG = {
    "target_platform": ["linux-64"],
    "blas_impl": ["mkl"],
    "libprotobuf": ["7.35.1"],
    "python": ["3.11.* *_cpython", "3.12.* *_cpython"],
    "libarrow": ["25.0", "24.0"],  # unused by the recipe: not looped over
    "channel_targets": ["conda-forge main"],
}


def test_toy_recipe_renders_like_conda_build(toy_recipe):
    recipe = render_recipe(toy_recipe, TOY_CONFIG)
    names = [output.name for output in recipe.outputs]
    assert names == ["libtoy", "pytoy", "pytoy"]  # one libtoy: python and libarrow are not its variant keys
    libtoy = recipe.outputs[0]
    assert libtoy.requirements.host == ("libprotobuf 7.35.1.*",)
    assert libtoy.run_exports == ("libtoy >=1.2.3,<1.3.0a0",)
    assert libtoy.build_number == 4
    assert set(libtoy.variant) == {"blas_impl", "libprotobuf", "target_platform", "channel_targets"}
    assert libtoy.build_string == f"mkl_{hash_of(libtoy.hash_contents)}_4"
    py311, py312 = recipe.outputs[1:]
    assert py311.build_string.startswith("py311_h") and py312.build_string.startswith("py312_h")
    assert py311.hash_contents["python"] == "3.11.* *_cpython"  # a build-string value keeps python in
    assert py311.requirements.host == ("python 3.11.* *_cpython", f"libtoy 1.2.3 {libtoy.build_string}")
    assert py311.requirements.run[0] == "python"  # run is not pinned by insert_variant_versions
    assert recipe.top_level is not None and recipe.top_level.name == "toy-split"
    assert recipe.top_level.script == "build.sh"  # conda-build runs it before the outputs


def test_skipped_outputs_are_left_out(toy_recipe):
    recipe = render_recipe(toy_recipe, {**TOY_CONFIG, "blas_impl": ["skipme"]})
    assert [output.name for output in recipe.outputs] == ["libtoy"]


def test_a_key_the_variant_lacks_is_a_clear_error(toy_recipe):
    config = {key: value for key, value in TOY_CONFIG.items() if key != "python"}
    with pytest.raises(ToolError, match="'CONDA_PY' is undefined"):
        render_recipe(toy_recipe, config)


def test_a_partial_variant_renders_leniently_as_data(toy_recipe):
    """``deps``' reading of requirement lines: the one renderer, a partial variant, a missing name empty."""
    variant = {"blas_impl": "skipme"}  # no python: CONDA_PY is undefined
    data = render_variant_data(toy_recipe, "linux-64", variant)
    libtoy, pytoy = data["outputs"]
    assert data["package"] == {"name": "toy-split", "version": "1.2.3"}
    assert libtoy["build"]["string"] == "skipme_h1234567_4"  # the top level's number, as conda-build's
    assert data["requirements"] == libtoy["requirements"] == {"host": ["libprotobuf"]}  # no pin inserted
    # no output is split off: a sibling's pin is the placeholder of conda-build's first render
    assert libtoy["build"]["run_exports"] == ["libtoy >=0,<1.0a0"]
    assert pytoy["build"] == {"string": "py_h1234567_4", "skip": True}
    assert pytoy["requirements"]["run"] == ["python", "libtoy 0 1234567"]
    with pytest.raises(ToolError, match="'CONDA_PY' is undefined"):  # the strict render of the same
        render_recipe(toy_recipe, {key: [value] for key, value in variant.items()}, subdir="linux-64")


def test_cli_prints_outputs_in_build_order(toy_recipe, tmp_path, capsys):
    config = tmp_path / "linux_64_.yaml"
    config.write_text("\n".join(f"{key}:\n- '{value[0]}'" for key, value in TOY_CONFIG.items()) + "\n")
    assert main(["render", str(config), "--recipe", str(toy_recipe)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("libtoy-1.2.3-mkl_h") and lines[1].startswith("pytoy-1.2.3-py311_h")


def test_cli_names_a_missing_file(tmp_path, capsys):
    assert main(["render", str(tmp_path / "nope.yaml")]) == 1
    assert capsys.readouterr().err.startswith(f"error: no configuration file {tmp_path / 'nope.yaml'}; list")
    assert main(["render", "osx_arm64", "--recipe", str(tmp_path)]) == 1  # not a recipe directory
    assert (
        capsys.readouterr().err
        == f"error: --recipe {tmp_path}: no meta.yaml there; give the recipe directory (recipe/)\n"
    )


def test_numbers_in_the_recipe_stay_strings_as_in_conda_build(toy_recipe):
    meta = toy_recipe / "meta.yaml"
    meta.write_text(meta.read_text().replace('"1.2.3"', '"1.10"'))
    recipe = render_recipe(toy_recipe, TOY_CONFIG)
    assert {output.version for output in recipe.outputs} == {"1.10"}  # not 1.1
    assert recipe.outputs[0].run_exports == ("libtoy >=1.10,<1.11.0a0",)


def test_pkg_buildnum_in_an_output_is_the_top_levels(toy_recipe):
    """conda-build's final render of an output sees the top level's PKG_BUILDNUM (render.py
    finalize_metadata), so an output with a number of its own must compute its string in Jinja."""
    meta = toy_recipe / "meta.yaml"
    meta.write_text(
        meta.read_text().replace(
            "    build:\n      string: {{ blas_impl }}",
            "    build:\n      number: 54\n      string: {{ blas_impl }}",
            1,
        )
    )
    libtoy = render_recipe(toy_recipe, TOY_CONFIG).outputs[0]
    assert libtoy.build_number == 54
    assert libtoy.build_string.endswith("_4")


# --- conda-build's first pass: the recipe before any variant is known -------------------------------------

REPO_RECIPE = Path(__file__).resolve().parents[2] / "recipe"


@pytest.mark.parametrize("subdir", ["linux-64", "linux-aarch64", "osx-64", "osx-arm64"])
def test_the_recipe_renders_without_a_variant(subdir):
    """What `conda render recipe`, conda-smithy's rerender and its linter do first: every key undefined."""
    data = render_first_pass(REPO_RECIPE, subdir)
    assert data["package"]["name"] == "libtorch-split"
    assert [output["name"] for output in data["outputs"]][:3] == [
        "libtorch",
        "libtorch-cuda-linalg",
        "pytorch",
    ]


def test_conda_build_renders_the_recipe_without_its_source():
    """conda-build 26.7.1 downloads and patches the source before it renders a meta.yaml whose text (comments
    included) holds any of these (metadata.py:2136-2167 ``needs_source_for_render``, render.py:1097-1098):
    conda render, conda-smithy's rerender and the bot's would fetch PyTorch's tarball first, and fail
    offline (docs/reference/solver-picks.md, "Which GPUs a CUDA build runs on")."""
    text = (REPO_RECIPE / "meta.yaml").read_text(encoding="utf-8")
    for function in ("load_setup_py_data", "load_setuptools", "load_file_regex", "load_file_data"):
        assert function not in text
    for vcs in ("GIT", "SVN", "HG"):  # uses_vcs_in_meta
        assert not re.findall(rf"{vcs}_[^\.\s\'\"]+", text), vcs


def test_a_method_call_on_a_variant_key_fails_the_first_pass_as_in_conda_build(tmp_path):
    """conda-build's undefined value returns None for any attribute: `.replace(...)` calls None."""
    recipe = tmp_path / "recipe"
    recipe.mkdir()
    (recipe / "meta.yaml").write_text(
        '{% set flavour = "cuda" ~ cuda_compiler_version.replace(".", "") %}\n'
        "package:\n  name: toy\n  version: 1\n"
    )
    with pytest.raises(ToolError, match=r"meta.yaml line 1: TypeError: 'NoneType' object is not callable"):
        render_first_pass(recipe, "linux-64")
    # the filter form renders the undefined value as ""
    (recipe / "meta.yaml").write_text(
        '{% set flavour = "cuda" ~ (cuda_compiler_version | replace(".", "")) %}\n'
        "package:\n  name: toy{{ flavour }}\n  version: 1\n"
    )
    assert render_first_pass(recipe, "linux-64")["package"]["name"] == "toycuda"


def test_undefined_values_behave_like_conda_builds_never_fail_undefined(tmp_path):
    recipe = tmp_path / "recipe"
    recipe.mkdir()
    (recipe / "meta.yaml").write_text(
        'package:\n  name: "{{ x != "None" }}-{{ x == "None" }}-{{ x + 1 }}-{{ (x | int) + 1 }}-{{ x[0] }}"\n'
    )
    assert render_first_pass(recipe, "linux-64")["package"]["name"] == "True-False--1-"


def test_cli_renders_the_first_pass_without_a_config(capsys):
    assert main(["render", "--recipe", str(REPO_RECIPE)]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("libtorch  (first pass")
