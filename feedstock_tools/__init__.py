"""Maintainer tools of the pytorch feedstock, one sub-package per job (docs/reference/architecture.md).

``megabuild`` <- ``common`` <- ``conda`` <- ``ci`` <- {``maintainer``, ``proofs``} <- ``release``: a
sub-package imports only those to its left; ``__main__`` (the CLI) parses the command line and dispatches to
the tool modules. ``megabuild`` is the build driver (``recipe/megabuild``, standard library only), which the
tools import as the tests do (``from megabuild import atomic_file``) and which imports no tool.

Python runs this file before any module of the package, so it is the one place that puts ``recipe/`` on the
path for a run outside pytest (``python -m feedstock_tools``, build-locally.py, ``.scripts/``,
``benchmarks/``): every ``from megabuild import ...`` below finds the driver of this checkout, whatever
directory the command starts in. pytest puts ``recipe/`` first through pyproject.toml's ``pythonpath``.
"""

import sys
from pathlib import Path

_RECIPE_DIR = str(Path(__file__).resolve().parents[1] / "recipe")
if _RECIPE_DIR not in sys.path:
    sys.path.append(_RECIPE_DIR)
