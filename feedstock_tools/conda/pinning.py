"""Where conda-forge's global pinning is, found the way a maintainer's conda-smithy finds it.

A pinning directory holds ``conda_build_config.yaml`` (and, as the installed package lays it out,
``share/conda-forge/migrations/``). The tools that need one (``render-ci``, ``check``, ``deps``) look, in
this order, at:

1. ``--pinning DIR``;
2. ``$CONDA_FORGE_PINNING`` (a directory);
3. conda-smithy's cache, ``${XDG_CACHE_HOME:-~/.cache}/conda-smithy/``: conda-smithy 2026.8.5 downloads the
   newest conda-forge-pinning package and extracts it there when ``conda smithy rerender`` runs without
   ``--exclusive-config-file`` (``configure_feedstock.py: get_cache_dir``, ``get_cached_cfp_file_path``);
4. the conda-forge-pinning package installed in the active environment, ``$CONDA_PREFIX/`` (its
   ``conda_build_config.yaml`` is what ``conda smithy rerender -e $CONDA_PREFIX/conda_build_config.yaml``
   names; conda-smithy reads migrations from ``share/conda-forge/migrations`` beside it:
   ``set_migration_fns``).

This project's CI and tests name their copy explicitly (``../shared/data/conda-forge-pinning``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path

from feedstock_tools.common.errors import ToolError

PINNING_ENV = "CONDA_FORGE_PINNING"
CONFIG_FILE = "conda_build_config.yaml"


def candidates(environ: Mapping[str, str]) -> list[tuple[str, Path]]:
    """(where it came from, directory) for every place to look after ``--pinning``, in order."""
    found = []
    if environ.get(PINNING_ENV):
        found.append((f"${PINNING_ENV}", Path(environ[PINNING_ENV])))
    cache = Path(environ["XDG_CACHE_HOME"]) if environ.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    found.append(("conda-smithy's cache", cache / "conda-smithy"))
    if environ.get("CONDA_PREFIX"):
        found.append(("$CONDA_PREFIX", Path(environ["CONDA_PREFIX"])))
    return found


def locate_pinning(explicit: Path | None, environ: Mapping[str, str] | None = None) -> Path:
    """The pinning directory to use; a one-line :class:`ToolError` naming the fix when there is none."""
    environ = os.environ if environ is None else environ
    if explicit is not None:
        if not (explicit / CONFIG_FILE).is_file():
            raise ToolError(
                f"--pinning {explicit}: no {CONFIG_FILE} there; pass conda-forge-pinning's directory"
            )
        return explicit
    places = candidates(environ)
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


def find_pinning(environ: Mapping[str, str] | None = None) -> Path | None:
    """The pinning directory of the environment, or None (for tools that work without one)."""
    try:
        return locate_pinning(None, environ)
    except ToolError:
        return None


def add_pinning_argument(parser: argparse.ArgumentParser) -> None:
    """``--pinning DIR``, with the search order in its help."""
    parser.add_argument(
        "--pinning",
        type=Path,
        default=None,
        help=(
            f"conda-forge-pinning directory (holds {CONFIG_FILE}); default: ${PINNING_ENV}, else "
            "conda-smithy's cache (${XDG_CACHE_HOME:-~/.cache}/conda-smithy), else the conda-forge-pinning "
            "package in $CONDA_PREFIX"
        ),
    )
