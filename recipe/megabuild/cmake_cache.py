"""A model of CMake's ``CMakeCache.txt``: typed entries with help text, edited by key, written atomically.

The file is a sequence of lines. CMake writes:

* comment lines starting with ``#`` (the banner and the EXTERNAL/INTERNAL section headers) and blank lines;
* help text: one or more ``//`` lines directly above an entry;
* entries ``KEY:TYPE=VALUE``, where KEY may be double-quoted (when it contains ``:`` or ``=``) and VALUE is
  wrapped in single quotes when it starts or ends with white space. ``KEY=VALUE`` without a type is
  accepted by CMake (and by this model) and means ``UNINITIALIZED``.

Entries that are not edited are written back byte for byte, so a load/write round trip changes nothing and a
diff of the file shows exactly the edits. Every edit is a named key with an old and a new value
(:func:`CMakeCache.changes_from`), which the driver prints in the build log.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from megabuild.atomic_file import write_text
from megabuild.errors import MegabuildError

# The cache entry types CMake knows (cmState::StringToCacheEntryType).
CACHE_TYPES = frozenset({"BOOL", "PATH", "FILEPATH", "STRING", "INTERNAL", "STATIC", "UNINITIALIZED"})

# Suffixes of the property entries CMake stores beside an entry, e.g. ``CMAKE_AR-ADVANCED:INTERNAL=1``.
PROPERTY_SUFFIXES = ("-ADVANCED", "-MODIFIED", "-STRINGS")

# KEY:TYPE=VALUE, KEY=VALUE, "KEY":TYPE=VALUE. The key of an unquoted entry stops at the first ':' or '='.
_QUOTED_ENTRY = re.compile(r'^"(?P<key>[^"]*)"(?::(?P<type>[A-Za-z]+))?=(?P<value>.*)$')
_PLAIN_ENTRY = re.compile(r"^(?P<key>[^:=\s][^:=]*)(?::(?P<type>[A-Za-z]+))?=(?P<value>.*)$")

_INTERNAL_HEADER = "# INTERNAL cache entries"


class CMakeCacheError(MegabuildError):
    """A CMakeCache.txt that cannot be parsed or an edit that cannot be made."""


@dataclass(frozen=True)
class CacheEntry:
    """One cache entry: ``help`` is the ``//`` text above it (lines joined with newlines, without ``//``)."""

    key: str
    type: str
    value: str
    help: str = ""


class CacheChange(NamedTuple):
    """One difference between two caches; ``old``/``new`` are values, ``None`` when the key is absent."""

    key: str
    old: str | None
    new: str | None
    old_type: str | None = None
    new_type: str | None = None

    def describe(self) -> str:
        """One log line: ``KEY: 'old' -> 'new'`` (``(absent)`` for a missing side)."""
        old = "(absent)" if self.old is None else f"{self.old_type}={self.old!r}"
        new = "(absent)" if self.new is None else f"{self.new_type}={self.new!r}"
        return f"{self.key}: {old} -> {new}"


@dataclass
class _EntryBlock:
    """An entry and the exact lines it came from (help lines + the entry line), for byte-exact rewrites."""

    entry: CacheEntry
    raw_lines: list[str] | None  # None once edited: the block is rendered from ``entry``.


@dataclass
class CMakeCache:
    """The parsed cache. ``entries`` is an ordered read-only view key -> :class:`CacheEntry`."""

    path: Path | None = None
    # The file as a sequence of items: a raw line (str, newline included) or an entry block.
    _items: list[str | _EntryBlock] = field(default_factory=list)
    _blocks: dict[str, _EntryBlock] = field(default_factory=dict)

    # --- reading -----------------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: os.PathLike[str] | str) -> CMakeCache:
        path = Path(path)
        try:
            # CMake writes paths as bytes; surrogateescape keeps any non-UTF-8 byte and writes it back
            text = path.read_text(encoding="utf-8", errors="surrogateescape")
        except FileNotFoundError:
            raise CMakeCacheError(f"{path}: no CMake cache there: configure the build first") from None
        return cls.parse(text, path)

    @classmethod
    def parse(cls, text: str, path: Path | None = None) -> CMakeCache:
        cache = cls(path=path)
        pending_help: list[str] = []  # raw '//' lines waiting for the entry they describe
        where = str(path) if path else "<CMakeCache.txt>"
        for number, line in enumerate(text.splitlines(keepends=True), start=1):
            stripped = line.strip()
            if stripped.startswith("//"):
                pending_help.append(line)
                continue
            if not stripped or stripped.startswith("#"):
                cache._items.extend(pending_help)  # help not followed by an entry stays as comment text
                pending_help = []
                cache._items.append(line)
                continue
            entry = _parse_entry(line.rstrip("\r\n").lstrip(), where, number, pending_help)
            if entry.key in cache._blocks:
                raise CMakeCacheError(
                    f"{where}:{number}: cache entry {entry.key} appears twice: remove one of them"
                )
            block = _EntryBlock(entry, [*pending_help, line])
            pending_help = []
            cache._items.append(block)
            cache._blocks[entry.key] = block
        cache._items.extend(pending_help)
        return cache

    @property
    def entries(self) -> Mapping[str, CacheEntry]:
        return _EntriesView(self._blocks)

    def get(self, key: str, default: str | None = None) -> str | None:
        """The value of ``key`` or ``default``."""
        block = self._blocks.get(key)
        return block.entry.value if block else default

    def __contains__(self, key: object) -> bool:
        return key in self._blocks

    # --- editing -----------------------------------------------------------------------------------------

    def set(self, key: str, value: str, type: str | None = None) -> CacheChange | None:
        """Set ``key`` to ``value`` (and ``type`` when given); returns the change, or None if nothing changed.

        A new key needs a type; it is added at the end of the EXTERNAL section (or of the file for INTERNAL).
        """
        if type is not None and type not in CACHE_TYPES:
            raise CMakeCacheError(f"cache type {type!r} of {key} is not a CMake cache type ({_types()})")
        if "\n" in value or "\r" in value:
            raise CMakeCacheError(f"value of {key} contains a line break: CMake cache values are one line")
        block = self._blocks.get(key)
        if block is None:
            if type is None:
                raise CMakeCacheError(f"cannot add {key} without a type: pass type=STRING, BOOL, PATH, ...")
            block = _EntryBlock(CacheEntry(key, type, value), None)
            self._insert_new(block)
            self._blocks[key] = block
            return CacheChange(key, None, value, None, type)
        old = block.entry
        new_type = type or old.type
        if old.value == value and old.type == new_type:
            return None
        block.entry = CacheEntry(key, new_type, value, old.help)
        block.raw_lines = None
        return CacheChange(key, old.value, value, old.type, new_type)

    def remove(self, key: str) -> list[CacheChange]:
        """Remove ``key`` and its property entries (``KEY-ADVANCED`` ...); returns what was removed."""
        removed: list[CacheChange] = []
        for name in (key, *(key + suffix for suffix in PROPERTY_SUFFIXES)):
            block = self._blocks.pop(name, None)
            if block is not None:
                self._items.remove(block)
                removed.append(CacheChange(name, block.entry.value, None, block.entry.type, None))
        return removed

    def changes_from(self, other: CMakeCache) -> list[CacheChange]:
        """What changed going from ``other`` to this cache, key by key (this cache's order, then removals)."""
        changes: list[CacheChange] = []
        for key, entry in self.entries.items():
            before = other.entries.get(key)
            if before is None:
                changes.append(CacheChange(key, None, entry.value, None, entry.type))
            elif (before.value, before.type) != (entry.value, entry.type):
                changes.append(CacheChange(key, before.value, entry.value, before.type, entry.type))
        for key, before in other.entries.items():
            if key not in self._blocks:
                changes.append(CacheChange(key, before.value, None, before.type, None))
        return changes

    def not_kept(self, changes: list[CacheChange]) -> list[str]:
        """Which of our earlier ``set`` edits this (re-read) cache no longer has: CMake overwrote them."""
        return [
            f"{change.key}={self.get(change.key)!r} (we set {change.new!r})"
            for change in changes
            if change.new is not None and self.get(change.key) != change.new
        ]

    # --- writing -----------------------------------------------------------------------------------------

    def render(self) -> str:
        out: list[str] = []
        for item in self._items:
            if isinstance(item, str):
                out.append(item)
            elif item.raw_lines is not None:
                out.extend(item.raw_lines)
            else:
                out.append(_render_entry(item.entry))
        return "".join(out)

    def write(self, path: os.PathLike[str] | str | None = None) -> Path:
        """Write atomically: a temporary file beside the target, then rename over it."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise CMakeCacheError("no path to write the cache to: pass one to write()")
        mode = target.stat().st_mode & 0o7777 if target.exists() else None
        return write_text(target, self.render(), mode=mode, errors="surrogateescape", newline="")

    # --- internals ---------------------------------------------------------------------------------------

    def _insert_new(self, block: _EntryBlock) -> None:
        if block.entry.type != "INTERNAL":
            # Before the banner of the INTERNAL section: its "####" line precedes the header line.
            for index, item in enumerate(self._items):
                if isinstance(item, str) and item.strip() == _INTERNAL_HEADER:
                    start = index
                    while start > 0:
                        previous = self._items[start - 1]
                        if not (isinstance(previous, str) and previous.strip().startswith("#")):
                            break
                        start -= 1
                    self._items.insert(start, block)
                    return
        self._items.append(block)


class _EntriesView(Mapping[str, CacheEntry]):
    def __init__(self, blocks: dict[str, _EntryBlock]) -> None:
        self._blocks = blocks

    def __getitem__(self, key: str) -> CacheEntry:
        return self._blocks[key].entry

    def __iter__(self) -> Iterator[str]:
        return iter(self._blocks)

    def __len__(self) -> int:
        return len(self._blocks)


def _types() -> str:
    return ", ".join(sorted(CACHE_TYPES))


def _parse_entry(stripped: str, where: str, number: int, help_lines: list[str]) -> CacheEntry:
    match = _QUOTED_ENTRY.match(stripped) if stripped.startswith('"') else _PLAIN_ENTRY.match(stripped)
    if match is None:
        raise CMakeCacheError(
            f"{where}:{number}: malformed cache entry {stripped[:60]!r}: expected KEY:TYPE=VALUE; "
            "fix or delete the line"
        )
    entry_type = (match["type"] or "UNINITIALIZED").upper()
    if entry_type not in CACHE_TYPES:
        raise CMakeCacheError(
            f"{where}:{number}: unknown cache type {match['type']!r} of {match['key']}: use one of {_types()}"
        )
    value = match["value"]
    # CMake wraps a value that starts or ends with white space in single quotes, and strips them on read.
    if len(value) >= 2 and value[0] == "'" and value[-1] == "'":
        value = value[1:-1]
    help_text = "\n".join(line.strip()[2:].lstrip(" ") for line in help_lines)
    return CacheEntry(match["key"], entry_type, value, help_text)


def _render_entry(entry: CacheEntry) -> str:
    lines = [f"//{line}\n" for line in entry.help.split("\n")] if entry.help else []
    key = f'"{entry.key}"' if (":" in entry.key or "=" in entry.key) else entry.key
    value = entry.value
    if value and (value[0].isspace() or value[-1].isspace() or (value[0] == "'" and value[-1] == "'")):
        value = f"'{value}'"
    lines.append(f"{key}:{entry.type}={value}\n")
    return "".join(lines)
