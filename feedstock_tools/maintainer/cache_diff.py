"""``cache-diff A B``: the CMakeCache entries that differ between two caches (two builds, two passes).

Each side is a ``CMakeCache.txt`` file or a build directory holding one. The comparison is the build
driver's own model (``recipe/megabuild/cmake_cache.py``, ``CMakeCache.changes_from``), so the tool
reports exactly what the driver would log as edits.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
from pathlib import Path
from typing import Any

from feedstock_tools.common.errors import ToolError

# Entries that always differ between two build directories and say nothing about the configuration.
LOCATION_KEYS = ("CMAKE_CACHEFILE_DIR", "*_BINARY_DIR", "CMAKE_FIND_PACKAGE_REDIRECTS_DIR")


def _cache_path(path: Path) -> Path:
    candidate = path / "CMakeCache.txt" if path.is_dir() else path
    if not candidate.is_file():
        raise ToolError(f"{path}: no CMakeCache.txt there; give a cache file or a configured build directory")
    if candidate.stat().st_size == 0:  # CMake always writes its header and entries: cut short, or not one
        raise ToolError(f"{candidate} is empty; give a cache CMake wrote (reconfigure the build directory)")
    return candidate


def load_cache(path: Path) -> Any:
    from megabuild import cmake_cache

    try:
        return cmake_cache.CMakeCache.load(_cache_path(path))
    except cmake_cache.CMakeCacheError as exc:
        raise ToolError(str(exc)) from exc


def cache_changes(
    before: Path, after: Path, ignore: tuple[str, ...] = (), internal: bool = True
) -> list[dict[str, str | None]]:
    """Entries that differ from ``before`` to ``after`` as dicts: key, change, type and both values."""
    old, new = load_cache(before), load_cache(after)
    rows = []
    for change in new.changes_from(old):
        if any(fnmatch.fnmatchcase(change.key, pattern) for pattern in ignore):
            continue
        types = {change.old_type, change.new_type} - {None}
        if not internal and types <= {"INTERNAL", "STATIC"}:
            continue
        kind = "added" if change.old is None else "removed" if change.new is None else "changed"
        rows.append(
            {
                "key": change.key,
                "change": kind,
                "type": change.new_type or change.old_type,
                "a": change.old,
                "b": change.new,
            }
        )
    return rows


def render_table(rows: list[dict[str, str | None]], a_label: str, b_label: str) -> str:
    if not rows:
        return "no differences\n"

    def show(value: str | None) -> str:
        return "(absent)" if value is None else value.replace("|", "\\|") or '""'

    lines = [f"| Key | Change | Type | A: {a_label} | B: {b_label} |", "|---|---|---|---|---|"]
    lines += [
        f"| {row['key']} | {row['change']} | {row['type']} | {show(row['a'])} | {show(row['b'])} |"
        for row in rows
    ]
    counts = {kind: sum(row["change"] == kind for row in rows) for kind in ("changed", "added", "removed")}
    lines += ["", ", ".join(f"{count} {kind}" for kind, count in counts.items())]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    ignore = tuple(args.ignore or ()) + (() if args.keep_locations else LOCATION_KEYS)
    rows = cache_changes(args.a, args.b, ignore=ignore, internal=not args.no_internal)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(render_table(rows, str(args.a), str(args.b)), end="")
    return 2 if rows and args.exit_code else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cache-diff",
        help="CMakeCache entries that differ between two caches or build directories",
        description=(
            "Compare two CMake caches (CMakeCache.txt files, or build directories holding one), e.g. two "
            "configurations of the megabuild or the cache before and after a pass, and print the entries "
            "that were added, removed or changed as a Markdown table (or JSON). Entries that only record "
            "where the build directory is (CMAKE_CACHEFILE_DIR, *_BINARY_DIR) are hidden unless "
            "--keep-locations is given."
        ),
    )
    parser.add_argument("a", type=Path, help="first cache (file or build directory)")
    parser.add_argument("b", type=Path, help="second cache (file or build directory)")
    parser.add_argument(
        "--ignore", action="append", metavar="GLOB", help="hide keys matching GLOB (repeatable)"
    )
    parser.add_argument("--no-internal", action="store_true", help="hide INTERNAL and STATIC entries")
    parser.add_argument("--keep-locations", action="store_true", help="show build-directory location entries")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--exit-code", action="store_true", help="exit with status 2 when the caches differ")
    parser.set_defaults(func=run)
