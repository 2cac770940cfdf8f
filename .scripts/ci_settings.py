#!/usr/bin/env python3
"""Print one build setting derived from conda-forge.yml, for the shell scripts next to this file.

The shell scripts stay thin: which conda-build front end to run (``conda_build_tool``), the packages
that front end needs, the test policy (``test``) and what it means for one configuration (conda-build's
``--no-test``, or nothing; feedstock_tools/ci/ci_test_policy.py) are decided here, from the same
conda-forge.yml conda-smithy reads. Standard library only: it runs inside the build container before
anything is installed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

FEEDSTOCK_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(FEEDSTOCK_ROOT))

from feedstock_tools.ci.ci_test_policy import (  # noqa: E402
    SUBDIRS,
    PackageTestError,
    ensure_emulator,
    package_test_plan,
    running_subdir,
)
from feedstock_tools.common.ci_files import read  # noqa: E402  (needs the path above)
from feedstock_tools.common.configuration import read_configuration  # noqa: E402
from feedstock_tools.common.errors import InputError  # noqa: E402
from feedstock_tools.common.feedstock import Feedstock  # noqa: E402

# conda_build_tool -> (command, packages to install). conda-build is conda-smithy's default;
# "mambabuild" is boa's conda-build front end.
BUILD_TOOLS = {
    "conda-build": ("conda-build", "conda-build"),
    "mambabuild": ("conda-mambabuild", "conda-build boa"),
}


def setting(name: str) -> str:
    config = read(Feedstock(FEEDSTOCK_ROOT).forge_yml)
    tool = config.get("conda_build_tool", "conda-build")
    if tool not in BUILD_TOOLS:
        raise SystemExit(
            f"error: conda_build_tool {tool!r} in conda-forge.yml is not one of {', '.join(BUILD_TOOLS)}"
        )
    if name == "build-command":
        return BUILD_TOOLS[tool][0]
    if name == "build-deps":
        return BUILD_TOOLS[tool][1]
    if name == "test-policy":
        return test_policy(config)
    raise SystemExit(f"error: unknown setting {name!r}; use build-command, build-deps or test-policy")


def test_policy(config: dict) -> str:
    return str(config.get("test", "all") or "all")


def test_options(config_file: Path, machine: str | None) -> str:
    """conda-build's options for this configuration's tests on ``machine`` (default: the one running this);
    stops when the emulator they need is missing."""
    config = read(Feedstock(FEEDSTOCK_ROOT).forge_yml)
    target = read_configuration(config_file).target_platform
    try:
        plan = package_test_plan(test_policy(config), target, machine or running_subdir())
        ensure_emulator(plan, install=bool(os.environ.get("CI")))
    except PackageTestError as exc:
        raise SystemExit(f"error: {exc}") from None
    return " ".join(plan.conda_build_options)


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="ci_settings.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, what in [
        ("build-command", "the conda-build front end to run"),
        ("build-deps", "the packages it needs in the base environment"),
        ("test-policy", "conda-forge.yml's test setting"),
    ]:
        commands.add_parser(name, help=what)
    tests = commands.add_parser(
        "test-options", help="conda-build's test options for one configuration here (--no-test or nothing)"
    )
    tests.add_argument("config_file", type=Path, help=".ci_support/<config>.yaml")
    tests.add_argument(
        "--machine",
        choices=sorted(set(SUBDIRS.values())),
        help="the build machine as a conda subdir (default: this one)",
    )
    args = parser.parse_args()
    try:
        if args.command == "test-options":
            print(test_options(args.config_file, args.machine))
        else:
            print(setting(args.command))
    except InputError as exc:
        raise SystemExit(f"error: {exc}") from None
    except OSError as exc:
        raise SystemExit(f"error: cannot read {exc.filename}: {exc.strerror}") from None


if __name__ == "__main__":
    main()
