"""``deps``: the dependency-version table, on a PyTorch-shaped tree, the real wheel and the real pinning."""

from __future__ import annotations

import json
import tarfile
import textwrap
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
import yaml

from feedstock_tools.__main__ import main
from feedstock_tools.maintainer.deps import DEFAULT_RECIPE, Table, build_table, render_markdown
from feedstock_tools.maintainer.upstream_versions import normalise_name, parse_requirement
from feedstock_tools.maintainer.version_compare import satisfies, values_agree

# This project's copy of conda-forge's pinning, named explicitly (deps looks elsewhere by default).
DEFAULT_PINNING = Path(__file__).resolve().parents[3] / "shared" / "data" / "conda-forge-pinning"
TORCH_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
# The header of PyPI's CUDA build of torch 2.13.0 (its PEP 658 METADATA file, long description dropped).
CUDA_WHEEL_METADATA = (
    Path(__file__).parents[1]
    / "test_deps_data"
    / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl.metadata"
)

# What the test tree below records, laid out where upstream PyTorch records it (.ci/docker install
# scripts and pin files, vendored submodules' version files, requirement files).
TREE_VERSIONS = {
    "cuda": ["12.6.3", "12.9.1", "13.0.2"],
    "cudnn": ["9.10.2.21", "9.17.1.4", "9.19.0.56"],
    "magma": ["2.6.1"],
    "libabseil": ["20250127"],
    "libuv": ["1.48.0"],
    "mkl": ["2025.3.0"],
    "nccl": ["2.29.3"],
    "protobuf": ["5.29.3"],
    "sleef": ["3.8.0"],
    "fmt": ["11.1.4"],
    "pybind11": ["3.0.1"],
    "onednn": ["3.9.2"],
    "triton": ["3.7.0"],
    "numpy": ["*"],
    "six": ["*"],
    "sympy": [">=1.13.3"],
}


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def make_pytorch_shaped_tree(root: Path) -> Path:
    """A source tree with PyTorch's layout of version information (contents made up by this test)."""
    _write(
        root,
        ".gitmodules",
        """
        [submodule "third_party/sleef"]
            ignore = dirty
            path = third_party/sleef
            url = https://github.com/shibatch/sleef
        [submodule "third_party/tensorpipe"]
            ignore = dirty
            path = third_party/tensorpipe
            url = https://github.com/pytorch/tensorpipe.git
        [submodule "third_party/protobuf"]
            ignore = dirty
            path = third_party/protobuf
            url = https://github.com/protocolbuffers/protobuf.git
        [submodule "third_party/eigen"]
            ignore = dirty
            path = third_party/eigen
            url = https://gitlab.com/libeigen/eigen.git
        """,
    )
    cuda_functions = "\n".join(
        f"""
        function install_{cuda.replace(".", "")[:3]} {{
          CUDNN_VERSION={cudnn}
          install_cuda {cuda} cuda_{cuda}_000.00.00_linux
          install_cudnn {cuda.split(".")[0]} $CUDNN_VERSION
          CUDA_VERSION={cuda[:4]} bash install_nccl.sh
        }}
        """
        for cuda, cudnn in zip(TREE_VERSIONS["cuda"], TREE_VERSIONS["cudnn"], strict=True)
    )
    _write(
        root,
        ".ci/docker/common/install_cuda.sh",
        "#!/bin/bash\nset -ex\n\nfunction install_cuda {\n  version=$1\n  runfile=$2\n}\n"
        + textwrap.dedent(cuda_functions),
    )
    _write(
        root,
        ".ci/docker/common/install_magma.sh",
        f'#!/usr/bin/env bash\n    MAGMA_VERSION="{TREE_VERSIONS["magma"][0]}"\n',
    )
    _write(
        root,
        ".ci/docker/common/install_mkl.sh",
        f"#!/bin/bash\nset -ex\n\n# MKL\nMKL_VERSION={TREE_VERSIONS['mkl'][0]}\n",
    )
    _write(root, ".ci/docker/ci_commit_pins/nccl.txt", f"v{TREE_VERSIONS['nccl'][0]}-1\n")
    _write(root, ".ci/docker/triton_version.txt", f"{TREE_VERSIONS['triton'][0]}\n")
    _write(
        root,
        ".ci/docker/requirements-ci.txt",
        """
        #numpy
        #Description: Provides N-dimensional arrays and linear algebra
        numpy==1.26.2; python_version == "3.11" or python_version == "3.12"
        numpy==2.1.2; python_version >= "3.13"
        sympy==1.13.3
        """,
    )
    _write(
        root,
        "pyproject.toml",
        """
        [build-system]
        requires = [
            "setuptools>=77.0.0,<82",
            "numpy",
            "pyyaml",
            "six",  # dependency chain: NNPACK -> PeachPy -> six
            "typing-extensions>=4.10.0",
        ]
        build-backend = "setuptools.build_meta"

        [project]
        name = "torch"
        description = "Tensors and Dynamic neural networks in Python with strong GPU acceleration"
        dynamic = ["dependencies", "version"]

        [project.optional-dependencies]
        pyyaml = ["pyyaml>=99"]
        """,
    )
    _write(
        root, "requirements.txt", "# Python dependencies required for development\nsympy>=1.13.3\nfilelock\n"
    )
    major, minor, patch = TREE_VERSIONS["sleef"][0].split(".")
    _write(
        root,
        "third_party/sleef/CMakeLists.txt",
        f"""
        cmake_minimum_required(VERSION 3.18)
        set(SLEEF_VERSION_MAJOR {major})
        set(SLEEF_VERSION_MINOR {minor})
        set(SLEEF_VERSION_PATCHLEVEL {patch})
        project(SLEEF VERSION ${{SLEEF_VERSION_MAJOR}}.${{SLEEF_VERSION_MINOR}})
        """,
    )
    uv_major, uv_minor, uv_patch = TREE_VERSIONS["libuv"][0].split(".")
    _write(
        root,
        "third_party/tensorpipe/third_party/libuv/include/uv/version.h",
        f"""
        #ifndef UV_VERSION_H
        #define UV_VERSION_H
        #define UV_VERSION_MAJOR {uv_major}
        #define UV_VERSION_MINOR {uv_minor}
        #define UV_VERSION_PATCH {uv_patch}
        #define UV_VERSION_IS_RELEASE 1
        #endif
        """,
    )
    fmt_major, fmt_minor, fmt_patch = (int(part) for part in TREE_VERSIONS["fmt"][0].split("."))
    packed = fmt_major * 10000 + fmt_minor * 100 + fmt_patch
    _write(
        root,
        "third_party/fmt/include/fmt/base.h",
        f"// major*10000+minor*100+patch\n#define FMT_VERSION {packed}\n",
    )
    pb_major, pb_minor, pb_patch = TREE_VERSIONS["pybind11"][0].split(".")
    _write(
        root,
        "third_party/pybind11/include/pybind11/detail/common.h",
        f"""
        #define PYBIND11_VERSION_MAJOR {pb_major}
        #define PYBIND11_VERSION_MINOR {pb_minor}
        #define PYBIND11_VERSION_PATCH {pb_patch}
        """,
    )
    _write(
        root,
        "third_party/ideep/mkl-dnn/CMakeLists.txt",
        f'project(${{PROJECT_NAME}} VERSION "{TREE_VERSIONS["onednn"][0]}" LANGUAGES C CXX)\n',
    )
    _write(
        root,
        "third_party/protobuf/version.json",
        json.dumps({"main": {"protobuf_version": TREE_VERSIONS["protobuf"][0]}}),
    )
    _write(
        root,
        "third_party/protobuf/third_party/abseil-cpp/CMakeLists.txt",
        f"project(absl LANGUAGES CXX VERSION {TREE_VERSIONS['libabseil'][0]})\n",
    )
    return root


@pytest.fixture
def upstream_tree(tmp_path: Path) -> Path:
    return make_pytorch_shaped_tree(tmp_path / "pytorch-v2.13.0")


def _run_requirements(metadata_text: str) -> dict[str, str]:
    """Requires-Dist of a METADATA text read with the email parser, optional extras left out."""
    declared = {}
    for line in Parser().parsestr(metadata_text).get_all("Requires-Dist"):
        parsed = parse_requirement(line)
        if parsed and "extra" not in parsed[2]:
            declared[parsed[0]] = parsed[1]
    return declared


def _rows(table: Table) -> dict[str, dict]:
    return {row.package: row.__dict__ for row in table.rows}


def test_upstream_column_reads_pytorch_tree_layout(upstream_tree: Path, tmp_path: Path) -> None:
    table = build_table(upstream_tree, None, tmp_path / "no-recipe", tmp_path / "no-pinning", "linux-64")
    rows = _rows(table)
    for package, expected in TREE_VERSIONS.items():
        assert rows[package]["upstream"] == expected, package
    assert rows["cuda"]["source"] == ".ci/docker/common/install_cuda.sh"
    assert (
        rows["sleef"]["source"]
        == "third_party/sleef/CMakeLists.txt (submodule https://github.com/shibatch/sleef)"
    )
    assert rows["libabseil"]["source"] == (
        "third_party/protobuf/third_party/abseil-cpp/CMakeLists.txt "
        "(submodule https://github.com/protocolbuffers/protobuf.git)"
    )
    # eigen is a submodule in .gitmodules whose directory is empty (a checkout without submodules).
    assert rows["eigen"]["upstream"] == []
    assert any(note.startswith("eigen: submodule third_party/eigen") for note in table.notes)
    # Build requirements come from pyproject's [build-system], never from optional extras.
    assert rows["pyyaml"]["upstream"] == ["*"]
    assert rows["typing-extensions"]["upstream"] == [">=4.10.0"]
    assert rows["filelock"]["source"] == "requirements.txt"


def test_release_tarball_gives_the_same_upstream_column(upstream_tree: Path, tmp_path: Path) -> None:
    tarball = tmp_path / "pytorch-v2.13.0.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(upstream_tree, arcname="pytorch-v2.13.0")
    from_dir = build_table(upstream_tree, None, None, None, "linux-64")
    from_tar = build_table(tarball, None, None, None, "linux-64")
    assert [(r.package, r.upstream, r.source) for r in from_tar.rows] == [
        (r.package, r.upstream, r.source) for r in from_dir.rows
    ]


@pytest.mark.wheel
@pytest.mark.skipif(not TORCH_WHEEL.is_file(), reason=f"{TORCH_WHEEL} not present")
def test_real_wheel_and_shared_pinning(tmp_path: Path) -> None:
    with zipfile.ZipFile(TORCH_WHEEL) as wheel:
        declared = _run_requirements(wheel.read("torch-2.13.0+cpu.dist-info/METADATA").decode())
    assert declared, "the wheel declares run requirements"

    table = build_table(None, TORCH_WHEEL, tmp_path / "no-recipe", DEFAULT_PINNING, "linux-64")
    rows = _rows(table)
    seen = 0
    for row in rows.values():
        name = normalise_name(row["package"])
        if name in declared:
            assert row["upstream"] == [declared[name]]
            assert row["source"] == "wheel METADATA Requires-Dist"
            seen += 1
    assert seen >= 5  # filelock, fsspec, jinja2, networkx, sympy, typing-extensions …

    pinning = yaml.safe_load((DEFAULT_PINNING / "conda_build_config.yaml").read_text())
    assert rows["libabseil"]["conda_forge"] == [str(v) for v in pinning["libabseil"]]
    assert rows["protobuf"]["conda_forge"] == [str(v) for v in pinning["libprotobuf"]]
    # CUDA: 12.9 from the global pinning (CF_CUDA_ENABLED), 13.0 added by the unpaused cuda130 migration.
    assert rows["cuda"]["conda_forge"] == ["12.9", "13.0"]
    assert any("no upstream source tree" in note for note in table.notes)


@pytest.mark.wheel
@pytest.mark.skipif(not TORCH_WHEEL.is_file(), reason=f"{TORCH_WHEEL} not present")
def test_real_recipe_carries_every_requirement_of_the_real_wheel() -> None:
    table = build_table(None, TORCH_WHEEL, DEFAULT_RECIPE, DEFAULT_PINNING, "linux-64")
    assert not [note for note in table.notes if "recipe" in note.lower()]
    from_wheel = [row for row in table.rows if row.source == "wheel METADATA Requires-Dist"]
    assert from_wheel
    for row in from_wheel:
        assert row.recipe, f"the recipe does not list {row.package}"
        assert not row.mismatch, f"{row.package}: {row.reason}"
    # The recipe's CUDA versions are the ones conda-forge's pinning (with migrations) builds.
    rows = _rows(table)
    assert rows["cuda"]["recipe"] == rows["cuda"]["conda_forge"]


def test_cuda_wheel_metadata_fills_the_cuda_rows() -> None:
    declared = _run_requirements(CUDA_WHEEL_METADATA.read_text())
    table = build_table(None, CUDA_WHEEL_METADATA, DEFAULT_RECIPE, DEFAULT_PINNING, "linux-64")
    rows = _rows(table)
    for package, wheel_name in (
        ("cuda", "cuda-toolkit"),
        ("cudnn", "nvidia-cudnn-cu13"),
        ("nccl", "nvidia-nccl-cu13"),
    ):
        assert rows[package]["upstream"] == [declared[wheel_name]]
        assert rows[package]["source"] == f"wheel METADATA Requires-Dist ({wheel_name})"
    assert rows["triton"]["upstream"] == [declared["triton"]]
    # The PyPI build uses one CUDA; conda-forge builds two, so the older one is flagged.
    assert rows["cuda"]["mismatch"] and "12.9" in rows["cuda"]["reason"]
    # An exact wheel pin agrees with conda-forge's major pin.
    assert not rows["cudnn"]["mismatch"]
    # The recipe caps nccl below 2.29 for its CUDA 12.9 builds (old GPU architectures break with 2.29,
    # pytorch-cpu-feedstock f0218b70); the CUDA 13 wheel's 2.29.7 is outside that cap, so the row is flagged.
    assert rows["nccl"]["mismatch"] and "<2.29" in rows["nccl"]["reason"]
    if not rows["triton"]["recipe"]:
        assert rows["triton"]["mismatch"], "a run requirement of the wheel the recipe lacks is flagged"


RECIPE = """
{% set version = "2.13.0" %}
{% set mkl = "2024.*" %}
package:
  name: libtorch-split
  version: {{ version }}
requirements:
  host:
    - mkl-devel {{ mkl }}  # [blas_impl == "mkl"]
    - libuv
    - nccl  # [cuda_compiler_version != "None"]
outputs:
  - name: pytorch
    requirements:
      run:
        - sympy >=1.13.3
        - networkx
        - filelock
"""


def test_recipe_column_and_mismatch_flags(upstream_tree: Path, tmp_path: Path) -> None:
    recipe = tmp_path / "recipe"
    recipe.mkdir()
    (recipe / "meta.yaml").write_text(RECIPE)
    wheel_metadata = tmp_path / "METADATA"
    wheel_metadata.write_text(
        "Metadata-Version: 2.4\nName: torch\nRequires-Dist: networkx>=2.5.1\nRequires-Dist: filelock\n"
    )
    table = build_table(upstream_tree, wheel_metadata, recipe, DEFAULT_PINNING, "linux-64")
    rows = _rows(table)
    assert rows["mkl"]["recipe"] == ["2024.*"]
    assert rows["mkl"]["mismatch"], "recipe pins MKL 2024 while upstream uses 2025.3.0"
    assert rows["sympy"]["recipe"] == [">=1.13.3"] and not rows["sympy"]["mismatch"]
    assert rows["networkx"]["mismatch"], "upstream needs networkx>=2.5.1, the recipe drops the bound"
    assert not rows["filelock"]["mismatch"]
    assert rows["nccl"]["recipe"] == ["*"]  # seen only under the CUDA variant's selector
    assert not rows["nccl"]["mismatch"]  # conda-forge's nccl 2 matches upstream 2.29.3
    markdown = render_markdown(table)
    assert "| **mkl** ⚠ |" in markdown
    assert "- mkl: 2024.* does not match upstream 2025.3.0" in markdown


def test_inputs_left_out_degrade_to_notes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Left out, the upstream tree's and the wheel's columns stay empty with a note; given but missing, an
    input is an error (tests/test_strict_inputs.py: formerly a table and exit 0 for a mistyped path). The
    pinning is never left out: without --pinning or $CONDA_FORGE_PINNING, deps takes the copy beside the
    checkout (formerly an empty column and exit 0; test_strict_inputs.py has the case of none at all)."""
    for variable in ("CONDA_FORGE_PINNING", "CONDA_PREFIX"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no conda-smithy cache of the pinning either
    status = main(["deps"])
    out = capsys.readouterr().out
    assert status == 0
    assert out.startswith("| Package | Upstream | Recipe | Conda-forge | Source |")
    assert out.count("\n- ") == 2  # one note per input left out: upstream tree, wheel
    assert "no upstream source tree given (--upstream)" in out and "no wheel given (--wheel)" in out
    global_pins = yaml.safe_load((DEFAULT_PINNING / "conda_build_config.yaml").read_text())
    protobuf = next(line for line in out.splitlines() if line.startswith("| protobuf |"))
    assert protobuf.split(" | ")[3] == ", ".join(f"`{value}`" for value in global_pins["libprotobuf"])
    assert main(["deps", "--upstream", str(tmp_path / "missing")]) == 1
    assert capsys.readouterr().err.startswith(f"error: --upstream {tmp_path / 'missing'} does not exist")


def test_json_output_and_unwritable_destination(upstream_tree: Path, tmp_path: Path) -> None:
    target = tmp_path / "deps.json"
    assert main(["deps", "--upstream", str(upstream_tree), "--json", str(target)]) == 0
    data = json.loads(target.read_text())
    assert {row["package"] for row in data["rows"]} >= set(TREE_VERSIONS)
    assert data["inputs"]["upstream"] == str(upstream_tree)

    nowhere = tmp_path / "no-such-dir" / "deps.md"
    assert main(["deps", "--markdown", str(nowhere)]) == 1
    assert not nowhere.parent.exists()


@pytest.mark.parametrize(
    ("upstream", "conda", "agree"),
    [
        (["12.6.3", "12.9.1", "13.0.2"], ["12.9", "13.0"], True),
        (["12.6.3", "12.8.1"], ["12.9"], False),
        (["2.29.3"], ["2"], True),
        (["2025.3.0"], ["2026"], False),
        ([">=1.13.3"], [">=1.13.3"], True),
        ([">=1.13.3"], [">=1.14"], False),
        ([">=77.0.3"], [">=77.0.3,<82"], True),  # conda narrows upstream's range: every install fits it
        ([">=77.0.3,<82"], [">=77.0.3"], False),  # conda would install what upstream rules out
        ([">=4.10.0"], ["4.12.2"], True),
        (["3.7.0"], [">=3.8,<3.9"], False),
        (["*"], ["2"], True),
    ],
)
def test_values_agree(upstream: list[str], conda: list[str], agree: bool) -> None:
    assert values_agree(upstream, conda)[0] is agree


def test_satisfies_handles_compound_bounds() -> None:
    assert satisfies("2023.2.0", ">=2023,<2025")
    assert not satisfies("2025.0", ">=2023,<2025")
    assert satisfies("3.4.1", "~=3.4.0")
