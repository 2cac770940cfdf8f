"""Read Ninja's ``.ninja_log`` and tell which outputs a build pass produced.

Format (ninja 1.10 and later writes v5; 1.12 v6; 1.13 v7): a ``# ninja log vN`` header, then one line per
output run, ``start_ms<TAB>end_ms<TAB>mtime<TAB>output<TAB>command_hash``. The file is appended to on every
run and compacted now and then, keeping the latest line per output. Start and end restart from 0 with every
ninja invocation, so "what ran in this pass" is every output whose latest line changed between a snapshot
taken before the pass and one taken after it, which survives compaction.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from megabuild.errors import MegabuildError

SUPPORTED_VERSIONS = (5, 6, 7)
_HEADER = re.compile(r"# ninja log v(\d+)\s*$")
# Objects of CMake targets live in <dir>/CMakeFiles/<target>.dir/...
_TARGET_OF_OBJECT = re.compile(r"(?:^|/)CMakeFiles/([^/]+)\.dir/")
OBJECT_SUFFIXES = (".o", ".obj")
LINKED_SUFFIXES = (".so", ".a", ".dylib")


class NinjaLogError(MegabuildError):
    """A .ninja_log this module cannot read."""


@dataclass(frozen=True)
class LogEntry:
    start_ms: int
    end_ms: int
    mtime: int
    output: str
    command_hash: str

    def line(self) -> str:
        """The entry as the log holds it (read_log keeps every field's text)."""
        return f"{self.start_ms}\t{self.end_ms}\t{self.mtime}\t{self.output}\t{self.command_hash}\n"


def read_log(path: Path) -> dict[str, LogEntry]:
    """The latest entry per output; an absent log (nothing built yet) is empty."""
    if not path.exists():
        return {}
    entries: dict[str, LogEntry] = {}
    with path.open(encoding="utf-8", errors="surrogateescape") as handle:
        header = handle.readline()
        match = _HEADER.match(header)
        if match is None or int(match[1]) not in SUPPORTED_VERSIONS:
            raise NinjaLogError(
                f"{path}:1: unsupported ninja log header {header.strip()!r}: this driver reads versions "
                f"{', '.join(map(str, SUPPORTED_VERSIONS))}; use ninja 1.10 to 1.13"
            )
        for number, raw in enumerate(handle, start=2):
            line = raw.rstrip("\n")
            if not line:
                continue
            fields = line.split("\t")
            if len(fields) != 5 or not all(f.lstrip("-").isdigit() for f in fields[:3]):
                raise NinjaLogError(f"{path}:{number}: malformed ninja log line {line[:80]!r}")
            start, end, mtime, output, command_hash = fields
            entries[output] = LogEntry(int(start), int(end), int(mtime), output, command_hash)
    return entries


def check_ninja_writes_known_log(env: Mapping[str, str]) -> None:
    """Before pass 1 compiles for hours: let the ninja the build will use write a log of a one-edge build
    in a scratch directory and read its header; a format this module does not know stops the pass now.
    (No ninja on PATH: nothing to check, setup.py will say so.)"""
    ninja = shutil.which("ninja", path=env.get("PATH"))
    if ninja is None:
        return
    with tempfile.TemporaryDirectory(prefix="megabuild-ninja-probe-") as scratch:
        manifest = Path(scratch) / "build.ninja"
        manifest.write_text("rule touch\n  command = touch $out\nbuild probe: touch\n", encoding="utf-8")
        result = subprocess.run(
            [ninja, "-C", scratch], capture_output=True, text=True, check=False, timeout=60
        )
        if result.returncode != 0:
            return  # a ninja that cannot build this cannot build PyTorch either; setup.py reports it
        read_log(Path(scratch) / ".ninja_log")


def ran_between(before: dict[str, LogEntry], after: dict[str, LogEntry]) -> list[LogEntry]:
    """Entries that are new or changed in ``after``: what ninja ran in between, in log order."""
    return [entry for output, entry in after.items() if before.get(output) != entry]


def is_object(output: str) -> bool:
    return output.endswith(OBJECT_SUFFIXES)


def is_linked(output: str) -> bool:
    """Libraries and executables: a linked file is a rebuilt target."""
    name = output.rsplit("/", 1)[-1]
    return name.endswith(LINKED_SUFFIXES) or ".so." in name or (output.startswith("bin/") and "." not in name)


def target_of_object(output: str) -> str | None:
    match = _TARGET_OF_OBJECT.search(output)
    return match[1] if match else None


def target_of_linked(output: str) -> str:
    """The CMake target a linked file belongs to, by CMake's naming: ``lib/libtorch_cpu.so.2.6.0`` and
    ``libtorch_cpu.dylib`` are ``torch_cpu``, ``torch/_C.cpython-312-x86_64-linux-gnu.so`` is ``_C``,
    ``bin/torch_shm_manager`` is ``torch_shm_manager``."""
    name = output.rsplit("/", 1)[-1]
    if name.startswith("lib") and (".so" in name or name.endswith((".a", ".dylib"))):
        name = name[len("lib") :]
    return name.split(".", 1)[0]


@dataclass(frozen=True)
class PassWork:
    """What one pass made ninja do."""

    objects: list[str]
    linked: list[str]
    other: list[str]

    @classmethod
    def from_entries(cls, entries: list[LogEntry]) -> PassWork:
        outputs = [entry.output for entry in entries]
        objects = sorted(o for o in outputs if is_object(o))
        linked = sorted(o for o in outputs if not is_object(o) and is_linked(o))
        other = sorted(o for o in outputs if not is_object(o) and not is_linked(o))
        return cls(objects, linked, other)

    def objects_by_target(self) -> dict[str, list[str]]:
        grouped: dict[str, list[str]] = {}
        for output in self.objects:
            grouped.setdefault(target_of_object(output) or "(no target)", []).append(output)
        return grouped
