"""The driver's one signal and cleanup discipline, for itself and the build processes it starts.

* :func:`install` turns SIGTERM, SIGINT and SIGHUP into an :class:`Interrupted` exception, so every
  ``finally``/``except BaseException`` cleanup of the driver runs (temporary directories, a half-moved
  package taken back) instead of the process dying where it stands.
* :func:`run_child` starts a build command in a process group of its own and, when the driver is
  interrupted, forwards the signal to that whole group (setup.py, cmake, ninja, the compilers), waits for
  it, and only then lets the exception travel on: the driver never leaves its build running, orphaned.
  (A Ctrl-C at a terminal reaches only the driver's group; the driver forwards it.)
* :func:`no_interruption` defers signals over a step that must not be cut in half (moving a staged
  package into ``$PREFIX``); :func:`pending` tells whether one arrived.

SIGKILL cannot be caught: then the build's process group (its id is in the log) keeps running, and what the
driver wrote is made safe by atomic renames and the staging journal (staging.py), not by cleanup.

Windows (win-64 builds) has no SIGHUP, no signal masks, no sigpending and no process groups to signal
(Python docs: each "Availability: Unix"); there the handled signals are those that exist, deferral is
done by the handler itself, and a build is stopped with its whole process tree by ``taskkill /T``.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from megabuild.errors import MegabuildError
from megabuild.log import say

HANDLED = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name))
# Windows: no pthread_sigmask; no_interruption() defers in the handler instead (see there)
_MASKS = hasattr(signal, "pthread_sigmask")
# How long a build's process group gets to stop after the forwarded signal before it is killed.
GRACE_SECONDS = 10.0
# Test seam, for tests/test_fault_injection.py only: at the checkpoint of this name the driver sends itself
# the signal MEGABUILD_TEST_SIGNAL (TERM by default, KILL to test what an uncatchable kill leaves).
TEST_SIGNAL_AT = "MEGABUILD_TEST_SIGNAL_AT"
TEST_SIGNAL = "MEGABUILD_TEST_SIGNAL"


class Interrupted(MegabuildError):
    """The driver received SIGTERM/SIGINT/SIGHUP; raised from the signal handler."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(
            f"interrupted by {signal.Signals(signum).name}: the build it started was stopped and nothing of "
            "this pass was staged; run the same build again, it resumes from pass 1's results"
        )

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


_received: list[int] = []
_deferring: list[bool] = []  # Windows: inside no_interruption()


def _handler(signum: int, frame: object) -> None:
    _received.append(signum)
    if len(_received) == 1 and not _deferring:  # later signals must not cut the cleanup the first started
        raise Interrupted(signum)


def install() -> None:
    for signum in HANDLED:
        signal.signal(signum, _handler)


def pending() -> bool:
    """A handled signal is waiting (blocked by :func:`no_interruption`) or was already received."""
    if not _MASKS:
        return bool(_received)
    return bool(_received) or bool(signal.sigpending() & set(HANDLED))


@contextmanager
def no_interruption() -> Iterator[None]:
    """Defer the handled signals until the block ends (then the handler raises, as usual)."""
    if not _MASKS:
        _deferring.append(True)
        try:
            yield
        finally:
            _deferring.pop()
        if _received and not _deferring:
            raise Interrupted(_received[0])
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def checkpoint(name: str) -> None:
    """A named point of a pass; only the fault-injection tests use it (see ``TEST_SIGNAL_AT``)."""
    if os.environ.get(TEST_SIGNAL_AT) == name:
        os.kill(os.getpid(), getattr(signal, f"SIG{os.environ.get(TEST_SIGNAL, 'TERM')}"))


def run_child(command: Sequence[str], cwd: Path, env: Mapping[str, str]) -> int:
    """Run ``command`` in its own process group; on interruption stop that group, then re-raise."""
    process: subprocess.Popen | None = None
    # Everything after the start is inside the try: a signal that lands while the group id is being
    # printed (the fault-injection test signals right when it reads that line) must stop the group too.
    try:
        process = subprocess.Popen(list(command), cwd=cwd, env=dict(env), start_new_session=True)
        say(f"  (process group {process.pid})")
        return process.wait()
    except BaseException as exc:
        if process is not None:
            forwarded = exc.signum if isinstance(exc, Interrupted) else signal.SIGTERM
            stop_group(process, forwarded)
        raise


def stop_group(process: subprocess.Popen, signum: int) -> None:
    """Send ``signum`` to the process group, wait ``GRACE_SECONDS``, then SIGKILL what is left."""
    if not hasattr(os, "killpg"):  # Windows: the child and everything it started (cl.exe, nvcc, ...)
        subprocess.run(["taskkill", "/T", "/F", "/PID", str(process.pid)], check=False, capture_output=True)
        process.wait()
        return
    with no_interruption():
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            return
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=GRACE_SECONDS)
        with suppress(ProcessLookupError):  # grandchildren (ninja's compilers) may outlive setup.py
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
