"""The one place the maintainer tools reach into ``recipe/`` for the build driver's modules.

``recipe/megabuild`` is the package conda-build runs; the tools share its data models (the CMake cache
model, the staging table) instead of keeping copies. pytest puts ``recipe/`` on the path through
pyproject.toml; a CLI run gets it here.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

# This file is feedstock_tools/common/recipe_imports.py: the repository is three levels up.
REPO_ROOT = Path(__file__).resolve().parents[2]
RECIPE_DIR = REPO_ROOT / "recipe"


def import_megabuild(module: str) -> ModuleType:
    """``megabuild.<module>`` from this repository's recipe directory."""
    if str(RECIPE_DIR) not in sys.path:
        sys.path.append(str(RECIPE_DIR))
    return importlib.import_module(f"megabuild.{module}")
