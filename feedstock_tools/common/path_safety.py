"""The one place that turns untrusted text into paths: archive members and names built from inputs.

Every tool that joins a name it did not choose (a wheel member, a configuration value, a ``--name``
option) onto a directory it owns goes through here, so a ``../`` or an absolute path can never make it
read, write, delete or chmod anything outside that directory.

* :func:`component` -- a value used as ONE path component (a work-directory name made from
  ``cuda_compiler_version``, a file-name stem): no separator, no ``.``/``..``, no NUL, not empty.
* :func:`inside` -- a relative path below a root (an archive member): no absolute path, no ``..``
  segment, and, resolved with the symlinks already on disk, still below the root.
* :func:`archive_member` -- a member of an archive whose files are laid out elsewhere (a wheel repackaged):
  normalised, and refused when it is absolute, has a drive, or leads out with ``..``, as pip checks a
  wheel's members before it installs one.
* :func:`entry_point` -- a console script's ``name = module:attr`` as pip makes a script of it.
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path, PurePosixPath, PureWindowsPath

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


def archive_member(member: str, archive: str) -> str:
    """``member`` of ``archive`` normalised to a relative POSIX path, or a one-line error naming both when
    it would be written outside the directory it is laid out in.

    pip (23.2.1, here) installs a wheel's member only after normalising it and checking the result stays
    in the target directory (pip/_internal/operations/install/wheel.py:484-500: ``os.path.normpath``, then
    ``assert_no_path_traversal``; utils/unpacking.py:77-85 ``is_within_directory``), and refuses the wheel
    otherwise. The same here, stricter where pip leans on the platform it runs on: a backslash is a
    separator and a drive (``C:``) is refused wherever this runs.
    """
    posix = member.replace("\\", "/")
    normal = posixpath.normpath(posix)
    if (
        posixpath.isabs(posix)
        or PureWindowsPath(member).drive
        or normal == ".."
        or normal.startswith("../")
        or "\0" in member
        or normal == "."
    ):
        raise UnsafePath(
            f"{archive}: member {member!r} would be written outside the package (pip refuses such an "
            "archive too): refusing it; get the archive again from its index"
        )
    return normal


# distlib's grammar of an export entry, which pip's ScriptMaker makes a console script from
# (pip/_vendor/distlib/util.py:710-742 in pip 23.2.1: the name ``(\w|[-.+])+``, the callable
# ``(\w+)([:\.]\w+)*`` with at most one colon, optional ``[flags]``); pip also refuses a callable without
# its ``:attr`` (wheel.py:418-421, MissingCallableSuffix). Each dotted part must be an identifier here (a
# Python import and attribute access run it), and the whole value must match, where distlib searches.
_ENTRY_POINT = re.compile(
    r"(?P<module>[\w.]+):(?P<attr>[\w.]+)\s*(?:\[\s*[\w-]+(?:=\w+)?(?:,\s*\w+(?:=\w+)?)*\s*\])?"
)
_SCRIPT_NAME = re.compile(r"[\w.+-]+")


def entry_point(name: str, value: str, archive: str) -> tuple[str, str, str]:
    """``(name, module, attr)`` of the console script ``name = value`` of ``archive``; a one-line error
    naming both when the name is no plain file name or the value is not ``module:attr`` of identifiers."""
    match = _ENTRY_POINT.fullmatch(value.strip())
    parts = [*match["module"].split("."), *match["attr"].split(".")] if match else []
    if (
        not _SCRIPT_NAME.fullmatch(name)
        or name in (".", "..")
        or match is None
        or not all(part.isidentifier() for part in parts)
    ):
        raise UnsafePath(
            f"{archive}: console script {name!r} = {value!r} is not NAME = module:attr (identifiers, the "
            "entry-point grammar pip makes scripts from): refusing it"
        )
    return name, match["module"], match["attr"]
