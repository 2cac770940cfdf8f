"""A real builder (rattler-build, conda-build) run in a process group of its own, with progress, and one line
when it fails (``real-build``, docs/reference/real-build.md).

Its output goes to a log; what is printed meanwhile is read from there and from the driver's per-pass reports
(one file per pass, real_build.REPORT_WRAPPER): the output being built, each pass's objects and seconds, and
a heartbeat when both are silent. SIGINT/SIGTERM/SIGHUP stop the whole group within a few seconds (the
driver inside forwards the signal to its own build).
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from feedstock_tools.common import interruption
from megabuild import child_process

# How long the builder's group gets after the forwarded signal before SIGKILL: the driver inside stops its
# build at once (recipe/megabuild/interrupt.py) and conda-build/rattler-build have nothing to finish.
STOP_GRACE_SECONDS = 3.0
POLL_SECONDS = 1.0  # how often the log and the reports are read while the builder runs
HEARTBEAT_SECONDS = 30.0
_PKG_NAME = re.compile(r"\[megabuild\] PKG_NAME=(\S+)")


@dataclass
class BuildWatch:
    builder: str  # its name, for the lines
    reports: Path  # where REPORT_WRAPPER copies each pass's report
    log: Path  # the builder's stdout and stderr
    progress: Callable[[str], None] = print
    # the build scripts' logs a builder keeps elsewhere, newest last (rattler-build: conda_build.log in each
    # work directory; its own output names no output)
    script_logs: Callable[[], list[Path]] = list
    heartbeat_seconds: float = HEARTBEAT_SECONDS
    output: str = "?"  # the output being built, from the driver's first line (PKG_NAME=...)
    last_line: str = ""  # the builder's last line so far, for the heartbeat
    _shown: set[str] = field(default_factory=set)
    _announced: set[str] = field(default_factory=set)
    _tail: Any = None  # a megabuild.child_process.LogTail of the log

    def run(self, command: list[str], env: Mapping[str, str], cwd: Path) -> int:
        """The builder's exit status; an interruption stops its group and travels on."""
        started = said = time.monotonic()

        def tick() -> None:
            nonlocal said
            now = time.monotonic()
            if self.poll():
                said = now
            elif now - said > self.heartbeat_seconds:
                where = f"output {self.output}" if self.output != "?" else self.last_line[:100] or "starting"
                self.progress(f"      ... {now - started:.0f} s: {where}")
                said = now

        # the log starts with the command, then the builder writes into it; poll() reads what it gained
        header = f"$ {' '.join(command)}\n"
        self._tail = child_process.LogTail(self.log, offset=len(header.encode()))
        returncode = interruption.run_child(
            command, cwd, env, log=self.log, header=header, on_tick=tick, grace=STOP_GRACE_SECONDS,
            tick=POLL_SECONDS,
        )  # fmt: skip
        self.poll()
        return returncode

    def poll(self) -> bool:
        """Print what is new: the output being built, each finished pass; whether anything was."""
        said = False
        names = [found[1] for line in self._new_lines() if (found := self._read(line))]
        logs = self.script_logs()
        if logs:
            with logs[-1].open("rb") as handle:
                handle.seek(max(0, logs[-1].stat().st_size - 65536))
                names += _PKG_NAME.findall(handle.read().decode(errors="replace"))
        # each name once: rattler-build's work directory of an output starts with a copy of the staging's log,
        # and one output's variants follow each other (each pass's line below names its Python)
        if names and names[-1] not in self._announced:
            self.output = names[-1]
            self._announced.add(self.output)
            self.progress(f"      building {self.output} ...")
            said = True
        for path in sorted(self.reports.glob("*.json")):
            if path.name in self._shown:
                continue
            self._shown.add(path.name)
            last = json.loads(path.read_text())["passes"][-1]
            objects = sum(last["objects_by_target"].values())
            self.progress(f"      pass {last['pass_name']}: {objects} objects compiled, {last['seconds']} s")
            said = True
        return said

    def failure(self, config: str, packages: Path) -> str:
        """One line: the output that failed, the builder's last message, the log to read. The packages
        already built (``packages``) are removed: nothing half-made is left."""
        self.poll()
        text = self.log.read_text(errors="replace")
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        errors = [line for line in lines if "error" in line.lower()]
        last = (errors or lines or ["no output"])[-1]
        logs = self.script_logs()
        # rattler-build's own output names no output: its build script's log does
        where = logs[-1] if logs and not _PKG_NAME.search(text) else self.log
        shutil.rmtree(packages, ignore_errors=True)
        step = "test" if any(line.startswith(("TEST START", "Testing")) for line in lines[-200:]) else "build"
        return (
            f"{self.builder} failed on output {self.output} of {config} (step: {step}): {last[:300]}; "
            f"read {where}, fix the recipe or the driver and run again"
        )

    def _read(self, line: str) -> re.Match[str] | None:
        self.last_line = line.strip() or self.last_line
        return _PKG_NAME.search(line)

    def _new_lines(self) -> list[str]:
        if self._tail is None:  # a log written before (failure() of a run this watch did not start)
            self._tail = child_process.LogTail(self.log)
        return self._tail.lines()
