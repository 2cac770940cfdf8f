"""Ask ninja about the build graph: its command lines, and which outputs it would rebuild.

Why pass 1 needs this (measured on Debian's pytorch 2.6.0+dfsg, docs/records/2026-11-25-real-graph.md):
CMake's first configure and its first reconfigure can write different command lines.
There, ``caffe2/CMakeLists.txt`` creates an imported ``fmt`` target only ``if(NOT FMT_LIBRARY)``: the first
configure links ``/usr/lib/x86_64-linux-gnu/libfmt.so``, every later one (the cache now holds
``FMT_LIBRARY``) links ``-lfmt``. A later pass's cache edit triggers such a reconfigure, and ninja then
relinks ``libtorch_cpu`` and ``libtorch_python`` for nothing. So pass 1 reconfigures until the command lines
stop changing before it builds (:func:`settle`), and checks afterwards that a reconfigure leaves nothing to
rebuild (:func:`rebuilt_after_reconfigure`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from megabuild.errors import MegabuildError
from megabuild.ninja_log import is_linked, is_object, ran_between, read_log

# The descriptions CMake's Ninja generator gives compile and link edges end with the output's path:
# "Building CXX object caffe2/CMakeFiles/torch_cpu.dir/…/Foo.cpp.o", "Linking CXX shared library
# lib/libtorch_cpu.so.2.6.0" (also static library, shared module, executable). A dry run prints them.
_COMPILE_OR_LINK = re.compile(r"^\[\d+/\d+\] (?:Building|Linking) .* (\S+)$")
MAX_RECONFIGURES = 3  # a graph still changing after this many plain reconfigures never settles


class GraphError(MegabuildError):
    """ninja or CMake could not answer a question about the build graph."""


def commands(build_dir: Path, env: Mapping[str, str]) -> list[str]:
    """Every command line of the default targets, as ninja hashes them into .ninja_log."""
    return _ninja(build_dir, env, ["-t", "commands"]).splitlines()


# Files of the build directory CMake may write during a configure that objects are compiled from.
GENERATED_SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".h", ".hpp", ".cuh", ".inc")


def reconfigure(build_dir: Path, env: Mapping[str, str]) -> None:
    """A plain reconfigure (what ninja's generator rule runs when a cache edit makes build.ninja stale) that
    leaves files it rewrote with the same bytes at their old time stamp. PyTorch's caffe2/CMakeLists.txt
    (2.6.0, measured here) writes build/empty.cpp with file(WRITE) on every configure: its new time stamp
    recompiled empty.cpp.o and relinked libtorch.so in every later pass."""
    before = _generated_sources(build_dir)
    result = subprocess.run(
        ["cmake", str(build_dir)], cwd=build_dir, env=dict(env), capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise GraphError(f"the reconfigure `cmake {build_dir}` failed ({last}): fix the configure first")
    for path, (mtime_ns, digest) in before.items():
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        if stat.st_mtime_ns != mtime_ns and _sha256(path) == digest:
            os.utime(path, ns=(stat.st_atime_ns, mtime_ns))


def _generated_sources(build_dir: Path) -> dict[Path, tuple[int, str]]:
    found = {}
    for path in build_dir.rglob("*"):
        if path.suffix in GENERATED_SOURCE_SUFFIXES and "CMakeFiles" not in path.parts and path.is_file():
            found[path] = (path.stat().st_mtime_ns, _sha256(path))
    return found


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def output_of(command: str) -> str:
    """The ``-o`` output of a compile or link command, else the whole command (shortened)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    if "-o" in words[:-1]:
        return words[words.index("-o") + 1]
    return command[:120]


def changed_outputs(before: list[str], after: list[str]) -> list[str]:
    """Outputs whose command line differs between two ``commands()`` answers (new or rewritten)."""
    old = set(before)
    return sorted({output_of(command) for command in after if command not in old})


@dataclass(frozen=True)
class Settled:
    reconfigures: int
    rewritten: list[str]  # outputs whose command line a reconfigure changed before the graph settled


def settle(
    build_dir: Path,
    env: Mapping[str, str],
    run_reconfigure: Callable[[Path, Mapping[str, str]], None] = reconfigure,
) -> Settled:
    """Reconfigure until the command lines stop changing; nothing has been built yet, so this costs only
    the reconfigures. A graph that keeps changing is an error: every later pass would rebuild part of it."""
    current = commands(build_dir, env)
    rewritten: list[str] = []
    for count in range(1, MAX_RECONFIGURES + 1):
        run_reconfigure(build_dir, env)
        latest = commands(build_dir, env)
        changed = changed_outputs(current, latest)
        if not changed:
            return Settled(count, rewritten)
        rewritten += [o for o in changed if o not in rewritten]
        current = latest
    raise GraphError(
        f"the build graph still changes after {MAX_RECONFIGURES} reconfigures ({len(changed)} command "
        f"line(s), first {changed[0]}): CMake writes different commands on every run; find the "
        "configure step that does so (`ninja -t commands` before and after `cmake build`)"
    )


def would_run(build_dir: Path, env: Mapping[str, str]) -> list[str]:
    """The objects and linked files ninja would build now (a dry run), in ninja's order.

    A dry run cannot know that a code generator leaves its outputs unchanged (restat), so after a change
    to a generator's command it over-counts; and while build.ninja itself is stale (a cache edit, or a
    generator whose outputs CMake reads) ninja plans nothing and says so: build ``build.ninja`` first."""
    text = _ninja(build_dir, env, ["-n"])
    return [match[1] for line in text.splitlines() if (match := _COMPILE_OR_LINK.match(line))]


def rebuilt_after_reconfigure(
    build_dir: Path, env: Mapping[str, str], build: Callable[[], None]
) -> list[str]:
    """Reconfigure, run ``build`` again, and return the objects and linked files it made: what every later
    pass would otherwise redo (made here once). Empty for a settled graph. A build, not a dry run: a dry
    run cannot see that a code generator left its outputs unchanged (restat) and lists their dependents."""
    reconfigure(build_dir, env)
    before = read_log(build_dir / ".ninja_log")
    build()
    ran = ran_between(before, read_log(build_dir / ".ninja_log"))
    return [entry.output for entry in ran if is_object(entry.output) or is_linked(entry.output)]


def _ninja(build_dir: Path, env: Mapping[str, str], args: list[str]) -> str:
    try:
        result = subprocess.run(
            ["ninja", "-C", str(build_dir), *args], env=dict(env), capture_output=True, text=True, check=False
        )
    except OSError as exc:
        raise GraphError(
            f"cannot run ninja ({exc.strerror or exc}): add ninja to the build requirements"
        ) from None
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise GraphError(f"`ninja -C {build_dir} {' '.join(args)}` failed: {last}")
    return result.stdout
