#!/usr/bin/env python3
"""Print one build setting derived from conda-forge.yml, for the shell scripts next to this file.

Usage: ci_settings.py build-command | build-deps | test-policy

The shell scripts stay thin: which conda-build front end to run (``conda_build_tool``), the packages
that front end needs, and the test policy (``test``) are decided here, from the same conda-forge.yml
conda-smithy reads. Standard library only: it runs inside the build container before anything is
installed.
"""

from __future__ import annotations

import sys
from pathlib import Path

FEEDSTOCK_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(FEEDSTOCK_ROOT))

from feedstock_tools.ci_files import read  # noqa: E402  (needs the path above)

# conda_build_tool -> (command, packages to install). conda-build is conda-smithy's default;
# "mambabuild" is boa's conda-build front end.
BUILD_TOOLS = {
    "conda-build": ("conda-build", "conda-build"),
    "mambabuild": ("conda-mambabuild", "conda-build boa"),
}


def setting(name: str) -> str:
    config = read(FEEDSTOCK_ROOT / "conda-forge.yml")
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
        return str(config.get("test", "all") or "all")
    raise SystemExit(f"error: unknown setting {name!r}; use build-command, build-deps or test-policy")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.strip().splitlines()[2])
    print(setting(sys.argv[1]))
