"""One configuration selector for every command (feedstock_tools/common/config_selector.py): the names,
parts, globs and paths of this feedstock's real .ci_support files, the CPU-name rule, the filters, and that
build-locally.py, rehearse and render give the same answer and the same error for the same selector."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from feedstock_tools.common.config_selector import (
    ConfigFilter,
    SelectionError,
    kept,
    resolve_by_fields,
    resolve_files,
    resolve_one,
    select,
    select_one,
)
from feedstock_tools.common.configuration import read_configuration

REPO = Path(__file__).resolve().parents[2]
CI_SUPPORT = REPO / ".ci_support"
NAMES = sorted(path.stem for path in CI_SUPPORT.glob("*.yaml"))
CPU = [name for name in NAMES if "cuda_compiler_versionNone" in name]
CUDA = [name for name in NAMES if "cuda_compiler_version1" in name]


def test_exact_name_part_and_glob() -> None:
    assert select(NAMES, "osx_arm64_") == ["osx_arm64_"]
    assert select_one(NAMES, "osx_arm64") == "osx_arm64_"
    assert select(NAMES, "osx_*") == ["osx_64_", "osx_arm64_"]
    assert resolve_one("osx_arm64", CI_SUPPORT) == CI_SUPPORT / "osx_arm64_.yaml"


def test_a_cuda_glob_does_not_match_the_cpu_builds_through_their_name() -> None:
    linux_64_cuda = [n for n in CUDA if n.startswith("linux_64")]
    assert len(linux_64_cuda) == 2 and CPU
    assert select(NAMES, "linux_64*cuda*") == linux_64_cuda  # formerly also the two CPU builds
    assert select(NAMES, "cuda") == CUDA
    assert select(NAMES, "linux_64*cpu*") == [n for n in CPU if n.startswith("linux_64")]
    assert select(NAMES, "*versionNone*") == CPU  # naming None matches the name as written


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("nope", "no configuration matches 'nope'; list them with './build-locally.py --list'"),
        ("linux_64", "'linux_64' matches 3 configurations (linux_64_c_compiler_version14"),
        ("  ", "an empty configuration name selects nothing"),
    ],
)
def test_selection_errors_name_the_fix(selector: str, message: str) -> None:
    with pytest.raises(SelectionError, match=message.replace("(", r"\(").replace("*", r"\*")):
        select_one(NAMES, selector)


def test_paths(tmp_path: Path) -> None:
    crafted = tmp_path / "crafted.yaml"
    crafted.write_text((CI_SUPPORT / "osx_arm64_.yaml").read_text())
    assert resolve_files(str(CI_SUPPORT / "osx_arm64_.yaml"), CI_SUPPORT) == [CI_SUPPORT / "osx_arm64_.yaml"]
    assert resolve_one(str(crafted), CI_SUPPORT, outside=True) == crafted
    for path, message in [
        (crafted, "is not in"),  # build-locally.py builds only what .ci_support holds
        (tmp_path / "missing.yaml", "no configuration file"),
        (tmp_path, "is a directory"),
    ]:
        with pytest.raises(SelectionError, match=message):
            resolve_one(str(path), CI_SUPPORT)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(SelectionError, match=r"is not a \.yaml configuration file"):
        resolve_one(str(tmp_path / "notes.txt"), CI_SUPPORT, outside=True)
    with pytest.raises(SelectionError, match=r"no configurations in .*render-ci"):
        resolve_one("osx", tmp_path / "empty")


def test_filters_by_platform_cuda_and_blas() -> None:
    configs = [read_configuration(CI_SUPPORT / f"{name}.yaml") for name in NAMES]

    def kept_names(**fields: str) -> list[str]:
        return [config.name for config in ConfigFilter(**fields).apply(configs)]

    osx = ["osx_64_", "osx_arm64_"]
    assert kept_names(cuda="none") == sorted([*CPU, *osx])
    assert kept_names(cuda="any") == CUDA
    assert kept_names(platform="linux_64", cuda="13.0", blas="mkl") == [
        n for n in CUDA if n.startswith("linux_64") and "13.0" in n
    ]
    # --blas keeps the jobs that build that BLAS, among others: linux-64 and osx-64 build both
    both = [config.name for config in configs if config.blases == ("generic", "mkl")]
    assert both == [n for n in NAMES if n.startswith(("linux_64", "osx_64"))] and len(both) == 4
    assert kept_names(blas="mkl") == sorted([*both, *(n for n in NAMES if n.startswith("win_64"))])
    assert kept_names(blas="generic") == [n for n in NAMES if not n.startswith("win_64")]
    assert kept_names(platform="osx-arm64") == ["osx_arm64_"]
    with pytest.raises(SelectionError, match=r"--cuda 11\.8: no configuration has it; choose one of none"):
        kept_names(cuda="11.8")
    with pytest.raises(SelectionError, match=r"--blas openblas: .* choose one of"):
        kept_names(blas="openblas")
    with pytest.raises(SelectionError, match=r"no configuration is platform osx-64, CUDA 12\.9"):
        kept_names(platform="osx-64", cuda="12.9")


def test_files_by_fields_with_a_preference() -> None:
    """The configurations a filter keeps, and the one configuration of a target (wheel-layout's choice): the
    first filter that keeps any decides, and it must keep exactly one."""
    every = kept(CI_SUPPORT, ConfigFilter())
    assert [config.path for config in every] == sorted(CI_SUPPORT.glob("*.yaml"))
    osx_64 = [CI_SUPPORT / f"{name}.yaml" for name in NAMES if name.startswith("osx_64")]
    assert [config.path for config in kept(CI_SUPPORT, ConfigFilter(platform="osx-64"))] == osx_64

    def one(platform: str, blas_first: str) -> str:
        preferred = [ConfigFilter(platform, "cpu", blas_first), ConfigFilter(platform, "cpu")]
        return resolve_by_fields(CI_SUPPORT, preferred, "--config").name

    assert one("osx-64", "mkl") == one("osx-64", "generic") == "osx_64_"  # one job builds both
    assert one("win-64", "generic") == "win_64_cuda_compiler_versionNone"  # no generic build: the next filter
    with pytest.raises(SelectionError, match=r"^2 configurations in .* \(linux_aarch64_arm_variant_typesbsa"):
        resolve_by_fields(CI_SUPPORT, [ConfigFilter("linux-aarch64", "12.9")], "--config")


def test_every_command_answers_the_same_selector_alike() -> None:
    """build-locally.py, rehearse and render: the same error line for a selector that names nothing or
    several, and the same choice for one that names one."""
    commands = {
        "build-locally.py": [sys.executable, "build-locally.py", "--dry-run"],
        "rehearse": [sys.executable, "-m", "feedstock_tools", "rehearse", "--work-dir", "/nonexistent"],
        "render": [sys.executable, "-m", "feedstock_tools", "render"],
    }
    for selector in ("nope", "linux_64"):
        lines = set()
        for name, command in commands.items():
            done = subprocess.run([*command, selector], cwd=REPO, capture_output=True, text=True, check=False)
            assert done.returncode != 0 and done.stdout == "", (name, done.stdout)
            lines.add(done.stderr.strip())
        assert len(lines) == 1 and len(lines.pop().splitlines()) == 1
    dry = subprocess.run(
        [*commands["build-locally.py"], "--build", ".ci_support/osx_64_.yaml"],
        cwd=REPO, capture_output=True, text=True, check=False, env={"OSX_SDK_DIR": "/nowhere", "PATH": ""},
    )  # fmt: skip
    assert dry.returncode == 0 and "CONFIG=osx_64_ " in dry.stdout, dry.stderr
