"""``convert-v1``: recipe-v1/recipe.yaml, generated from recipe/meta.yaml (conda/recipe_v1.py).

The committed file must be the command's output (CI fails naming the command otherwise); the generator's
rules are shown on a small meta.yaml whose whole conversion is the expected text below, which the real
rattler-build (py-rattler-build) renders; and one edit of meta.yaml reaches both recipes, which the real
rattler-build and the conda-build emulation then render alike (``render-v1``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from jinja2 import nodes
from recipe_matrix import ci_config

from feedstock_tools.common.configuration import read_configuration
from feedstock_tools.common.errors import InputError
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.conda import jinja_expr, rattler_render, recipe_v1
from feedstock_tools.maintainer import render_v1

CPU_CONFIG = ci_config("linux-64", "cpu").path


# ---- the committed file ---------------------------------------------------------------------------------


def test_the_committed_v1_recipe_is_what_convert_v1_writes() -> None:
    problems = recipe_v1.stale(REPO_ROOT)
    assert problems == [], (
        "recipe-v1/ is not what recipe/meta.yaml converts to; run: "
        f"{recipe_v1.COMMAND}\n" + "\n".join(problems)
    )


def test_the_generated_file_says_so_at_its_top() -> None:
    first = (REPO_ROOT / recipe_v1.V1_DIRNAME / "recipe.yaml").read_text().splitlines()[0]
    assert first.startswith("# GENERATED from recipe/meta.yaml by") and recipe_v1.COMMAND in first


def test_the_metapackage_s_force_ignore_keys_is_left_out_of_v1() -> None:
    """conda-smithy's job split reads it from meta.yaml; in v1 (build.variant.ignore_keys) it would undefine
    blas_impl in the metapackage's build string. Only that key goes: the same text without it converts
    to the same v1 recipe."""
    text = (REPO_ROOT / "recipe" / "meta.yaml").read_text()
    ignoring = "      force_ignore_keys:\n        - blas_impl\n"
    assert text.count(ignoring) == 1
    converted = recipe_v1.convert(text)
    assert "ignore_keys" not in converted
    assert recipe_v1.convert(text.replace(ignoring, "")) == converted


def test_the_conversion_is_the_same_bytes_every_time() -> None:
    text = (REPO_ROOT / "recipe" / "meta.yaml").read_text()
    assert recipe_v1.convert(text) == recipe_v1.convert(text)


# ---- one edit, both recipes ------------------------------------------------------------------------------


def _copy(tmp_path: Path) -> Path:
    for name in ("recipe", recipe_v1.V1_DIRNAME):
        shutil.copytree(REPO_ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _convert_v1(root: Path, *options: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "feedstock_tools", "convert-v1", *options, "--root", str(root)]
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT, check=False)


def test_a_new_run_requirement_added_once_reaches_both_recipes(tmp_path: Path) -> None:
    """A run requirement written once in meta.yaml: the check names the command, the command writes it into
    recipe.yaml, and the real rattler-build render of recipe.yaml equals meta.yaml's, that line included."""
    root = _copy(tmp_path)
    meta = root / "recipe" / "meta.yaml"
    text = meta.read_text()
    anchor = "        - networkx >=2.5.1\n"
    assert text.count(anchor) == 1
    meta.write_text(text.replace(anchor, anchor + "        - optree >=0.13  # a new run requirement\n"))

    stale = _convert_v1(root, "--check")
    assert stale.returncode == 1
    assert f"run: {recipe_v1.COMMAND}" in stale.stderr and "recipe-v1/recipe.yaml" in stale.stdout

    written = _convert_v1(root)
    assert written.returncode == 0 and "wrote recipe-v1/recipe.yaml" in written.stdout
    assert _convert_v1(root, "--check").returncode == 0
    assert sorted(p.name for p in (root / recipe_v1.V1_DIRNAME).iterdir()) == [
        "conda_build_config.yaml",
        "recipe.yaml",
    ]  # no temporary file left
    v1_text = (root / recipe_v1.V1_DIRNAME / "recipe.yaml").read_text()
    assert v1_text.count("        - optree >=0.13  # a new run requirement\n") == 1

    _, differences = render_v1.compare_config(root / "recipe", CPU_CONFIG)
    assert [d.line() for d in differences] == []
    pytorch = [
        o
        for o in rattler_render.render(
            root / recipe_v1.V1_DIRNAME / "recipe.yaml", read_configuration(CPU_CONFIG)
        )
        if o.name == "pytorch"
    ]
    assert pytorch and all("optree >=0.13" in o.recipe["requirements"]["run"] for o in pytorch)


def test_a_stale_variant_file_is_named_and_rewritten(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    with (root / "recipe" / "conda_build_config.yaml").open("a") as handle:
        handle.write("# edited in recipe/ only\n")
    assert recipe_v1.stale(root) == [
        "out of date: recipe-v1/conda_build_config.yaml, not what meta.yaml converts to "
        f"(run: {recipe_v1.COMMAND})"
    ]
    assert recipe_v1.write(root) == ["wrote recipe-v1/conda_build_config.yaml"]
    assert recipe_v1.stale(root) == [] and recipe_v1.write(root) == []


# ---- the rules, on a small meta.yaml ---------------------------------------------------------------------

SMALL_META = """\
{#- demo: one build, split in two #}
{% set version = "1.2.3" %}
{% set build = 0 %}
{% set is_gpu = cuda_compiler_version != "None" %}
{#- GPU builds first #}
{% set number = build + (100 if is_gpu else 0) %}
{% set archs = "7.5;12.0+PTX" if is_gpu else "" %}
{#- host names, written once #}
{% set host = ["zlib"] %}
{% if linux %}
{#- linux links it #}
{% set host = host + ["libgomp"] %}
{% endif %}
{% if is_gpu %}
{% set host = host + ["cuda-version " ~ cuda_compiler_version] %}
{% else %}
{% set host = host + ["nomkl"] %}
{% endif %}

package:
  name: demo-split
  version: {{ version }}

source:
  url: https://example.org/demo-{{ version }}.tar.gz
  sha256: 2f3c6e8ab4d2c9a1f0e5b7d3c6a9e2f1b4d8c0a3e6f9b2d5c8a1e4f7b0d3c6a9
  patches:
    # why this patch
    - patches/0001-fix.patch  # [win]

build:
  number: {{ number }}
  skip: true  # [osx]
  script_env:
    - MAX_JOBS
    - DEMO_ARCHS={{ archs }}

requirements:
  host:
{% for dep in host %}
    - {{ dep }}
{% endfor %}

outputs:
  - name: libdemo
    script: build.sh  # [unix]
    script: bld.bat   # [win]
    build:
      string: {{ "gpu" if is_gpu else "cpu" }}_h{{ PKG_HASH }}_{{ number }}
      run_exports:
        - {{ pin_subpackage('libdemo', max_pin='x.x') }}
    requirements:
      host:
{% for dep in host %}
        - {{ dep }}
{% endfor %}
      run:
        - python   # its own Python
                   # (a second line)
        - demo-data {{ version }}
    test:
      imports:
        - demo
      files:
        - tests/check.py
      commands:
        - python tests/check.py  # [py >= 311]

about:
  home: https://example.org
  license: MIT
  license_family: MIT
"""

_SCRIPT = """\
        content:
          # the driver and its scripts are recipe/'s, shared with meta.yaml: run there, as from there
          - if: unix
            then:
              - export RECIPE_DIR="${RECIPE_DIR}/../recipe"
              - bash "${RECIPE_DIR}/build.sh"
          - if: win
            then:
              - set "RECIPE_DIR=%RECIPE_DIR%\\..\\recipe"
              - call "%RECIPE_DIR%\\bld.bat"
              - if errorlevel 1 exit 1
"""

SMALL_V1_BODY = (
    """\
# demo: one build, split in two

context:
  version: "1.2.3"
  build: 0
  # (is_gpu: written out where it is used, as cuda_compiler_version != "None")
  # GPU builds first
  number: ${{ build + (100 if cuda_compiler_version != "None" else 0) }}
  archs: ${{ "7.5;12.0+PTX" if cuda_compiler_version != "None" else "" }}

recipe:
  name: demo-split
  version: ${{ version }}

source:
  - url: https://example.org/demo-${{ version }}.tar.gz
    sha256: 2f3c6e8ab4d2c9a1f0e5b7d3c6a9e2f1b4d8c0a3e6f9b2d5c8a1e4f7b0d3c6a9
    patches:
      # why this patch
      - if: win
        then: ../recipe/patches/0001-fix.patch
  # the package tests' files, recipe/'s: rattler-build (0.73.0, measured) copies
  # a test's `files.recipe` from this directory only, following no link: they come
  # in as sources
  - path: ../recipe/tests
    target_directory: tests

build:
  number: ${{ number }}
  skip:
    - osx

outputs:
  - staging:
      name: demo-split
    build:
      script:
"""
    + _SCRIPT
    + """\
        env:
          # rattler-build sets neither PKG_NAME nor PKG_VERSION in a staging output (measured with 0.73.0):
          # the driver chooses its pass by PKG_NAME, and the compiler activation's -fdebug-prefix-map names
          # both, so without them pass 1's flags differ from every later output's (the driver stops there)
          PKG_NAME: demo-split
          PKG_VERSION: ${{ version }}
          # (script_env: v1 passes no variable through by name; empty is unset to the driver)
          MAX_JOBS: ${{ env.get("MAX_JOBS", default="") }}
          DEMO_ARCHS: ${{ archs }}
    requirements:
      host:
        # host names, written once
        - zlib
        # linux links it
        - if: linux
          then: libgomp
        - if: cuda_compiler_version != "None"
          then: cuda-version ${{ cuda_compiler_version }}.*
          else: nomkl

  - package:
      name: libdemo
    # pass 1's work directory; run_exports: false, or the staging host's run-exports (python_abi
    # of its Python above all) land on every output (pytorch-cpu-feedstock#518)
    inherit:
      from: demo-split
      run_exports: false
    build:
      string: ${{ "gpu" if cuda_compiler_version != "None" else "cpu" }}_h${{ hash }}_${{ number }}
      script:
"""
    + _SCRIPT
    + """\
    requirements:
      host:
        - zlib
        - if: linux
          then: libgomp
        - if: cuda_compiler_version != "None"
          then: cuda-version ${{ cuda_compiler_version }}.*
          else: nomkl
      run:
        - python  # its own Python
                  # (a second line)
        - demo-data ${{ version }}.*
      run_exports:
        - ${{ pin_subpackage("libdemo", upper_bound="x.x") }}
    tests:
      - python:
          imports:
            - demo
          # meta.yaml's imports test runs no pip check (a command may)
          pip_check: false
      - files:
          source:
            - tests/check.py
        script:
          - if: (python | version_to_buildstring | int) >= 311
            then: python tests/check.py

about:
  homepage: https://example.org
  license: MIT
"""
)


def test_a_small_recipe_converts_to_exactly_this() -> None:
    """Every rule at once: context from the preamble's sets, a test written out where used, a list built
    under conditions written out per output with if/then/else, selectors as if:, comments with their lines
    (a Jinja comment once, with the first item of its set), conda-build's keys as rattler-build's."""
    text = recipe_v1.convert(SMALL_META, source="meta.yaml")
    banner, body = text.split("\n# demo", 1)
    assert banner.startswith(f"# GENERATED from meta.yaml by `{recipe_v1.COMMAND}`")
    assert "# demo" + body == SMALL_V1_BODY


def test_the_small_conversion_is_a_recipe_the_real_rattler_build_renders(tmp_path: Path) -> None:
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(recipe_v1.convert(SMALL_META, source="meta.yaml"))
    variants = tmp_path / "linux_64_.yaml"
    variants.write_text(
        "target_platform:\n- linux-64\ncuda_compiler_version:\n- '12.9'\npython:\n- 3.12.* *_cpython\n"
    )
    outputs = {o.name: o for o in rattler_render.render(recipe, read_configuration(variants))}
    assert set(outputs) == {"libdemo"}
    rendered = outputs["libdemo"].recipe
    assert rendered["requirements"]["host"] == ["zlib", "libgomp", "cuda-version 12.9.*"]
    assert rendered["build"]["number"] == 100 and outputs["libdemo"].build_string.startswith("gpu_h")
    assert rendered["requirements"]["run"][1] == "demo-data 1.2.3.*"
    # script_env's NAME=value: the recipe's own value (pass 1, the staging output, carries it)
    stage = outputs["libdemo"].recipe["staging_caches"][0]
    assert stage["build"]["script"]["env"]["DEMO_ARCHS"] == "7.5;12.0+PTX"


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        (
            "{% macro x() %}\n{% endmacro %}\n",
            r"meta\.yaml:1: \{% macro %\} is not one of the Jinja statements",
        ),
        ("package:\n  name: x\n  version: 1\nbuild:\n  noarch: python\n", r"'noarch' has no v1 counterpart"),
        ('{% set a = "x".upper() %}\npackage:\n  name: {{ a }}\n', r"meta\.yaml:1: the method \.upper\(\)"),
        ("package:\n  name: x\n  version: 1\n", r"meta\.yaml: meta\.yaml has no 'build'"),
        ("{% if linux %}\n{% set n = 1 %}\n{% endif %}\n", r"meta\.yaml:2: n is set under a condition only"),
        ("{% set n = 1 %}\na: {{ n }}\n{% set n = 2 %}\n", r"meta\.yaml:3: n is set again after it was used"),
        ("{% if linux %}\na: 1\n", r"meta\.yaml: an \{% if %\} or \{% for %\} block is not closed"),
    ],
)
def test_what_it_cannot_convert_stops_it_with_the_line(meta: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        recipe_v1.convert(meta, source="meta.yaml")


def test_a_condition_on_constants_only_is_decided_here() -> None:
    meta = (
        '{% set version = "2.0.rc1" %}\npackage:\n  name: x\n  version: {{ version }}\nsource:\n'
        '{% if "rc" in version %}\n  git_url: https://example.org/x.git\n  git_rev: v{{ version }}\n'
        "{% else %}\n  url: https://example.org/x.tar.gz\n{% endif %}\n"
        "build:\n  number: 0\nrequirements:\n  host:\n    - a\noutputs:\n  - name: x\n"
        "    build:\n      number: 0\nabout:\n  license: MIT\n"
    )
    text = recipe_v1.convert(meta, source="meta.yaml")
    assert "  - git: https://example.org/x.git\n    rev: v${{ version }}\n" in text
    assert "x.tar.gz" not in text


@pytest.mark.parametrize(
    ("spec", "v1"),
    [
        ("cuda-version ${{ cuda_compiler_version }}", "cuda-version ${{ cuda_compiler_version }}.*"),
        (
            "pytorch ${{ version }} ${{ flavour }}_*_${{ number }}",
            "pytorch ==${{ version }} ${{ flavour }}_*_${{ number }}",
        ),
        ("python ${{ python_min }}.*", "python ${{ python_min }}.*"),
        ("libblas * *_mkl", "libblas * *_mkl"),
        ("nccl <2.29", "nccl <2.29"),
        ("${{ pin_subpackage('a', exact=True) }}", "${{ pin_subpackage('a', exact=True) }}"),
        ("cross-python_${{ target_platform }}", "cross-python_${{ target_platform }}"),
    ],
)
def test_conda_short_version_forms_become_explicit(spec: str, v1: str) -> None:
    assert recipe_v1.canonical_spec(spec) == v1


@pytest.mark.parametrize(
    ("v0", "v1"),
    [
        ("PKG_HASH", "hash"),
        ("CONDA_PY", "python | version_to_buildstring"),
        ("py < 311", "(python | version_to_buildstring | int) < 311"),
        ("pin_subpackage('a', max_pin='x.x')", 'pin_subpackage("a", upper_bound="x.x")'),
        ('"v" ~ version.replace(".rc", "-rc")', '"v" ~ (version | replace(".rc", "-rc"))'),
        ('archs.split(";") | first', 'archs | split(";") | first'),
        ("not megabuild or (a != 1 and osx)", "not megabuild or (a != 1 and osx)"),
        ("(x if t else y) + 1", "(x if t else y) + 1"),
    ],
)
def test_expressions_in_v1_spelling(v0: str, v1: str) -> None:
    node = jinja_expr.to_v1(jinja_expr.parse(v0, "test"), "test")
    assert jinja_expr.unparse(node) == v1
    # written back, it parses to the same expression
    assert jinja_expr.parse(jinja_expr.unparse(node), "test") == node


def test_a_test_set_under_conditions_is_simplified() -> None:
    node = nodes.CondExpr(jinja_expr.parse("linux and aarch64", "t"), nodes.Const(True), nodes.Const(False))
    assert jinja_expr.unparse(jinja_expr.simplified(node)) == "linux and aarch64"
