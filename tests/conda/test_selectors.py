"""conda-build line-selector semantics, checked on lines taken from the shared pinning and our recipe."""

from pathlib import Path

import pytest
import yaml

from feedstock_tools.conda.selectors import SelectorError, select_lines, selector_namespace

PINNING = Path(__file__).resolve().parents[3] / "shared" / "data" / "conda-forge-pinning"


@pytest.mark.parametrize(
    ("subdir", "expected"),
    [
        ("linux-64", {"linux", "linux64", "unix", "x86", "x86_64"}),
        ("linux-aarch64", {"linux", "unix", "aarch64"}),
        ("osx-64", {"osx", "unix", "x86", "x86_64"}),
        ("osx-arm64", {"osx", "unix", "arm64"}),
        ("win-64", {"win", "win64", "x86", "x86_64"}),
    ],
)
def test_platform_flags_match_conda_build(subdir, expected):
    namespace = selector_namespace(subdir, environ={})
    flags = {
        "linux",
        "linux64",
        "osx",
        "unix",
        "win",
        "win64",
        "x86",
        "x86_64",
        "aarch64",
        "arm64",
        "ppc64le",
    }
    assert {flag for flag in flags if namespace[flag]} == expected


def test_variant_values_are_typed_like_conda_build():
    namespace = selector_namespace(
        "linux-64",
        {
            "python": "3.13.* *_cp313",
            "c_compiler_version": "15",
            "megabuild": "true",
            "cuda_compiler_version": "None",
        },
        environ={},
    )
    assert namespace["py"] == 313
    assert namespace["c_compiler_version"] == 15
    assert namespace["megabuild"] is True
    assert namespace["cuda_compiler_version"] == "None"


def test_select_lines_keeps_true_drops_false_and_comments():
    text = "a: 1\n# a comment line\nb: 2  # [osx]\nc: 3  # why  [linux and x86_64]\n"
    assert select_lines(text, selector_namespace("linux-64", environ={})) == "a: 1\nc: 3\n"


def test_environment_reaches_os_environ_in_selectors():
    line = 'x: 1  # [os.environ.get("CF_CUDA_ENABLED", "False") == "True"]\n'
    enabled = selector_namespace("linux-64", environ={"CF_CUDA_ENABLED": "True"})
    disabled = selector_namespace("linux-64", environ={})
    assert select_lines(line, enabled) == "x: 1\n"
    assert select_lines(line, disabled) == "\n"


def test_shared_pinning_cuda_lines_follow_cf_cuda_enabled():
    text = (PINNING / "conda_build_config.yaml").read_text()
    cuda = yaml.safe_load(
        select_lines(text, selector_namespace("linux-64", environ={"CF_CUDA_ENABLED": "True"}))
    )
    cpu = yaml.safe_load(select_lines(text, selector_namespace("linux-64", environ={})))
    assert cuda["cuda_compiler_version"] == ["None", 12.9]
    assert cpu["cuda_compiler_version"] == ["None"]


def test_unknown_name_reads_as_false_like_conda_build():
    text = "a: 1\nb: 2  # [no_such_key]\nc: 3  # [not no_such_key]\n"
    assert select_lines(text, selector_namespace("linux-64", environ={})) == "a: 1\nc: 3\n"


def test_unknown_name_is_an_error_naming_the_line_when_strict():
    with pytest.raises(SelectorError, match=r"line 2: invalid selector \[no_such_key\]"):
        select_lines("a: 1\nb: 2  # [no_such_key]\n", selector_namespace("linux-64", environ={}), strict=True)


def test_unknown_subdir_is_rejected():
    with pytest.raises(SelectorError, match="unknown conda subdir 'linux-32'"):
        selector_namespace("linux-32")
