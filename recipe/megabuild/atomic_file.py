"""Files a reader never sees half-written: the driver's state, report, cache edits and staging journal.

The text goes to a temporary file beside the target (same directory, so the same file system), which then
replaces the target in one rename. An error or a signal before the rename leaves the old file as it was and
removes the temporary one: a full disk or an interrupted pass never leaves a truncated file for the next
run to trip over, nor a stray temporary file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


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
    """Replace ``target`` with ``text`` (UTF-8) atomically; ``mode`` sets its permission bits, ``durable``
    syncs the data to disk before the rename (for a journal that must survive a crash), ``prefix`` names the
    temporary file (default ``.<name>.``)."""
    fd, tmp = tempfile.mkstemp(prefix=prefix or f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors=errors, newline=newline) as handle:
            handle.write(text)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
