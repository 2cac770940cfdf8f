"""Progress lines of the driver: one prefix, elapsed times, flushed at once (conda-build buffers nothing)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

PREFIX = "[megabuild]"


def say(message: str) -> None:
    print(f"{PREFIX} {message}", file=sys.stdout, flush=True)


def warn(message: str) -> None:
    print(f"{PREFIX} WARNING: {message}", file=sys.stdout, flush=True)


@contextmanager
def step(what: str) -> Iterator[None]:
    """Announce a long step and report how long it took (also when it fails)."""
    say(f"{what} ...")
    started = time.monotonic()
    ok = False
    try:
        yield
        ok = True
    finally:
        say(f"{what}: {'done' if ok else 'FAILED'} after {time.monotonic() - started:.1f}s")
