"""Files a reader never sees half-written: the driver's state, report, cache edits and staging journal, and
every file the maintainer tools write (they import this module through feedstock_tools.common.recipe_imports).

The content goes to a temporary file of a unique name beside the target (same directory, so the same file
system), which then replaces the target in one rename. An error or a signal before the rename leaves the old
file as it was and removes the temporary one: a full disk or an interrupted pass never leaves a truncated
file for the next run to trip over, nor a stray temporary file; two writers of one target at the same moment
each rename a whole file, and the last one wins. The new file keeps the permission bits of the one it
replaces, else gets those a plain ``open()`` would give (0666 less the umask), unless ``mode`` is given.
"""

from __future__ import annotations

import io
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

# os.open's flags for a new file that must not exist yet; O_BINARY: no newline translation on Windows
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)


def _temporary_beside(target: Path, prefix: str) -> tuple[int, Path]:
    """A new file of a unique name in ``target``'s directory (mode 0666 less the umask, as open() gives)."""
    while True:
        candidate = target.parent / f"{prefix}{secrets.token_hex(6)}.tmp"
        try:
            return os.open(candidate, _NEW_FILE, 0o666), candidate
        except FileExistsError:
            continue


@contextmanager
def replacing(
    target: Path, *, mode: int | None = None, durable: bool = False, prefix: str | None = None
) -> Iterator[BinaryIO]:
    """A binary handle whose content replaces ``target`` when the block ends without an error (nothing
    changes, and no temporary file is left, when it raises); ``mode`` sets the permission bits, ``durable``
    syncs the data to disk before the rename (for a journal that must survive a crash), ``prefix`` names
    the temporary file (default ``.<name>.``)."""
    if mode is None and target.exists():
        mode = target.stat().st_mode & 0o7777
    fd, tmp = _temporary_beside(target, prefix or f".{target.name}.")
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
