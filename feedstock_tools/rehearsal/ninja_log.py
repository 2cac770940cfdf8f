"""Which objects one step compiled, read from the build directory's ``.ninja_log``.

Ninja appends one line per command it ran (``start end mtime output hash``). The harness keeps the
log's text before each step; the step's entries are what was appended. If Ninja recompacted the log
in between (it rewrites it when it grows), the step's entries are those whose recorded output mtime
is not older than the step's start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# CMake's Ninja generator puts the objects of target T under <dir>/CMakeFiles/T.dir/.
_OBJECT = re.compile(r"(?:^|/)CMakeFiles/(?P<target>[^/]+)\.dir/.+\.o$")


@dataclass(frozen=True)
class LogEntry:
    output: str
    mtime_ns: int


def read_log(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def parse(text: str) -> list[LogEntry]:
    entries: list[LogEntry] = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) >= 4 and fields[2].isdigit():
            entries.append(LogEntry(fields[3], int(fields[2])))
    return entries


def new_entries(before: str, after: str, step_start_ns: int) -> list[LogEntry]:
    if after.startswith(before):
        return parse(after[len(before) :])
    return [entry for entry in parse(after) if entry.mtime_ns >= step_start_ns]


def objects(entries: list[LogEntry]) -> list[str]:
    """Object files among ``entries``, each once, in log order."""
    seen: dict[str, None] = {}
    for entry in entries:
        if _OBJECT.search(entry.output):
            seen.setdefault(entry.output, None)
    return list(seen)


def target_of(object_path: str) -> str:
    match = _OBJECT.search(object_path)
    if not match:
        raise ValueError(f"{object_path} is not an object of a CMake target")
    return match.group("target")


def targets_of(object_paths: list[str]) -> list[str]:
    return sorted({target_of(path) for path in object_paths})
