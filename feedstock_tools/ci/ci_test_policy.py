"""Whether a CI job runs its packages' tests, and under which emulator: conda-forge.yml's ``test`` setting.

conda-smithy's rule (its templates build_steps.sh.tmpl and run_osx_build.sh.tmpl, 2026.8.5): ``all`` tests
everything; ``native`` skips (``--no-test``) every target the build machine is not; ``native_and_emulated``
also tests cross-compiled linux targets, which qemu-user runs through binfmt_misc, and skips every
cross-compiled macOS target. conda-build itself tests a cross build in an environment of the *target's*
packages, "expected" to run through "something like QEMU" (conda_build/build.py, ``test()``, 26.7.1).

This feedstock goes one step further for macOS: osx-64 is built on Apple silicon (conda-forge.yml), where
Rosetta 2 runs x86_64 programs, so ``native_and_emulated`` tests osx-64 under Rosetta instead of uploading it
untested. A runner without Rosetta is an error, not a silent skip.

Standard library only: ``.scripts/ci_settings.py`` runs it before anything is installed.
"""

from __future__ import annotations

import contextlib
import platform
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

POLICIES = ("all", "native", "native_and_emulated")

# (target, build machine) -> the emulator that runs the target's programs there
EMULATORS = {
    ("linux-aarch64", "linux-64"): "qemu-user",
    ("linux-ppc64le", "linux-64"): "qemu-user",
    ("osx-64", "osx-arm64"): "rosetta",
}

ROSETTA_INSTALL = [
    "/usr/bin/sudo",
    "-n",
    "/usr/sbin/softwareupdate",
    "--install-rosetta",
    "--agree-to-license",
]


class PackageTestError(Exception):
    """A setting or a machine that cannot give the tests conda-forge.yml asks for (one line)."""


# (platform.system(), platform.machine()) -> conda subdir of the machine running the build
SUBDIRS = {
    ("Linux", "x86_64"): "linux-64",
    ("Linux", "aarch64"): "linux-aarch64",
    ("Linux", "ppc64le"): "linux-ppc64le",
    ("Darwin", "x86_64"): "osx-64",
    ("Darwin", "arm64"): "osx-arm64",
}


def running_subdir() -> str:
    """This machine's conda subdir: what runs here natively (on CI: conda-forge.yml's build_platform)."""
    key = (platform.system(), platform.machine())
    if key not in SUBDIRS:
        raise PackageTestError(f"no conda subdir known for a {key[0]} {key[1]} build machine; pass --machine")
    return SUBDIRS[key]


@dataclass(frozen=True)
class PackageTestPlan:
    target: str
    build: str
    run_tests: bool
    emulator: str | None  # None: native, or not tested

    @property
    def conda_build_options(self) -> list[str]:
        return [] if self.run_tests else ["--no-test"]


def package_test_plan(policy: str, target: str, build: str) -> PackageTestPlan:
    """What conda-forge.yml's ``test: <policy>`` means for ``target`` built on ``build``."""
    if policy not in POLICIES:
        raise PackageTestError(f"test: {policy!r} in conda-forge.yml is not one of {', '.join(POLICIES)}")
    if target == build:
        return PackageTestPlan(target, build, True, None)
    emulator = EMULATORS.get((target, build))
    if policy == "all":
        return PackageTestPlan(target, build, True, emulator)
    if policy == "native" or emulator is None:
        return PackageTestPlan(target, build, False, None)
    return PackageTestPlan(target, build, True, emulator)


def rosetta_runs(run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> bool:
    """True where ``arch -x86_64`` can start an x86_64 program (Rosetta 2 installed on Apple silicon)."""
    try:
        return (
            run(["/usr/bin/arch", "-x86_64", "/usr/bin/true"], capture_output=True, check=False).returncode
            == 0
        )
    except OSError:
        return False


def ensure_emulator(
    plan: PackageTestPlan,
    install: bool,
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
) -> None:
    """Stop unless the plan's emulator works here; on CI (``install``) a missing Rosetta is installed first.

    qemu-user is registered by the workflow before the container starts (its "Configure binfmt_misc" step)
    and cannot be checked from inside it, so only Rosetta is checked.
    """
    if plan.emulator != "rosetta" or rosetta_runs(run):
        return
    if install:
        # no sudo or softwareupdate (not macOS): the error below says what is missing
        with contextlib.suppress(OSError):
            run(ROSETTA_INSTALL, check=False)
        if rosetta_runs(run):
            return
    raise PackageTestError(
        f"{plan.target} packages built on {plan.build} are tested under Rosetta 2, which does not run here: "
        "install it with 'softwareupdate --install-rosetta --agree-to-license', or set 'test: native' in "
        "conda-forge.yml to build them without their tests"
    )
