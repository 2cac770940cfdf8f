#!/usr/bin/env python3
"""The test command: set up what the tests need on this machine, then run pytest with your arguments.

  python run-tests.py                       the whole suite
  python run-tests.py -m "not rehearsal"    any pytest arguments pass through (-k, -x, a test file, ...)
  python run-tests.py --ci                  what CI runs (.ci/run): also ruff, and the tree left unchanged

Set-up, each step skipped when what it installs is present:

1. the Debian packages the tests drive (DEBIAN_PACKAGES): 'apt-get update', then 'apt-get install' of the
   missing ones (as root, else through sudo);
2. the pinned Python packages of requirements-dev.txt: 'pip install -r requirements-dev.txt' when one of
   them is missing or at another version;
3. conda-forge's pinning: $CONDA_FORGE_PINNING, else ../shared/data/conda-forge-pinning beside the checkout.

pytest then runs on every core (pytest-xdist: '-n auto --dist loadgroup'; the tests sharing one expensive
fixture stay on one worker, tests/conftest.py); '-n 0' runs it in one process, '-n 4' on four.

Standard library only: it runs before requirements-dev.txt is installed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent
REQUIREMENTS = ROOT / "requirements-dev.txt"
PINNING = ROOT.parent / "shared" / "data" / "conda-forge-pinning"
# The compilers and build tools the rehearsal and the CMake consumer tests drive, binutils for readelf,
# graphviz for the build-structure picture, MinGW-w64 for the Windows patch tests' PE DLLs; each with a
# program that shows it is there where dpkg is not (another distribution).
DEBIAN_PACKAGES = {
    "cmake": "cmake",
    "ninja-build": "ninja",
    # the build driver compiles through it (recipe/megabuild/compiler_cache.py): every rehearsal, real build
    "ccache": "ccache",
    "g++": "g++",
    "binutils": "readelf",
    "graphviz": "dot",
    "patchelf": "patchelf",
    # the posix-thread flavour only: the gcc-mingw-w64-x86-64 metapackage would add the win32 flavour too
    # (44 MB more to fetch and ~200 MB to unpack on a new machine), which no test uses
    "gcc-mingw-w64-x86-64-posix": "x86_64-w64-mingw32-gcc-posix",
    # Wine 8's cmd runs bld.bat and the .bat activation scripts
    # (tests/megabuild/test_megabuild_windows_driver.py), with MinGW-w64's g++ building their Windows
    # stand-ins
    "wine64": "/usr/lib/wine/wine64",
    "g++-mingw-w64-x86-64-posix": "x86_64-w64-mingw32-g++-posix",
}
PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)")


class SetupError(Exception):
    """A set-up step that cannot be done here: one line naming the fix."""


def say(message: str) -> None:
    print(f"run-tests: {message}", flush=True)


def missing_debian_packages() -> list[str]:
    if shutil.which("dpkg-query") is None:
        return [package for package, program in DEBIAN_PACKAGES.items() if shutil.which(program) is None]
    missing = []
    for package in DEBIAN_PACKAGES:
        status = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True, check=False
        )
        if "install ok installed" not in status.stdout:
            missing.append(package)
    return missing


def install_debian_packages() -> None:
    missing = missing_debian_packages()
    if not missing:
        say(f"Debian packages: all {len(DEBIAN_PACKAGES)} present")
        return
    command = "apt-get install -y --no-install-recommends " + " ".join(missing)
    # a new machine unpacks about 1.3 GB (Wine and MinGW-w64): dpkg need not sync each file to disk on a
    # test machine (docs/records/2026-11-28-ci-time.md has the install's time with and without)
    unsafe_io = ["-o", "Dpkg::Options::=--force-unsafe-io"]
    if shutil.which("apt-get") is None:
        raise SetupError(f"{', '.join(missing)} missing and no apt-get here: install them ({command})")
    prefix = [] if os.geteuid() == 0 else ["sudo", "-n"]
    if prefix and shutil.which("sudo") is None:
        raise SetupError(f"{', '.join(missing)} missing: as root, run 'apt-get update && {command}'")
    say(f"Debian packages: installing {' '.join(missing)} (apt-get update first)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        subprocess.run([*prefix, "apt-get", "update"], check=True, env=env)
        subprocess.run([*prefix, *command.split(), *unsafe_io], check=True, env=env)
    except subprocess.CalledProcessError as exc:
        raise SetupError(
            f"'{' '.join(exc.cmd)}' failed (exit {exc.returncode}, above): as root, run "
            f"'apt-get update && {command}'"
        ) from None


def unmet_requirements(path: Path) -> list[str]:
    """The pinned requirements (name==version) of ``path`` not installed at that version."""
    unmet = []
    for line in path.read_text(encoding="utf-8").splitlines():
        match = PIN.match(line.strip())
        if match is None:
            continue
        try:
            installed = metadata.version(match["name"])
        except metadata.PackageNotFoundError:
            installed = None
        if installed != match["version"]:
            unmet.append(f"{match['name']}=={match['version']} ({installed or 'missing'})")
    return unmet


def install_requirements() -> None:
    unmet = unmet_requirements(REQUIREMENTS)
    if not unmet:
        say(f"Python packages: {REQUIREMENTS.name} satisfied")
        return
    say(f"Python packages: installing {REQUIREMENTS.name} for {', '.join(unmet)}")
    command = [sys.executable, "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)]
    if subprocess.run(command, check=False).returncode != 0:
        raise SetupError(
            f"pip could not install {REQUIREMENTS.name} (above); in a virtual environment it can: "
            "'python3 -m venv .venv && . .venv/bin/activate', then this command again"
        )


def locate_pinning() -> None:
    given = os.environ.get("CONDA_FORGE_PINNING")
    pinning = Path(given) if given else PINNING
    if not (pinning / "conda_build_config.yaml").is_file():
        where = f"$CONDA_FORGE_PINNING ({given})" if given else str(PINNING)
        raise SetupError(
            f"conda-forge's pinning not found at {where}: put shared/data beside the checkout, or point "
            "CONDA_FORGE_PINNING at a conda-forge-pinning directory"
        )
    os.environ["CONDA_FORGE_PINNING"] = str(pinning)
    say(f"conda-forge pinning: {pinning}")


def tree_state() -> str:
    """git's view of the working tree (tracked changes and untracked files)."""
    result = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout


def parallel(pytest_args: Sequence[str]) -> list[str]:
    """xdist's options, unless the arguments choose their own (-n, --dist, -p no:xdist)."""
    chosen = any(
        arg.startswith(("-n", "--numprocesses", "--dist", "-pno:xdist")) or arg == "no:xdist"
        for arg in pytest_args
    )
    return [] if chosen else ["-n", "auto", "--dist", "loadgroup"]


def run(command: Sequence[str]) -> int:
    say(" ".join(command))
    return subprocess.run(list(command), cwd=ROOT, check=False).returncode


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(
        prog="run-tests.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
        epilog="Every other argument goes to pytest ('python run-tests.py -- --help' shows pytest's).",
    )
    parser.add_argument(
        "--ci",
        action="store_true",
        help="also 'ruff check' and 'ruff format --check' first, and fail when the tests changed the "
        "git tree (a file written outside tmp_path or a git-ignored cache)",
    )
    parser.add_argument("--no-setup", action="store_true", help="skip the set-up steps")
    parser.add_argument("--setup-only", action="store_true", help="do the set-up, run no test")
    args, pytest_args = parser.parse_known_args(argv)
    if pytest_args[:1] == ["--"]:
        pytest_args = pytest_args[1:]
    return args, pytest_args


def main(argv: Sequence[str] | None = None) -> int:
    args, pytest_args = parse_args(argv)
    if not args.no_setup:
        install_debian_packages()
        install_requirements()
    locate_pinning()
    if args.setup_only:
        return 0
    python = sys.executable
    if args.ci:
        for command in (
            [python, "-m", "ruff", "check", "."],
            [python, "-m", "ruff", "format", "--check", "."],
        ):
            if run(command) != 0:
                return 1
    before = tree_state() if args.ci else ""
    status = run([python, "-m", "pytest", *parallel(pytest_args), *pytest_args])
    after = tree_state() if args.ci else ""
    if after != before:
        changed = sorted(set(before.splitlines()) ^ set(after.splitlines()))
        print(
            "error: the tests changed the tree (write under pytest's tmp_path, or git-ignore a cache): "
            + "; ".join(line.strip() for line in changed),
            file=sys.stderr,
        )
        return 1
    return status


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
