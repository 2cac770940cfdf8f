"""Which objects one step compiled, read from the build directory's ``.ninja_log``.

A thin adapter over the build driver's reader ``megabuild.ninja_log``: the harness snapshots the log
(the latest entry per output) before and after each build script; the step's objects are the entries
that are new or changed in between, which survives Ninja compacting its log. An object is what the
driver counts as one, so the rehearsal's step table measures what the driver's report records. Every entry
the harness has seen in any snapshot is remembered: a line ninja wrote in an earlier step and the driver
appended again is not a compile of this step.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from feedstock_tools.common.errors import ToolError
from megabuild import ninja_log

Snapshot = dict[str, Any]  # output -> megabuild.ninja_log.LogEntry


def snapshot(path: Path) -> Snapshot:
    """The latest log entry per output; empty while nothing was built. A log the driver cannot read is a
    one-line error."""
    try:
        return ninja_log.read_log(path)
    except ninja_log.NinjaLogError as exc:
        raise ToolError(str(exc)) from exc


def objects_between(before: Snapshot, after: Snapshot, seen: Collection[Any] = frozenset()) -> list[str]:
    """The object files Ninja compiled between two snapshots, sorted. An entry of an earlier snapshot
    (``seen``) is no compile: the driver put a kept object back with the log line ninja wrote when it
    compiled it (megabuild/python_products.py), which was counted then."""
    ran = [entry for entry in ninja_log.ran_between(before, after) if entry not in seen]
    return ninja_log.PassWork.from_entries(ran).objects


def target_of(object_path: str) -> str:
    target = ninja_log.target_of_object(object_path) if ninja_log.is_object(object_path) else None
    if target is None:
        raise ValueError(f"{object_path} is not an object of a CMake target")
    return target


def targets_of(object_paths: list[str]) -> list[str]:
    return sorted({target_of(path) for path in object_paths})
