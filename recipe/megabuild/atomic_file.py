"""Files a reader never sees half-written: the driver's state, report, cache edits and staging journal, and
every file the maintainer tools write (``from megabuild import atomic_file``).

The content goes to a temporary file of a unique name beside the target (same directory, so the same file
system), which then replaces the target in one rename. An error or a signal before the rename leaves the old
file as it was and removes the temporary one: a full disk or an interrupted pass never leaves a truncated
file for the next run to trip over, nor a stray temporary file; two writers of one target at the same moment
each rename a whole file, and the last one wins. The new file keeps the permission bits of the one it
replaces, else gets those a plain ``open()`` would give (0666 less the umask), unless ``mode`` is given.

A target that is a symbolic link stays one: the content replaces the file the link resolves to, through a
temporary file beside that file (a plain ``open(target, "w")`` writes through a link too; renaming over the
link itself turned it into a regular file, and the file it pointed to kept the old content).

A writer killed by SIGKILL (or a power loss) cannot remove its temporary file; the next write of the same
target does. The temporary file's name holds its writer's pid, and one is removed only when that process is
gone and the file has not changed for :data:`STALE_SECONDS`: a live writer's file is never taken from it
(its pid is running), and the age also spares a live writer in another pid namespace (a container sharing
the directory), whose pid means nothing here and whose file grows as it writes. On Windows the pid is not
consulted (``os.kill(pid, 0)`` there terminates the process, Python's ``os.kill`` documentation), only the
age, and Windows refuses to delete a file another process holds open (``DeleteFile``'s documentation).
"""

from __future__ import annotations

import io
import os
import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

# os.open's flags for a new file that must not exist yet; O_BINARY: no newline translation on Windows
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
# A killed writer's temporary file unchanged this long (and its writer gone) is removed by the next writer.
STALE_SECONDS = 15 * 60
# what follows the prefix in a temporary file's name: "<pid>.<12 hex>.tmp" (before the pid was put in
# the name: "<12 hex>.tmp", judged by its age alone)
_TEMPORARY_TAIL = re.compile(r"(?:(?P<pid>\d+)\.)?[0-9a-f]{12}\.tmp")


def _temporary_beside(target: Path, prefix: str) -> tuple[int, Path]:
    """A new file of a unique name in ``target``'s directory (mode 0666 less the umask, as open() gives)."""
    while True:
        candidate = target.parent / f"{prefix}{os.getpid()}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(candidate, _NEW_FILE, 0o666), candidate
        except FileExistsError:
            continue


def _running(pid: int) -> bool:
    """Whether a process ``pid`` is known to exist here (POSIX: signal 0 checks without sending). On
    Windows none is known: the age decides, and a file its writer holds open cannot be deleted there."""
    if pid == os.getpid():
        return True
    if os.name == "nt":
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's
        return True
    return True


def remove_stale_temporaries(target: Path, prefix: str | None = None) -> list[Path]:
    """Remove the temporary files a killed writer of ``target`` left beside it (see the module's
    docstring); returns those removed."""
    prefix = prefix or f".{target.name}."
    removed = []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        tail = _TEMPORARY_TAIL.fullmatch(entry.name[len(prefix) :])
        if tail is None or (tail["pid"] is not None and _running(int(tail["pid"]))):
            continue
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime < STALE_SECONDS:
                continue
            os.unlink(entry.path)
        except OSError:  # gone already, or still open by its writer (Windows)
            continue
        removed.append(Path(entry.path))
    return removed


def sync_directory(directory: Path) -> None:
    """The rename made durable: the directory's entry synced (POSIX; Windows cannot open a directory)."""
    if os.name == "nt":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def replacing(
    target: Path, *, mode: int | None = None, durable: bool = False, prefix: str | None = None
) -> Iterator[BinaryIO]:
    """A binary handle whose content replaces ``target`` when the block ends without an error (nothing
    changes, and no temporary file is left, when it raises); ``mode`` sets the permission bits, ``durable``
    syncs the data and then the directory's entry to disk (for a journal that must survive a crash),
    ``prefix`` names the temporary file (default ``.<name>.``). A symbolic link ``target`` stays one: the
    file it resolves to is replaced."""
    if target.is_symlink():
        target = Path(os.path.realpath(target))
    prefix = prefix or f".{target.name}."
    remove_stale_temporaries(target, prefix)
    if mode is None and target.exists():
        mode = target.stat().st_mode & 0o7777
    fd, tmp = _temporary_beside(target, prefix)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        sync_directory(target.parent)


def write_bytes(
    target: Path, data: bytes, *, mode: int | None = None, durable: bool = False, prefix: str | None = None
) -> Path:
    """Replace ``target`` with ``data`` atomically (:func:`replacing`)."""
    with replacing(target, mode=mode, durable=durable, prefix=prefix) as handle:
        handle.write(data)
    return target


def write_text(
    target: Path,
    text: str,
    *,
    mode: int | None = None,
    durable: bool = False,
    errors: str = "strict",
    newline: str | None = None,
    prefix: str | None = None,
) -> Path:
    """Replace ``target`` with ``text`` (UTF-8; ``newline`` as ``open()`` takes it) atomically
    (:func:`replacing`)."""
    with replacing(target, mode=mode, durable=durable, prefix=prefix) as handle:
        encoded = io.TextIOWrapper(handle, encoding="utf-8", errors=errors, newline=newline)
        encoded.write(text)
        encoded.detach()  # flushed; the handle stays open for the rename
    return target
