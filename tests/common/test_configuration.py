"""The one reader of a .ci_support file and its typed view (feedstock_tools/common/configuration.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from feedstock_tools.common import ci_files
from feedstock_tools.common.configuration import (
    Configuration,
    PythonVersion,
    cuda_version,
    cuda_versions,
    read_configuration,
)
from feedstock_tools.common.errors import InputError

REPO = Path(__file__).resolve().parents[2]
CI_SUPPORT = REPO / ".ci_support"


@pytest.mark.parametrize("path", sorted(CI_SUPPORT.glob("*.yaml")), ids=lambda path: path.stem)
def test_every_configuration_reads_as_conda_build_reads_it(path: Path) -> None:
    """The mapping is what conda-build's parse_config_file makes of the file (PyYAML's BaseLoader: every
    value text), and each typed field is that mapping's value."""
    raw = yaml.load(path.read_text(), Loader=yaml.BaseLoader)
    config = read_configuration(path)
    assert dict(config) == raw
    assert config.name == path.stem
    assert config.target_platform == raw["target_platform"][0]
    assert config.platform == raw["target_platform"][0].split("-")[0]
    assert config.blases == tuple(raw.get("blas_impl", []))
    for blas in config.blases:  # one BLAS of the job: the same file, the key cut to that value
        assert dict(config.for_blas(blas)) == {**raw, "blas_impl": [blas]}
        assert config.for_blas(blas).path == path
    assert config.arm_variant == raw.get("arm_variant_type", [None])[0]
    (cuda,) = raw["cuda_compiler_version"]
    assert config.cuda == (None if cuda == "None" else cuda)
    assert [python.spec for python in config.pythons] == raw["python"]
    for python in config.pythons:
        version, build = python.spec.split(" ")
        assert python.version + ".*" == version and python.build == build
        assert python.abi in ("_cpython", f"_cp{python.nodot}")
    assert config.python_min == raw["python_min"][0]
    assert config.docker_image == raw.get("docker_image", [None])[0]


def test_values_stay_the_text_conda_build_reads(tmp_path: Path) -> None:
    path = tmp_path / "v.yaml"
    path.write_text(
        "python_min:\n- 3.10\ncuda_compiler_version:\n- 12.9\nmegabuild:\n- true\ntarget_platform:\n"
        "- linux-64\nzip_keys:\n- - a\n  - b\n"
    )
    config = read_configuration(path)
    assert dict(config) == {
        "python_min": ["3.10"],
        "cuda_compiler_version": ["12.9"],
        "megabuild": ["true"],
        "target_platform": ["linux-64"],
        "zip_keys": [["a", "b"]],
    }
    assert config.values_of("zip_keys") == () and config.first("megabuild") == "true"
    assert config.cuda == "12.9" and config.python_min == "3.10" and config.pythons == ()


@pytest.mark.parametrize(
    ("spec", "version", "build"),
    [
        ("3.10.* *_cpython", "3.10", "*_cpython"),
        ("3.14.* *_cp314", "3.14", "*_cp314"),
        ("3.14.* *_cp314t", "3.14", "*_cp314t"),
        ("3.12.*", "3.12", ""),
        ("3.12", "3.12", ""),
    ],
)
def test_a_python_spec(spec: str, version: str, build: str) -> None:
    python = PythonVersion.parse(spec)
    assert (python.spec, python.version, python.build) == (spec, version, build)
    assert python.nodot == version.replace(".", "") and python.abi == build.lstrip("*")


@pytest.mark.parametrize("spec", ["pypy", "3", "", "3.12.* *_cpython extra"])
def test_a_python_spec_that_is_none_is_an_error(spec: str) -> None:
    with pytest.raises(InputError, match=r"cannot read a Python version from .*; expected e\.g\. '3\.11"):
        PythonVersion.parse(spec)


def test_the_cuda_version_of_a_file_and_of_one_variant() -> None:
    assert cuda_version({"cuda_compiler_version": ["12.9", "13.0"]}) == "12.9"
    assert cuda_version({"cuda_compiler_version": "None"}) is None
    assert cuda_version({"cuda_compiler_version": ["None"]}) is None
    assert cuda_version({}) is None
    assert cuda_versions({"cuda_compiler_version": ["12.9", "None", "13.0"]}) == ["12.9", "13.0"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("target_platform: [linux-64]\n", r"v\.yaml: line 1: flow style.*; re-render it with 'python -m"),
        ("- a\n", r"v\.yaml: the top level of a CI file must be a mapping; re-render it"),
    ],
)
def test_a_broken_file_is_one_line_naming_file_problem_and_fix(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "v.yaml"
    path.write_text(content)
    with pytest.raises(ci_files.CiFileError, match=message):
        read_configuration(path)
    with pytest.raises(InputError, match=r"cannot read .*absent\.yaml: No such file.*; give an existing"):
        read_configuration(tmp_path / "absent.yaml")


def test_what_the_tools_ask_of_a_file_without_them_names_the_file(tmp_path: Path) -> None:
    config = Configuration(tmp_path / "bare.yaml", {"python": ["3.11.* *_cpython", "3.10.* *_cpython"]})
    assert config.python_min == "3.10"  # no python_min: the oldest Python
    assert config.cuda is None and config.blases == () and config.arm_variant is None
    with pytest.raises(InputError, match=r"bare\.yaml: builds BLAS \(none\), not 'mkl'; choose one of those"):
        config.for_blas("mkl")
    with pytest.raises(InputError, match=r"bare\.yaml: no target_platform; re-render it"):
        _ = config.target_platform
    with pytest.raises(InputError, match=r"bare\.yaml: cannot read a Python version from 'x'"):
        _ = Configuration(tmp_path / "bare.yaml", {"python": ["x"]}).pythons
