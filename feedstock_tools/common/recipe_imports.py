"""Where this checkout is: the repository root and ``recipe/``, which holds the build driver (``megabuild``).

The tools import the driver as a plain package (``from megabuild import atomic_file``); the package's
``feedstock_tools/__init__.py`` is the one place that puts ``recipe/`` on the path for a CLI run.
"""

from __future__ import annotations

from pathlib import Path

# This file is feedstock_tools/common/recipe_imports.py: the repository is three levels up.
REPO_ROOT = Path(__file__).resolve().parents[2]
RECIPE_DIR = REPO_ROOT / "recipe"
