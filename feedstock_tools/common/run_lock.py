"""Exclusive locks where two runs of a tool can meet (a rehearsal work directory, one build-locally config).

``fcntl.flock`` on a lock file beside the guarded directory: the kernel drops the lock when the process
ends, however it ends (SIGKILL included), so a killed run never leaves a stale lock behind. The lock file
records the holder's pid for the message of the run that is refused. Standard library only
(build-locally.py uses it).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from feedstock_tools.common.errors import ToolError


class LockBusy(ToolError):
    """Another run holds the lock."""


class RunLock:
    """Held from :meth:`acquire` until :meth:`release` or the end of the process."""

    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        self.what = what
        self._handle: IO[str] | None = None

    def acquire(self) -> RunLock:
        if self._handle is not None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise LockBusy(
                f"{self.what} is in use by another run (pid {holder}, lock {self.path}): wait for it to "
                "finish or use another directory"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle = handle
        return self

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
