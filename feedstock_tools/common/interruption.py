"""SIGINT, SIGTERM and SIGHUP for the maintainer tools, whoever sends them (a terminal's Ctrl-C reaches the
whole foreground group; `kill PID`, `timeout` and a CI job's cancel reach only the top process).

The discipline is the build driver's (recipe/megabuild/interrupt.py, standard library only): a handled
signal becomes :class:`Interrupted`, so every cleanup runs; a long child runs through the one runner
(:func:`run_child`, recipe/megabuild/child_process.py): a process group of its own, stopped as a whole
(the signal forwarded, a bounded wait, then SIGKILL). Both are imported from the recipe once, here, so the
tools and the driver behave alike. Standard library
only: build-locally.py uses it.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from megabuild import child_process, interrupt

Interrupted = interrupt.Interrupted
install = interrupt.install
run_child = child_process.run_child
# A tool's child gets longer than the driver's build (interrupt.GRACE_SECONDS) to stop: the rehearsal's
# build script is the driver, which first waits for its own build.
GRACE_SECONDS = 2 * interrupt.GRACE_SECONDS


def run_logged(
    command: Sequence[str], cwd: Path, env: Mapping[str, str], log: Path, timeout: float | None = None
) -> tuple[int, list[str]]:
    """``command`` through the one runner, its stdout and stderr in ``log`` (a fresh file): its exit status
    and the log's lines. A child still running after ``timeout`` seconds is stopped, its whole group, and
    ``subprocess.TimeoutExpired`` raised, as ``subprocess.run(..., timeout=...)`` raises it."""
    on_tick = None
    if timeout is not None:
        deadline = time.monotonic() + timeout

        def on_tick() -> None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(list(command), timeout)

    status = run_child(command, cwd, env, log=log, on_tick=on_tick, grace=GRACE_SECONDS)
    return status, log.read_text(encoding="utf-8", errors="replace").splitlines()


@contextmanager
def handled() -> Iterator[None]:
    """The handlers installed for the block, the caller's back after it (tests call a tool's main())."""
    previous = {signum: signal.getsignal(signum) for signum in interrupt.HANDLED}
    install()
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def stopped_groups() -> list[int]:
    """The process groups stopped because of the interruption, for its error line."""
    return list(interrupt.stopped_groups())


def interrupted_line(tool: str, exc: Interrupted, resume: str) -> str:
    """The one line of an interrupted tool: the signal, what it stopped, how to go on."""
    groups = stopped_groups()
    stopped = (
        f"what it started (process group {', '.join(map(str, groups))}) was stopped and no process is left"
        if groups
        else "no process of it is left"
    )
    return f"error: {tool} was {exc}: {stopped}; {resume}"
