"""torch/version.py of the upstream stand-in: a TEST DOUBLE of 2.13.0's tools/generate_torch_version.py.

What it reproduces (each behaviour's 2.13.0 evidence is in ../README.md):
- it imports ``packaging`` before anything else, so a host without ``packaging`` fails here;
- when ``PYTORCH_BUILD_VERSION`` is set, ``PYTORCH_BUILD_NUMBER`` must be set too (an assert), and a build
  number above 1 appends ``.postN``;
- setup.py imports it at import time, and CMake's ``gen_torch_version`` target (built on every build) runs
  it as its own process under ``${Python_EXECUTABLE}`` to write ``torch/version.py`` when it changed.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent


def get_torch_version() -> str:
    version = (ROOT / "version.txt").read_text().strip()
    if os.getenv("PYTORCH_BUILD_VERSION"):
        assert os.getenv("PYTORCH_BUILD_NUMBER") is not None
        build_number = int(os.getenv("PYTORCH_BUILD_NUMBER", ""))
        version = os.getenv("PYTORCH_BUILD_VERSION", "")
        if build_number > 1:
            version += f".post{build_number}"
    Version(version)  # a version packaging cannot parse fails the build here
    return version


def main() -> None:
    parser = argparse.ArgumentParser(description="write torch/version.py (stand-in)")
    parser.add_argument("--is-debug", default="0")
    args = parser.parse_args()
    path = ROOT / "torch" / "version.py"
    debug = args.is_debug.upper() in {"1", "ON", "TRUE", "YES"}
    content = f'__version__ = "{get_torch_version()}"\ndebug = {debug}\ngit_version = "stand-in"\n'
    if not path.exists() or path.read_text() != content:
        path.write_text(content)


if __name__ == "__main__":
    main()
