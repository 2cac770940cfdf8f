"""The one way a long child is run, by the driver and by the maintainer tools alike: start it (in a process
group of its own unless it needs the terminal), log its output, wait for it, return its exit status; an
interruption (:class:`megabuild.interrupt.Interrupted`, or any exception) stops it -- its whole group -- and
then travels on, so no build is left running, orphaned.

Users: the driver's build commands (passes.py), build-locally.py's builds and rehearsals, the rehearsal's
build scripts (feedstock_tools/proofs/rehearsal/harness.py) and the real builders
(feedstock_tools/proofs/builders/build_watch.py); the tools import it as ``megabuild.child_process``.
Standard library only: it ships inside the recipe.

With a ``log``, the child writes into the file itself (never through a pipe of ours): what it printed last
is there even when it is stopped, or when this process is killed. Its new lines are read back every
``tick`` seconds for ``on_line`` (a verbose echo, a heartbeat's last line); :class:`LogTail` reads them for
a caller that reads the log itself (a progress reader).
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from megabuild import atomic_file
from megabuild.interrupt import GRACE_SECONDS, forwarded_signal, stop_group

# How often a logged child's new lines are read back while it runs.
TICK_SECONDS = 0.2


class LogTail:
    """The complete lines a growing log gained since the last read (with ``final``, the unfinished last one
    too); none while the log does not exist."""

    def __init__(self, log: Path, offset: int = 0) -> None:
        self.log = log
        self.offset = offset

    def lines(self, final: bool = False) -> list[str]:
        try:
            with self.log.open("rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        end = len(data) if final else data.rfind(b"\n") + 1
        self.offset += end
        return data[:end].decode(errors="replace").splitlines()


def run_child(
    command: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    *,
    log: Path | None = None,
    header: str = "",
    on_line: Callable[[str], None] | None = None,
    on_tick: Callable[[], None] | None = None,
    on_start: Callable[[subprocess.Popen], None] | None = None,
    own_group: bool = True,
    append_log: bool = False,
    keep_fds: Sequence[int] = (),
    grace: float = GRACE_SECONDS,
    tick: float = TICK_SECONDS,
) -> int:
    """Run ``command`` to its end and return its exit status.

    ``log``: a fresh file (``header`` written first, through the one writer) that gets the child's stdout
    and stderr; the child's stdin is then empty. Without one the child shares this process's streams.
    ``on_line`` gets each new line of the log, ``on_tick`` is called every ``tick`` seconds while the child
    runs, ``on_start`` right after the start (to name its process group). ``own_group`` False: the child
    stays in this process's group (it needs the terminal) and only it is stopped on an interruption.
    ``append_log``: the log is kept and added to (a log several children share). ``keep_fds``: descriptors
    the child inherits (a lock it must hold for as long as it lives; POSIX only)."""
    process: subprocess.Popen | None = None
    handle = None
    reader: LogTail | None = None
    # Everything after the start is inside the try: a signal that lands while ``on_start`` prints the
    # group id (the fault-injection test signals right when it reads that line) must stop the group too.
    try:
        streams: dict[str, object] = {}
        if log is not None:
            handle = _open_log(log, header, append_log)
            if on_line is not None:
                reader = LogTail(log, offset=handle.tell())
            streams = {"stdin": subprocess.DEVNULL, "stdout": handle, "stderr": subprocess.STDOUT}
        if keep_fds:
            streams["pass_fds"] = tuple(keep_fds)
        process = subprocess.Popen(
            list(command), cwd=cwd, env=dict(env), start_new_session=own_group, **streams
        )  # type: ignore[call-overload]
        if on_start is not None:
            on_start(process)
        if reader is None and on_tick is None:
            return process.wait()
        while process.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=tick)
            _pass_on(reader, on_line)
            if on_tick is not None:
                on_tick()
        _pass_on(reader, on_line, final=True)  # the child's last words (a driver's error line)
        return process.returncode
    except BaseException as exc:
        if process is not None:
            stop_group(process, forwarded_signal(exc), grace, own_group)
        raise
    finally:
        if handle is not None:
            handle.close()


def _open_log(log: Path, header: str, append: bool) -> BinaryIO:
    """The child's log, positioned after ``header``: a fresh file, or (``append``) the existing one."""
    if not append:
        atomic_file.write_text(log, header)
    handle = log.open("ab")
    if append and header:
        handle.write(header.encode())
        handle.flush()
    return handle


def _pass_on(reader: LogTail | None, on_line: Callable[[str], None] | None, final: bool = False) -> None:
    if reader is not None:
        for line in reader.lines(final):
            if on_line is not None:
                on_line(line)
