"""py-rattler's solver in a child process, so that no process of ours finalizes with its runtime threads.

Why (docs/reference/failure-modes.md, "The exit crash"): py-rattler 0.28.0 hands each result of its solver to
asyncio through pyo3-async-runtimes 0.29.0 (both named in the build paths inside ``rattler.abi3.so``): a
thread of its tokio runtime takes the GIL, schedules the result on the event loop with
``call_soon_threadsafe``, and gives the GIL up and takes it back while it does (a socket write to wake the
loop, object releases). Nothing joins or stops those threads. When the interpreter finalizes while one of them
waits to take the GIL back, CPython ends that thread inside its GIL section and its guard's
``PyGILState_Release`` aborts the process: ``Fatal Python error: PyGILState_Release: thread state ... must be
current when releasing`` / ``Python runtime state: finalizing`` (exit 134), or it dies of SIGSEGV (139). The
same message and the missing shutdown are PyO3/pyo3-async-runtimes issue 40. Measured here: a script that
solves once in-process and exits crashed in 14 of 40 runs (2 shared cores, load average 6).

So one child process per process of ours solves every request (one JSON line each way) and, once its input
closes, ends with ``os._exit``: it never finalizes, so the race has no window there, and the parent never
starts the runtime at all. The child starts at the first solve and serves until this process
exits (``atexit`` closes its input and waits for it).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import subprocess
import sys
import threading
from dataclasses import asdict
from pathlib import Path
from typing import IO

from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.proofs.solve.solve_check import Machine, Outcome, Request, solve


class _Child:
    """The solver child of this process: started at the first job, again if it died."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.process: subprocess.Popen[str] | None = None

    def ask(self, job: dict) -> str:
        """Send one job line, return the answer line ("" if the child ended without one)."""
        with self.lock:
            process = self.running()
            assert process.stdin is not None and process.stdout is not None
            try:
                process.stdin.write(json.dumps(job) + "\n")
                process.stdin.flush()
                return process.stdout.readline()
            except BrokenPipeError:
                return ""

    def running(self) -> subprocess.Popen[str]:
        if self.process is None or self.process.poll() is not None:
            # its own session: a terminal's Ctrl-C reaches this process, which ends the child by closing
            # its input; standard error is shared, so the solver's warnings show where they did in-process
            self.process = subprocess.Popen(
                [sys.executable, "-m", __name__],
                cwd=REPO_ROOT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            atexit.register(_close, self.process)
        return self.process


_CHILD = _Child()


def solve_in_child(channel_dir: Path, request: Request, machine: Machine) -> Outcome:
    """:func:`solve_check.solve` of one request, run by this process's solver child."""
    job = {"channel_dir": str(channel_dir.resolve()), "request": asdict(request), "machine": asdict(machine)}
    answer = _CHILD.ask(job)
    if not answer:
        status = _CHILD.process.wait() if _CHILD.process is not None else None
        raise ToolError(
            f"py-rattler's solver process ({sys.executable} -m {__name__}) ended with exit {status} before "
            "it answered: see its lines above; run the command again"
        )
    reply = json.loads(answer)
    if "failure" in reply:
        raise ToolError(f"py-rattler's solver failed for {' '.join(request.specs)}: {reply['failure']}")
    return Outcome(**reply)


def _close(process: subprocess.Popen[str]) -> None:
    """At this process's exit: end the child by closing its input (it exits without finalizing)."""
    if process.stdin is not None and not process.stdin.closed:
        with contextlib.suppress(BrokenPipeError):
            process.stdin.close()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# ---- the child ---------------------------------------------------------------------------------------------


def serve(jobs: IO[str], answers: IO[str]) -> None:
    """Solve each job line of ``jobs``, one answer line each: the Outcome's fields, or ``failure``."""
    for line in jobs:
        job = json.loads(line)
        request, machine = job["request"], job["machine"]
        try:
            outcome = asyncio.run(
                solve(
                    Path(job["channel_dir"]),
                    Request(request["name"], tuple(request["specs"]), tuple(request["constraints"]), {}),
                    Machine(
                        machine["name"],
                        machine["subdir"],
                        tuple(machine["virtual"]),
                        tuple(machine["installed"]),
                    ),
                )
            )
            reply = asdict(outcome)
        except Exception as exc:  # the parent turns it into one line: the child must keep serving
            reply = {"failure": f"{type(exc).__name__}: {exc}".splitlines()[0]}
        answers.write(json.dumps(reply) + "\n")
        answers.flush()


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
    sys.stdout.flush()
    sys.stderr.flush()
    # no interpreter finalization: the solver's runtime threads may still be inside their GIL section
    os._exit(0)
