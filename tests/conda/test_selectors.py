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


@pytest.mark.parametrize(
    "selector",
    [
        'os.system("touch {marker}") == 0',
        '().__class__.__base__.__subclasses__() and os.system("touch {marker}")',
        'os.popen("touch {marker}").read()',
    ],
)
def test_a_pinning_found_beside_the_checkout_runs_no_code(tmp_path: Path, selector: str) -> None:
    """A clone in a shared directory: whoever can write its parent plants ../shared/data/conda-forge-pinning,
    where the tools look for the pinning. A selector that calls anything but a selector's few methods is one
    line naming the file and line; nothing of it runs."""
    from feedstock_tools.common.errors import InputError
    from feedstock_tools.conda.pinning import locate_pinning
    from feedstock_tools.conda.variants import parse_variant_text

    checkout, marker = tmp_path / "checkout", tmp_path / "planted-selector-ran"
    checkout.mkdir()
    planted = tmp_path / "shared" / "data" / "conda-forge-pinning" / "conda_build_config.yaml"
    planted.parent.mkdir(parents=True)
    planted.write_text(f"c_compiler:\n  - gcc  # [{selector.format(marker=marker)}]\n")
    found = locate_pinning(None, environ={}, checkout=checkout) / "conda_build_config.yaml"
    assert found == planted
    with pytest.raises(InputError) as refused:
        parse_variant_text(found.read_text(), "linux-64", {}, source=found)
    assert str(refused.value).startswith(f"{planted}: line 2: invalid selector [")
    assert "\n" not in str(refused.value) and not marker.exists()
