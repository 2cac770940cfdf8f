"""The one place that turns untrusted text into paths: archive members and names built from inputs.

Every tool that joins a name it did not choose (a wheel member, a configuration value, a ``--name``
option) onto a directory it owns goes through here, so a ``../`` or an absolute path can never make it
read, write, delete or chmod anything outside that directory.

* :func:`component` -- a value used as ONE path component (a work-directory name made from
  ``cuda_compiler_version``, a file-name stem): no separator, no ``.``/``..``, no NUL, not empty.
* :func:`inside` -- a relative path below a root (an archive member): no absolute path, no ``..``
  segment, and, resolved with the symlinks already on disk, still below the root.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from feedstock_tools.common.errors import ToolError


class UnsafePath(ToolError):
    """A name that would reach outside the directory it is meant for."""


def component(value: str, what: str) -> str:
    """``value`` if it is usable as a single file or directory name, else a one-line error naming ``what``."""
    problem = None
    if not value:
        problem = "is empty"
    elif value in (".", ".."):
        problem = f"is {value!r}"
    elif "/" in value or "\\" in value or os.sep in value:
        problem = "contains a path separator"
    elif "\0" in value:
        problem = "contains a NUL character"
    if problem:
        raise UnsafePath(f"{what} {value!r} {problem}: it names a file or directory; use a plain name")
    return value


def inside(root: Path, relative: str, what: str) -> Path:
    """``root / relative`` for an untrusted relative path, refusing anything that leaves ``root``."""
    pure = PurePosixPath(relative.replace("\\", "/"))
    if pure.is_absolute() or ".." in pure.parts or "\0" in relative or not pure.parts:
        raise UnsafePath(
            f"{what} {relative!r} points outside {root}: refusing it (a crafted or broken archive)"
        )
    candidate = root / Path(*pure.parts)
    resolved_root = root.resolve()
    # symlinks already on disk (e.g. an earlier member that is a link) must not lead out either
    if not candidate.resolve().is_relative_to(resolved_root):
        raise UnsafePath(f"{what} {relative!r} resolves outside {root} through a symlink: refusing it")
    return candidate
