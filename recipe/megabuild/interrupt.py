"""The driver's one signal and cleanup discipline, for itself and the build processes it starts.

* :func:`install` turns SIGTERM, SIGINT and SIGHUP into an :class:`Interrupted` exception, so every
  ``finally``/``except BaseException`` cleanup of the driver runs (temporary directories, a half-moved
  package taken back) instead of the process dying where it stands.
* :func:`stop_group` stops a child started in a process group of its own when its parent is interrupted:
  the signal forwarded to that whole group (setup.py, cmake, ninja, the compilers), a bounded wait, then
  SIGKILL; only then does the exception travel on, so no build is left running, orphaned. (A Ctrl-C at a
  terminal reaches only the driver's group; the driver forwards it.) The one runner of such children, for
  the driver and the maintainer tools alike, is megabuild/child_process.py; the tools import both modules
  (``from megabuild import interrupt``), so the discipline exists once.
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
from collections.abc import Iterator
from contextlib import contextmanager, suppress

HANDLED = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name))
# Windows: no pthread_sigmask; no_interruption() defers in the handler instead (see there)
_MASKS = hasattr(signal, "pthread_sigmask")
# How long a build's process group gets to stop after the forwarded signal before it is killed.
GRACE_SECONDS = 10.0
# Test seam, for tests/megabuild/test_fault_injection.py only: at the checkpoint of this name the driver sends
# itself the signal MEGABUILD_TEST_SIGNAL (TERM by default, KILL to test what an uncatchable kill leaves).
TEST_SIGNAL_AT = "MEGABUILD_TEST_SIGNAL_AT"
TEST_SIGNAL = "MEGABUILD_TEST_SIGNAL"


class Interrupted(BaseException):
    """The driver received SIGTERM/SIGINT/SIGHUP; raised from the signal handler. A BaseException, as
    KeyboardInterrupt is: no ``except Exception`` (nor a tool's conversion of MegabuildError into its own
    error, as wheel-layout's) may take it for an ordinary failure."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")

    @property
    def exit_status(self) -> int:
        return 128 + self.signum

    def line(self, pkg_name: str | None, top_level: str) -> str:
        """The one error line: what was running, what was stopped, how to resume."""
        what = f"the pass for PKG_NAME={pkg_name}" if pkg_name else "the driver"
        stopped = (
            f"its build (process group {', '.join(map(str, _stopped_groups))}) was stopped"
            if _stopped_groups
            else "no build was running"
        )
        resume = (
            "run the same build again: Ninja keeps what was compiled"
            if pkg_name == top_level
            else "run the same build again, it resumes from pass 1's results"
        )
        return (
            f"{what} was {self}: {stopped}, nothing of this pass was staged and no process of it is "
            f"left; {resume}"
        )


_received: list[int] = []
_deferring: list[bool] = []  # Windows: inside no_interruption()
# The process groups stop_group ended, for the error line (which names what was stopped).
_stopped_groups: list[int] = []


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


def stopped_groups() -> tuple[int, ...]:
    """The process groups :func:`stop_group` ended (the maintainer tools name them in their line)."""
    return tuple(_stopped_groups)


def forwarded_signal(exc: BaseException) -> int:
    """The signal to pass on to a child when ``exc`` ends its parent's wait: the one received, else TERM."""
    return exc.signum if isinstance(exc, Interrupted) else signal.SIGTERM


def stop_group(
    process: subprocess.Popen, signum: int, grace: float = GRACE_SECONDS, group: bool = True
) -> None:
    """Send ``signum`` to the process group, wait ``grace`` seconds, then SIGKILL what is left.

    ``group`` False: the process shares its parent's group (it needs the terminal); only it is signalled."""
    if not hasattr(os, "killpg"):  # Windows: the child and everything it started (cl.exe, nvcc, ...)
        subprocess.run(["taskkill", "/T", "/F", "/PID", str(process.pid)], check=False, capture_output=True)
        process.wait()
        return
    send = os.killpg if group else os.kill
    with no_interruption():
        try:
            send(process.pid, signum)
        except ProcessLookupError:
            return
        if group:
            _stopped_groups.append(process.pid)
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)
        # grandchildren (ninja's compilers) may outlive setup.py: a group is killed whatever its leader did
        # (its id stays taken while a member lives); a lone process only while it has not been reaped
        if group or process.returncode is None:
            with suppress(ProcessLookupError):
                send(process.pid, signal.SIGKILL)
        process.wait()
