"""Which CI jobs run their packages' tests (feedstock_tools/ci/ci_test_policy.py, .scripts/ci_settings.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from feedstock_tools.ci.ci_test_policy import (
    ROSETTA_INSTALL,
    PackageTestError,
    ensure_emulator,
    package_test_plan,
    rosetta_runs,
    running_subdir,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("policy", "target", "build", "tested", "emulator"),
    [
        # conda-smithy 2026.8.5 build_steps.sh.tmpl / run_osx_build.sh.tmpl
        ("native_and_emulated", "linux-64", "linux-64", True, None),
        ("native_and_emulated", "linux-aarch64", "linux-64", True, "qemu-user"),
        ("native", "linux-aarch64", "linux-64", False, None),
        ("all", "linux-aarch64", "linux-64", True, "qemu-user"),
        ("native_and_emulated", "osx-arm64", "osx-64", False, None),  # Intel cannot run arm64
        ("all", "osx-arm64", "osx-64", True, None),
        # this feedstock's addition: Rosetta 2 runs osx-64 on Apple silicon
        ("native_and_emulated", "osx-64", "osx-arm64", True, "rosetta"),
        ("native", "osx-64", "osx-arm64", False, None),
    ],
)
def test_plan_follows_conda_smithy_plus_rosetta(
    policy: str, target: str, build: str, tested: bool, emulator: str | None
) -> None:
    plan = package_test_plan(policy, target, build)
    assert (plan.run_tests, plan.emulator) == (tested, emulator)
    assert plan.conda_build_options == ([] if tested else ["--no-test"])


def test_unknown_policy_is_one_line() -> None:
    with pytest.raises(PackageTestError, match=r"^test: 'sometimes' in conda-forge.yml is not one of all, "):
        package_test_plan("sometimes", "linux-64", "linux-64")


def test_rosetta_does_not_run_on_this_linux_machine() -> None:
    # the real check: GNU coreutils' arch takes no -x86_64, so it fails here as on a Mac without Rosetta
    assert rosetta_runs() is False


class RosettaRunnerDouble:
    """Test double of subprocess.run for a Mac: `arch -x86_64` works once the install command has run."""

    def __init__(self, install_works: bool) -> None:
        self.install_works = install_works
        self.installed = False
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str], **_: object) -> subprocess.CompletedProcess:
        self.calls.append(argv)
        if argv == ROSETTA_INSTALL:
            self.installed = self.install_works
            return subprocess.CompletedProcess(argv, 0 if self.install_works else 1)
        return subprocess.CompletedProcess(argv, 0 if self.installed else 1)


@pytest.mark.parametrize("install_works", [True, False])
def test_missing_rosetta_is_installed_on_ci_or_stops_the_build(install_works: bool) -> None:
    plan = package_test_plan("native_and_emulated", "osx-64", "osx-arm64")
    runner = RosettaRunnerDouble(install_works)
    if install_works:
        ensure_emulator(plan, install=True, run=runner)
    else:
        with pytest.raises(
            PackageTestError, match=r"^osx-64 packages built on osx-arm64 are tested under Rosetta 2"
        ):
            ensure_emulator(plan, install=True, run=runner)
    assert ROSETTA_INSTALL in runner.calls


def test_without_ci_nothing_is_installed() -> None:
    plan = package_test_plan("native_and_emulated", "osx-64", "osx-arm64")
    runner = RosettaRunnerDouble(install_works=True)
    with pytest.raises(PackageTestError, match="softwareupdate --install-rosetta"):
        ensure_emulator(plan, install=False, run=runner)
    assert ROSETTA_INSTALL not in runner.calls
    qemu = package_test_plan("native_and_emulated", "linux-aarch64", "linux-64")
    ensure_emulator(qemu, install=False, run=runner)  # qemu is the workflow's to register: not checked


@pytest.fixture
def scripts_copy(tmp_path: Path) -> Path:
    """.scripts, conda-forge.yml and .ci_support with only the standard-library modules the scripts use."""
    shutil.copytree(REPO / ".scripts", tmp_path / ".scripts")
    shutil.copytree(REPO / ".ci_support", tmp_path / ".ci_support")
    for module in (
        "__init__.py",
        "ci/__init__.py",
        "ci/ci_test_policy.py",
        # ci_files reads every file through inputs.read_text (one line for a byte that is not UTF-8)
        "common/__init__.py",
        "common/ci_files.py",
        "common/configuration.py",
        "common/errors.py",
        "common/feedstock.py",
        "common/inputs.py",
    ):
        (tmp_path / "feedstock_tools" / module).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / "feedstock_tools" / module, tmp_path / "feedstock_tools" / module)
    shutil.copy2(REPO / "conda-forge.yml", tmp_path / "conda-forge.yml")
    return tmp_path


def _test_options(root: Path, config: str, machine: str | None) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    config_file = next((root / ".ci_support").glob(f"{config}*.yaml"))
    command = [sys.executable, root / ".scripts" / "ci_settings.py", "test-options", config_file]
    return subprocess.run(
        command + (["--machine", machine] if machine else []),
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_this_machine_is_linux_64() -> None:
    assert running_subdir() == "linux-64"  # CI and this project's machines: x86-64 Linux


def test_an_x64_windows_runner_is_win_64(monkeypatch: pytest.MonkeyPatch) -> None:
    """platform.machine() on x64 Windows is "AMD64" (its PROCESSOR_ARCHITECTURE), not "x86_64"."""
    monkeypatch.setattr("platform.system", lambda: "Windows")
    monkeypatch.setattr("platform.machine", lambda: "AMD64")
    assert running_subdir() == "win-64"


@pytest.mark.parametrize(
    ("config", "machine"),
    [
        ("linux_64", None),
        ("linux_aarch64", None),
        ("linux_aarch64", "linux-64"),
        ("osx_arm64", "osx-arm64"),
        ("win_64", "win-64"),  # what run_win_build.bat asks on a Windows runner (native: nothing to add)
    ],
)
def test_native_and_qemu_targets_are_tested(scripts_copy: Path, config: str, machine: str | None) -> None:
    result = _test_options(scripts_copy, config, machine)
    assert (result.returncode, result.stdout, result.stderr) == (0, "\n", "")


def test_osx_64_on_apple_silicon_without_rosetta_stops_with_one_line(scripts_copy: Path) -> None:
    result = _test_options(scripts_copy, "osx_64", "osx-arm64")  # arch -x86_64 fails here, as without Rosetta
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("error: osx-64 packages built on osx-arm64 are tested under Rosetta 2")
    assert result.stderr.count("\n") == 1


def test_a_machine_that_cannot_run_the_target_builds_it_untested(scripts_copy: Path) -> None:
    assert _test_options(scripts_copy, "osx_64", None).stdout == "--no-test\n"  # macOS on this Linux
    assert _test_options(scripts_copy, "osx_arm64", "osx-64").stdout == "--no-test\n"  # an Intel Mac
    forge = scripts_copy / "conda-forge.yml"
    forge.write_text(forge.read_text().replace("test: native_and_emulated", "test: native"))
    assert _test_options(scripts_copy, "linux_aarch64", None).stdout == "--no-test\n"
    assert _test_options(scripts_copy, "linux_64", None).stdout == "\n"


@pytest.mark.parametrize(
    ("tool", "command", "deps"),
    [("conda-build", "conda-build", "conda-build"), ("mambabuild", "conda-mambabuild", "conda-build boa")],
)
def test_build_scripts_honour_conda_build_tool(
    scripts_copy: Path, tool: str, command: str, deps: str
) -> None:
    forge = scripts_copy / "conda-forge.yml"
    forge.write_text(forge.read_text().replace("conda_build_tool: conda-build", f"conda_build_tool: {tool}"))

    def setting(name: str) -> str:
        script = scripts_copy / ".scripts" / "ci_settings.py"
        result = subprocess.run([sys.executable, script, name], capture_output=True, text=True, check=True)
        return result.stdout.strip()

    assert (setting("build-command"), setting("build-deps")) == (command, deps)
    assert setting("test-policy") == "native_and_emulated"


def test_bad_input_is_one_line(scripts_copy: Path) -> None:
    script = scripts_copy / ".scripts" / "ci_settings.py"
    missing = subprocess.run(
        [sys.executable, script, "test-options", scripts_copy / "absent.yaml"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr.startswith("error: cannot read ") and missing.stderr.count("\n") == 1
    unknown = _test_options(scripts_copy, "linux_aarch64", "linux-sparc")
    assert unknown.returncode == 2 and "invalid choice: 'linux-sparc'" in unknown.stderr
