"""Where conda-forge's global pinning is, found the way a maintainer's conda-smithy finds it.

A pinning directory holds ``conda_build_config.yaml`` (and, as the installed package lays it out,
``share/conda-forge/migrations/``). Every tool that needs one (``render-ci``, ``check``, ``deps``,
``solve-check``) asks :func:`locate_pinning`, which looks, in this order, at:

1. ``--pinning DIR``;
2. ``$CONDA_FORGE_PINNING`` (a directory);
3. ``../shared/data/conda-forge-pinning`` beside the checkout, where this project keeps its copy (CI, the
   tests and a fresh clone with ``shared/`` beside it);
4. conda-smithy's cache, ``${XDG_CACHE_HOME:-~/.cache}/conda-smithy/``: conda-smithy 2026.8.5 downloads the
   newest conda-forge-pinning package and extracts it there when ``conda smithy rerender`` runs without
   ``--exclusive-config-file`` (``configure_feedstock.py: get_cache_dir``, ``get_cached_cfp_file_path``);
5. the conda-forge-pinning package installed in the active environment, ``$CONDA_PREFIX/`` (its
   ``conda_build_config.yaml`` is what ``conda smithy rerender -e $CONDA_PREFIX/conda_build_config.yaml``
   names; conda-smithy reads migrations from ``share/conda-forge/migrations`` beside it:
   ``set_migration_fns``).

When none holds a ``conda_build_config.yaml`` the tool stops with one line listing every place it looked.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path

from feedstock_tools.common import user_cache
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.recipe_imports import REPO_ROOT

PINNING_ENV = "CONDA_FORGE_PINNING"
CONFIG_FILE = "conda_build_config.yaml"
# This project's copy of conda-forge's pinning, relative to the directory holding the checkout.
SHARED_PINNING = Path("shared") / "data" / "conda-forge-pinning"


def candidates(environ: Mapping[str, str], checkout: Path | None = None) -> list[tuple[str, Path]]:
    """(where it came from, directory) for every place to look after ``--pinning``, in order; ``checkout``:
    the repository whose tools run (its parent may hold ``shared/``)."""
    checkout = REPO_ROOT if checkout is None else checkout
    found = []
    if environ.get(PINNING_ENV):
        found.append((f"${PINNING_ENV}", Path(environ[PINNING_ENV])))
    found.append(("beside the checkout", checkout.parent / SHARED_PINNING))
    found.append(("conda-smithy's cache", user_cache.xdg_cache_home(environ) / "conda-smithy"))
    if environ.get("CONDA_PREFIX"):
        found.append(("$CONDA_PREFIX", Path(environ["CONDA_PREFIX"])))
    return found


def locate_pinning(
    explicit: Path | None, environ: Mapping[str, str] | None = None, checkout: Path | None = None
) -> Path:
    """The pinning directory to use (``checkout`` as in :func:`candidates`); a one-line :class:`ToolError`
    listing where it looked when there is none."""
    environ = os.environ if environ is None else environ
    if explicit is not None:
        if not (explicit / CONFIG_FILE).is_file():
            raise ToolError(
                f"--pinning {explicit}: no {CONFIG_FILE} there; pass conda-forge-pinning's directory"
            )
        return explicit
    places = candidates(environ, checkout)
    for origin, directory in places:
        if (directory / CONFIG_FILE).is_file():
            return directory
        if origin == f"${PINNING_ENV}":
            raise ToolError(
                f"${PINNING_ENV}={directory}: no {CONFIG_FILE} there; point it at conda-forge-pinning"
            )
    looked = ", ".join(str(directory) for _, directory in places)
    raise ToolError(
        f"conda-forge's pinning not found (looked in {looked}); pass --pinning DIR, set ${PINNING_ENV}, "
        "or install it: conda install -c conda-forge conda-forge-pinning"
    )


def add_pinning_argument(parser: argparse.ArgumentParser) -> None:
    """``--pinning DIR``, with the search order in its help."""
    parser.add_argument(
        "--pinning",
        type=Path,
        default=None,
        help=(
            f"conda-forge-pinning directory (holds {CONFIG_FILE}); default: ${PINNING_ENV}, else "
            f"../{SHARED_PINNING} beside the checkout, else conda-smithy's cache "
            "(${XDG_CACHE_HOME:-~/.cache}/conda-smithy), else conda-forge-pinning installed in $CONDA_PREFIX"
        ),
    )
