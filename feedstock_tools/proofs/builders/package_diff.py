"""The files of two builders' packages of one configuration, package by package (``real-build --compare``).

A package is named by its name and its build string less the hash each builder computes its own way
(``pytorch 2.13.0 cpu_generic_py312_h*_0``); its files are the archive's ``pkg`` part (``info/`` is the
builder's own metadata and is left out). What differs is listed by directory, so a difference with one cause
(pass 1's ``.pyc`` files, a builder's own file) is one line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

_HASH = re.compile(r"_h[0-9a-f]{7}_")
GROUP_DEPTH = 3  # path components a difference is grouped by


@dataclass(frozen=True)
class PackageFiles:
    key: str  # "name version build" with the build string's hash masked
    files: frozenset[str]


@dataclass(frozen=True)
class Difference:
    key: str
    only_first: tuple[str, ...]
    only_second: tuple[str, ...]
    common: int


def package_key(path: Path) -> str:
    name, version, build = path.name.removesuffix(".conda").rsplit("-", 2)
    return f"{name} {version} {_HASH.sub('_h*_', build)}"


def files_of(path: Path) -> PackageFiles:
    """The paths of a .conda package's files (its pkg part: files and links, not directories)."""
    from conda_package_streaming.package_streaming import stream_conda_component

    files = frozenset(member.name for _, member in stream_conda_component(str(path)) if not member.isdir())
    return PackageFiles(package_key(path), files)


def compare(first: Iterable[Path], second: Iterable[Path]) -> list[Difference]:
    """Every package of either side, by key: what only one side has (a package missing on a side: all its
    files are on the other only)."""
    ours = {p.key: p.files for p in map(files_of, first)}
    theirs = {p.key: p.files for p in map(files_of, second)}
    return [
        Difference(
            key,
            tuple(sorted(ours.get(key, frozenset()) - theirs.get(key, frozenset()))),
            tuple(sorted(theirs.get(key, frozenset()) - ours.get(key, frozenset()))),
            len(ours.get(key, frozenset()) & theirs.get(key, frozenset())),
        )
        for key in sorted(ours.keys() | theirs.keys())
    ]


def describe(differences: Sequence[Difference], first: str, second: str) -> list[str]:
    """One line per package, then one per directory whose files only one side has."""
    lines = []
    for diff in differences:
        if not diff.only_first and not diff.only_second:
            lines.append(f"{diff.key}: the same {diff.common} files")
            continue
        lines.append(
            f"{diff.key}: {diff.common} files in both, {len(diff.only_first)} only in {first}'s, "
            f"{len(diff.only_second)} only in {second}'s"
        )
        for side, paths in ((first, diff.only_first), (second, diff.only_second)):
            for group, members in _grouped(paths).items():
                lines.append(f"  only in {side}'s: {len(members)} under {group}/ (first {members[0]})")
    return lines


def _grouped(paths: Iterable[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for path in paths:
        parts = path.split("/")
        groups.setdefault("/".join(parts[: min(GROUP_DEPTH, len(parts) - 1)]) or ".", []).append(path)
    return groups
