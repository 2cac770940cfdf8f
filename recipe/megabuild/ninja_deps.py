"""Read Ninja's ``.ninja_deps`` (the header dependencies of every compiled object) and append records to it.

Why the driver touches it at all: an object file ninja finds without a deps record, or with one whose time
stamp is older than the object, is rebuilt ("deps for ... are missing"). The driver keeps each Python's
compiled Python-linked objects when the build moves to another Python and puts them back when it returns
(``megabuild/python_products.py``); the deps records of the objects it puts back are the ones ninja wrote when
it compiled them, appended again, so that ninja finds the objects up to date, as it would have without the
detour.

The format (ninja's ``src/deps_log.cc``, version 4 since ninja 1.10 and still in 1.13): the 12 bytes
``# ninjadeps\\n``, a 4-byte version, then records, each a 4-byte size whose high bit marks a deps record, in
the machine's byte order:

* a path record: the path, padded with NUL bytes to a multiple of 4, then the one's complement of the id it
  gets (ids count the path records from 0, so a path may be recorded only once: ninja drops everything from
  a second record of the same path on);
* a deps record: the output's id, its modification time in nanoseconds (low, then high 32 bits), then the
  ids of its inputs. The last record of an output is the one ninja uses.

ninja cuts a file at its first incomplete record when it loads it ("premature end of file; recovering");
:func:`append` does the same before writing, so its records are read.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from megabuild.errors import MegabuildError

SIGNATURE = b"# ninjadeps\n"
VERSION = 4
MAX_RECORD_SIZE = (1 << 19) - 1  # ninja's kMaxRecordSize
_WORD = struct.Struct("=I")
_DEPS_FLAG = 0x80000000


class NinjaDepsError(MegabuildError):
    """A .ninja_deps this module cannot read or extend."""


@dataclass(frozen=True)
class Deps:
    """What ninja recorded for one output: the output's modification time (ns) and its inputs."""

    mtime: int
    inputs: tuple[str, ...]


@dataclass
class DepsLog:
    paths: list[str] = field(default_factory=list)  # by id
    deps: dict[str, Deps] = field(default_factory=dict)  # output -> its last record
    end: int = 0  # offset after the last complete record


def read(path: Path) -> DepsLog:
    """Every path and the last deps record of every output; an absent file is empty."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return DepsLog()
    header = len(SIGNATURE) + _WORD.size
    if not data.startswith(SIGNATURE) or len(data) < header:
        raise NinjaDepsError(f"{path} is not a ninja deps log: rebuild from pass 1 (PKG_NAME=libtorch-split)")
    version = _WORD.unpack_from(data, len(SIGNATURE))[0]
    if version != VERSION:
        raise NinjaDepsError(
            f"{path}: ninja deps log version {version}: this driver reads version {VERSION} (ninja 1.10 to "
            "1.13); use one of those ninjas"
        )
    log = DepsLog(end=header)
    offset = header
    while offset + _WORD.size <= len(data):
        (word,) = _WORD.unpack_from(data, offset)
        size = word & ~_DEPS_FLAG
        start = offset + _WORD.size
        if size > MAX_RECORD_SIZE or start + size > len(data) or size % 4:
            break  # an incomplete tail, as ninja reads it
        body = data[start : start + size]
        if word & _DEPS_FLAG:
            ids = struct.unpack(f"={size // 4}i", body)
            if any(i < 0 or i >= len(log.paths) for i in (ids[0], *ids[3:])):
                raise NinjaDepsError(f"{path}: a deps record names an unknown path at byte {offset}")
            mtime = ids[1] & 0xFFFFFFFF | (ids[2] & 0xFFFFFFFF) << 32
            log.deps[log.paths[ids[0]]] = Deps(mtime, tuple(log.paths[i] for i in ids[3:]))
        else:
            checksum = _WORD.unpack_from(body, size - 4)[0]
            if checksum != ~len(log.paths) & 0xFFFFFFFF:
                raise NinjaDepsError(f"{path}: path record {len(log.paths)} has a wrong checksum")
            log.paths.append(body[: size - 4].rstrip(b"\0").decode("utf-8", "surrogateescape"))
        offset = start + size
        log.end = offset
    return log


def append(path: Path, records: Mapping[str, Deps]) -> None:
    """Append a deps record per output (and a path record for every path the file lacks), one write."""
    if not records:
        return
    log = read(path)
    ids = {name: number for number, name in enumerate(log.paths)}
    chunks: list[bytes] = []

    def path_id(name: str) -> int:
        if name not in ids:
            ids[name] = len(ids)
            raw = name.encode("utf-8", "surrogateescape")
            raw += b"\0" * ((4 - len(raw) % 4) % 4)
            chunks.append(_record(raw + _WORD.pack(~ids[name] & 0xFFFFFFFF), deps=False))
        return ids[name]

    for output, deps in records.items():
        numbers: Sequence[int] = [path_id(output), *(path_id(name) for name in deps.inputs)]
        body = struct.pack(
            f"=iII{len(numbers) - 1}i",
            numbers[0],
            deps.mtime & 0xFFFFFFFF,
            deps.mtime >> 32 & 0xFFFFFFFF,
            *numbers[1:],
        )
        chunks.append(_record(body, deps=True))
    with open(path, "r+b" if path.exists() else "wb") as handle:
        if log.end == 0:
            handle.write(SIGNATURE + _WORD.pack(VERSION))
        else:
            handle.truncate(log.end)  # what ninja's own load does with an incomplete tail
            handle.seek(log.end)
        handle.write(b"".join(chunks))
        handle.flush()
        os.fsync(handle.fileno())


def _record(body: bytes, *, deps: bool) -> bytes:
    if len(body) > MAX_RECORD_SIZE:
        raise NinjaDepsError(f"a ninja deps record of {len(body)} bytes is more than ninja reads")
    return _WORD.pack(len(body) | (_DEPS_FLAG if deps else 0)) + body
