"""A full device named as the cause, in one line, whichever command meets it.

Two ways a command learns of it: an ``OSError`` ENOSPC (or EDQUOT, a full quota) on a write of its own,
which the CLI dispatcher turns into this line for every subcommand; or a child process that failed and
whose log says "No space left on device" (uv making the rehearsal's venv templates, a build script, pip
downloading wheels), where the command would otherwise blame the network or the build. The line names the
device's directory, its free space, and where else the command can write: TMPDIR for temporary files, the
command's own work or cache directory.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
from pathlib import Path

FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# what a child's log says of a full device (strerror of ENOSPC and EDQUOT on Linux and macOS)
_LOG_SIGNS = re.compile(r"No space left on device|Disk quota exceeded")
# the path it names: Python's OSError puts it after the words ("...device: '/tmp/x'"), Rust's io::Error as
# uv 0.13.9 prints it before them ("...to /tmp/x/.tmpgwlY1y: No space left on device (os error 28)", seen
# here on a full 2 MiB tmpfs)
_LOG_PATH = re.compile(
    r"(?:No space left on device|Disk quota exceeded)\W*:\s*'(?P<after>[^']+)'"
    r"|(?P<before>/[^\s`']+)`?: (?:No space left on device|Disk quota exceeded) \(os error"
)


def full_error(exc: BaseException | None) -> OSError | None:
    """The ENOSPC/EDQUOT error behind ``exc`` (itself, its cause or context), None for any other."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in FULL_ERRNOS:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _free(path: Path) -> str:
    try:
        free = shutil.disk_usage(_existing(path)).free
    except OSError:
        return "free space unknown"
    return f"{free / 2**20:.0f} MiB free" if free < 2**30 else f"{free / 2**30:.1f} GiB free"


def where_to_write(work_dir: Path | None = None) -> str:
    """Where else the command can write, for the fix."""
    places = f"TMPDIR (now {tempfile.gettempdir()})"
    return places + (f" or {work_dir}" if work_dir else "")


def full_device_line(exc: OSError, work_dir: Path | None = None) -> str:
    """``the device of /x is full (...)``: the cause and the fix in one line."""
    name = exc.filename or os.environ.get("TMPDIR") or tempfile.gettempdir()
    directory = _existing(Path(str(name)))
    directory = directory if directory.is_dir() else directory.parent
    what = exc.strerror or "No space left on device"
    file = f" writing {exc.filename}" if exc.filename else ""
    return (
        f"the device holding {directory} is full ({what}{file}; {_free(directory)}): free space there, or "
        f"point {where_to_write(work_dir)} at a larger one, and run the command again"
    )


def log_says_full(log: Path) -> bool:
    try:
        return bool(_LOG_SIGNS.search(log.read_text(errors="replace")))
    except OSError:
        return False


def full_log_line(what: str, log: Path, work_dir: Path | None = None) -> str:
    """``<what> failed: the device holding D is full (its log says ...)``, for a child whose log says so."""
    text = log.read_text(errors="replace") if log.is_file() else ""
    path = _LOG_PATH.search(text)
    named = path and (path["after"] or path["before"])
    directory = _existing(Path(named)) if named else Path(tempfile.gettempdir())
    directory = directory if directory.is_dir() else directory.parent
    return (
        f"{what} failed: the device holding {directory} is full (its log {log} says 'No space left on "
        f"device'; {_free(directory)}): free space there, or point {where_to_write(work_dir)} at a larger "
        "one, and run the command again"
    )
