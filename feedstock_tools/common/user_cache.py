"""The per-user cache: what the tools make once per machine and every checkout reuses.

The rehearsal's venv templates (one per CPython and host package list), its BUILD_PREFIX, the stand-in's
libmagma and rattler-build's local channels take minutes to make and depend on the machine, not on the
checkout: kept beside a checkout, each fresh clone (CI's, a second worktree) made them again. They live
where pip and pre-commit keep theirs, the XDG base directory specification's cache home.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

CACHE_ENV = "PYTORCH_FEEDSTOCK_CACHE"


def xdg_cache_home(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME`` when it is an absolute path, else ``~/.cache`` (the specification's default).

    A relative one is ignored, as the specification says (documentation, "Basics" of
    https://specifications.freedesktop.org/basedir-spec/latest/: "All paths set in these environment
    variables must be absolute."; it goes on to call a relative one invalid, to be ignored): taken as it
    is, it named a different cache in every directory a command was started from."""
    environ = os.environ if environ is None else environ
    given = Path(environ.get("XDG_CACHE_HOME") or "")
    return given if given.is_absolute() else Path.home() / ".cache"


def tool_cache(environ: Mapping[str, str] | None = None) -> Path:
    """``$PYTORCH_FEEDSTOCK_CACHE``, else ``pytorch-feedstock`` in the cache home."""
    environ = os.environ if environ is None else environ
    given = environ.get(CACHE_ENV)
    return Path(given) if given else xdg_cache_home(environ) / "pytorch-feedstock"


def rehearsal_cache(environ: Mapping[str, str] | None = None) -> Path:
    """The rehearsal's cache (venv templates, BUILD_PREFIX, libmagma, local channels)."""
    return tool_cache(environ) / "rehearsal"
