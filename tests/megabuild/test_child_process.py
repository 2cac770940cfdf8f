"""The one child-process runner (recipe/megabuild/child_process.py) that the driver, build-locally.py, the
rehearsal and real-build share: its log, its exit status, and a child stopped with its whole process group
when the runner's process is interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from megabuild.child_process import LogTail, run_child

REPO = Path(__file__).resolve().parents[2]


def test_a_failing_child_returns_its_status_and_its_whole_output_is_logged(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "child.log"
    log.parent.mkdir()
    log.write_text("an older run's log\n")
    lines: list[str] = []
    started: list[subprocess.Popen] = []
    script = "echo first; echo 'to stderr' >&2; sleep 0.5; printf 'last words, no newline'; exit 3"
    status = run_child(
        ["bash", "-c", script],
        tmp_path,
        dict(os.environ),
        log=log,
        header="$ the command\n",
        on_line=lines.append,
        on_start=started.append,
    )
    assert status == 3
    assert log.read_text() == "$ the command\nfirst\nto stderr\nlast words, no newline"
    assert lines == ["first", "to stderr", "last words, no newline"]  # the header is not the child's
    (process,) = started
    assert process.returncode == 3
    assert [path.name for path in log.parent.iterdir()] == ["child.log"]  # no temporary file left


def test_a_child_without_a_log_shares_this_process_streams_and_gets_its_own_group(tmp_path: Path) -> None:
    groups: list[int] = []
    script = "import os, sys; print(os.getpgid(0)); sys.exit(0)"
    out = tmp_path / "out"
    with out.open("w") as handle:
        # the runner gives the child this process's stdout: here, a file standing in for the terminal
        saved = os.dup(1)
        os.dup2(handle.fileno(), 1)
        try:
            status = run_child(
                [sys.executable, "-c", script],
                tmp_path,
                dict(os.environ),
                on_start=lambda process: groups.append(process.pid),
            )
        finally:
            os.dup2(saved, 1)
            os.close(saved)
    assert status == 0
    assert int(out.read_text()) == groups[0]  # its process group is its own: its id is the child's


def test_the_log_tail_gives_complete_lines_then_the_unfinished_one(tmp_path: Path) -> None:
    log = tmp_path / "growing.log"
    tail = LogTail(log)
    assert tail.lines() == []  # not written yet
    log.write_text("one\ntw")
    assert tail.lines() == ["one"]
    with log.open("a") as handle:
        handle.write("o\nthr")
    assert tail.lines() == ["two"]
    assert tail.lines(final=True) == ["thr"]


INTERRUPTED = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from megabuild import interrupt
    from megabuild.child_process import run_child

    work = Path(sys.argv[1])
    interrupt.install()
    # a child that starts a long grandchild (a build's compiler) and says so
    script = "sleep 300 & echo $! > grandchild.pid; echo started; wait"
    try:
        run_child(["bash", "-c", script], work, dict(os.environ), log=work / "child.log", grace=2.0)
    except interrupt.Interrupted as exc:
        print(f"groups {list(interrupt.stopped_groups())}", flush=True)
        sys.exit(exc.exit_status)
    """
)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=lambda s: signal.Signals(s).name)
def test_an_interrupted_runner_stops_the_child_group_and_travels_on(tmp_path: Path, signum: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "recipe")}
    runner = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED, str(tmp_path)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the signal goes to the runner's process only, as `kill PID` sends it
    )
    try:
        log = tmp_path / "child.log"
        deadline = time.monotonic() + 30
        while "started" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, "the child never started"
            assert runner.poll() is None
            time.sleep(0.05)
        grandchild = int((tmp_path / "grandchild.pid").read_text())
        runner.send_signal(signum)
        out = runner.communicate(timeout=60)[0]
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 128 + signum
    assert out.startswith("groups [") and out.strip() != "groups []"  # the child's group was stopped
    assert not _running(grandchild)  # what the child started is stopped with it, not orphaned
    assert log.read_text() == "started\n"


def _running(pid: int) -> bool:
    """A process that exists and is no zombie (an orphan killed stays one until init reaps it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
