"""Entries of the per-user cache (common/user_cache.py): each one is what its key says, made whole or not at
all, and checked against its manifest whenever it is reused.

* **Keyed.** An entry's directory is ``<kind>-<label>-<digest>``: the digest of everything that decides its
  content (the maker's format, the interpreter's path and full version, the sources it is built from, the
  package-index settings, ...), so what another commit, interpreter or shell made is another entry.
* **Whole or not at all.** One maker at a time per entry: an ``flock`` on ``.locks/<name>``. It fills
  ``.staging/<name>@<pid>``, renames it into place and then writes its manifest, ``.manifests/<name>.json``
  (every file's type, size, mtime and SHA-256): a directory without its manifest is no entry. The manifest
  lives beside the entry, not in it, so that an entry holds only its content (a venv is linked into PREFIX
  whole). The next maker of an entry removes what a killed maker left in ``.staging``.
* **Checked on reuse.** Every reuse compares the entry with its manifest by ``lstat`` (type, size, mtime,
  link target, no file more or less); the first reuse in a process compares the digests too. A mismatch is
  one line, and the entry is made again.
* **Makers die whole.** A maker's children run through the one child-process runner
  (``megabuild/child_process.py``) in a process group of their own and inherit the entry's lock, so it is
  held until the last of them is gone: no second maker writes beside an orphan. A run that finds the lock
  held while the maker recorded in it is gone (SIGKILL: it cleaned nothing up) kills the recorded groups,
  then takes the lock.
* **Bounded.** Each reuse touches the entry's manifest (its mtime is the last use). After a new entry is
  made, entries unused for :data:`MAX_AGE_DAYS`, then the least recently used past :func:`max_bytes`, are
  removed (never one used in the last :data:`KEEP_RECENT_SECONDS`, nor one whose lock is held).
  ``python -m feedstock_tools cache`` lists and prunes by hand.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from feedstock_tools.common.errors import ToolError
from megabuild import atomic_file, child_process

# Bumped when the manifest's layout or the rules for a reusable entry change.
STORE_FORMAT = "1"
MANIFESTS = ".manifests"
LOCKS = ".locks"
STAGING = ".staging"
TRASH = ".trash"
# The store's own directories (every other name in a store is an entry, or what older tools left there).
INTERNAL = frozenset({MANIFESTS, LOCKS, STAGING, TRASH})
# Eviction after a new entry is made (docs/reference/per-user-cache.md): a machine's cache grew to 2.2 GB
# with nothing ever removed (issue 43); a whole test run from an empty cache leaves about 2.2 GB.
MAX_AGE_DAYS = 30.0
MAX_BYTES = 6 * 1024**3
MAX_BYTES_ENV = "PYTORCH_FEEDSTOCK_CACHE_MAX_GIB"
KEEP_RECENT_SECONDS = 3600.0
_CHUNK = 1 << 20

Say = Callable[[str], None]


def _quiet(_line: str) -> None:
    pass


def to_stderr(line: str) -> None:
    """Where a caller with no progress of its own has a mismatch or a wait said: never silently."""
    print(line.strip(), file=sys.stderr, flush=True)


# ---- keys --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EntryKey:
    """What decides an entry: its ``kind`` (venv, build-env, libmagma, wheels, channel), a readable
    ``label`` (a Python version) and every other input in ``inputs`` (JSON-serialisable)."""

    kind: str
    label: str
    inputs: Mapping[str, object]

    @property
    def name(self) -> str:
        text = json.dumps({"store": STORE_FORMAT, "kind": self.kind, "inputs": self.inputs}, sort_keys=True)
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        return f"{self.kind}-{self.label}-{digest}" if self.label else f"{self.kind}-{digest}"


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def tree_digest(root: Path) -> str:
    """One digest of every file's relative path, type and content below ``root`` (a key input: the
    stand-in's sources an entry is built from)."""
    digest = hashlib.sha256()
    for rel, record in sorted(_take_manifest(root, with_mtimes=False).items()):
        digest.update(json.dumps([rel, record]).encode())
    return digest.hexdigest()


# ---- manifests ---------------------------------------------------------------------------------------

# rel -> ["d"] | ["l", target] | ["f", size, mtime_ns, sha256, executable]
Record = list


def _walk(root: Path) -> Iterator[tuple[str, os.DirEntry]]:
    """Every entry below ``root`` with its '/'-separated relative path (strings: a 3,500-file venv is walked
    on every reuse)."""
    pending = [(str(root), "")]
    while pending:
        directory, prefix = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                rel = prefix + entry.name
                yield rel, entry
                if entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, rel + "/"))


def _take_manifest(root: Path, with_mtimes: bool = True) -> dict[str, Record]:
    files: dict[str, Record] = {}
    for rel, entry in _walk(root):
        if entry.is_symlink():
            files[rel] = ["l", os.readlink(entry.path)]
        elif entry.is_dir(follow_symlinks=False):
            files[rel] = ["d"]
        elif entry.is_file(follow_symlinks=False):
            info = entry.stat(follow_symlinks=False)
            executable = bool(info.st_mode & 0o111)
            mtime = info.st_mtime_ns if with_mtimes else 0
            files[rel] = ["f", info.st_size, mtime, file_digest(Path(entry.path)), executable]
        else:
            raise ToolError(f"cache: {entry.path} is neither a file, a directory nor a link; remove it")
    return files


def _mismatch(root: Path, recorded: Mapping[str, Record], digests: bool) -> str | None:
    """What differs between ``root`` and its manifest, in a few words, or None."""
    seen = 0
    for rel, entry in _walk(root):
        record = recorded.get(rel)
        problem = f"{rel} is not in its manifest" if record is None else _differs(rel, entry, record, digests)
        if problem is not None:
            return problem
        seen += 1
    if seen != len(recorded):
        missing = next(rel for rel in sorted(recorded) if not os.path.lexists(root / rel))
        return f"{missing} is missing"
    return None


def _link_differs(rel: str, entry: os.DirEntry, record: Record) -> str | None:
    if record[0] != "l" or os.readlink(entry.path) != record[1]:
        return f"{rel} is a link that its manifest does not have"
    if os.path.isabs(record[1]) and not os.path.exists(entry.path):
        return f"{rel} links to {record[1]}, which is gone"  # a venv's python whose interpreter went
    return None


def _differs(rel: str, entry: os.DirEntry, record: Record, digests: bool) -> str | None:
    if entry.is_symlink():
        return _link_differs(rel, entry, record)
    if entry.is_dir(follow_symlinks=False):
        return None if record[0] == "d" else f"{rel} is a directory that its manifest does not have"
    if record[0] != "f":
        return f"{rel} is a file that its manifest does not have"
    info = entry.stat(follow_symlinks=False)
    if (info.st_size, info.st_mtime_ns) != (record[1], record[2]):
        return f"{rel} changed (size {info.st_size}, manifest {record[1]})"
    if digests and file_digest(Path(entry.path)) != record[3]:
        return f"{rel}'s content differs from its manifest's digest"
    return None


@dataclass(frozen=True)
class Manifest:
    key: EntryKey
    made: float
    files: Mapping[str, Record]

    @property
    def size(self) -> int:
        return sum(record[1] for record in self.files.values() if record[0] == "f")

    def write(self, entry: Path) -> None:
        data = {
            "store": STORE_FORMAT,
            "kind": self.key.kind,
            "label": self.key.label,
            "inputs": self.key.inputs,
            "made": self.made,
            "files": self.files,
        }
        path = manifest_path(entry)
        path.parent.mkdir(exist_ok=True)
        atomic_file.write_text(path, json.dumps(data, sort_keys=True), durable=True)

    @classmethod
    def read(cls, entry: Path) -> Manifest | None:
        """The manifest of ``entry``, or None where it has none, or one this store cannot read."""
        try:
            data = json.loads(manifest_path(entry).read_bytes())
            if data["store"] != STORE_FORMAT:
                return None
            key = EntryKey(data["kind"], data["label"], data["inputs"])
            return cls(key, float(data["made"]), data["files"])
        except (OSError, ValueError, KeyError, TypeError):
            return None


# Entries whose digests this process has compared: (path, the manifest's inode and mtime).
_digests_checked: set[tuple[str, int]] = set()


def manifest_path(entry: Path) -> Path:
    return entry.parent / MANIFESTS / f"{entry.name}.json"


def _manifest_stamp(entry: Path) -> tuple[str, int]:
    """Which manifest: a new one is a new file (the one writer renames), touching it keeps the inode."""
    return (str(entry), manifest_path(entry).stat().st_ino)


def check(entry: Path, key: EntryKey | None = None, digests: bool | None = None) -> str | None:
    """Why ``entry`` may not be reused (a few words), or None. ``digests``: compare file contents too
    (default: on the first check in this process)."""
    if not entry.is_dir():
        return "absent"
    manifest = Manifest.read(entry)
    if manifest is None:
        return "has no readable manifest (a maker was stopped, or an older version of the tools made it)"
    if key is not None and manifest.key.name != key.name:
        return "has the manifest of another key"
    stamp = _manifest_stamp(entry)
    if digests is None:
        digests = stamp not in _digests_checked
    problem = _mismatch(entry, manifest.files, digests)
    if problem is None and digests:
        _digests_checked.add(stamp)
    return problem


def touch_last_use(entry: Path) -> None:
    with contextlib.suppress(OSError):
        os.utime(manifest_path(entry))


def last_use(entry: Path) -> float:
    """When the entry was last reused (its manifest's mtime), else when it was last changed."""
    for path in (manifest_path(entry), entry):
        with contextlib.suppress(OSError):
            return path.lstat().st_mtime
    return 0.0


# ---- locks -------------------------------------------------------------------------------------------


def _same_file(handle: IO[str], path: Path) -> bool:
    try:
        return os.fstat(handle.fileno()).st_ino == path.stat().st_ino
    except FileNotFoundError:
        return False


def _process_gone(pid: int) -> bool:
    """No such process, or only its zombie (killed, not yet reaped by its parent)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process: alive
        return False
    try:  # Linux: the state after the command's name in /proc/PID/stat
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False


@dataclass
class EntryLock:
    """The ``flock`` of one entry. Its file records the maker's pid and its children's process groups: a
    run that finds the lock held by children whose maker is gone kills them before it waits."""

    store: Path
    name: str
    say: Say = _quiet
    groups: list[int] = field(default_factory=list)
    _handle: IO[str] | None = None

    @property
    def path(self) -> Path:
        return self.store / LOCKS / self.name

    @property
    def fd(self) -> int:
        assert self._handle is not None
        return self._handle.fileno()

    def acquire(self, wait: bool = True) -> bool:
        """Takes the lock; without ``wait``, False at once when another run holds it."""
        said = False
        while True:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle = self.path.open("a+")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not wait:
                    handle.close()
                    return False
                self._stop_orphans(handle)
                if not said:
                    self.say(f"      waiting for another run that holds {self.path} ...")
                    said = True
                fcntl.flock(handle, fcntl.LOCK_EX)
            if _same_file(handle, self.path):
                break
            handle.close()  # pruned while we waited: the lock is the new file's
        self._handle = handle
        self._record()
        return True

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # its children's copies of the descriptor hold the lock until they end
            self._handle = None

    def add_group(self, pgid: int) -> None:
        self.groups.append(pgid)
        self._record()

    def _record(self) -> None:
        """Rewritten in place (never renamed: the lock is on this inode)."""
        assert self._handle is not None
        self._handle.seek(0)
        self._handle.truncate()
        self._handle.write("".join([f"maker {os.getpid()}\n", *(f"group {g}\n" for g in self.groups)]))
        self._handle.flush()

    def _stop_orphans(self, handle: IO[str]) -> None:
        handle.seek(0)
        words = [line.split() for line in handle.read().splitlines()]
        makers = [int(w[1]) for w in words if len(w) == 2 and w[0] == "maker" and w[1].isdigit()]
        groups = [int(w[1]) for w in words if len(w) == 2 and w[0] == "group" and w[1].isdigit()]
        if len(makers) != 1 or not groups or not _process_gone(makers[0]):
            return
        self.say(
            f"      the run that made {self.name} (pid {makers[0]}) is gone and left processes holding "
            f"its lock: stopping process group {', '.join(map(str, groups))}"
        )
        for group in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)


# ---- making ------------------------------------------------------------------------------------------


@dataclass
class Making:
    """What a maker gets: where to build (``staging``), where the entry will be (``final``: for what must
    name its own place, a venv's scripts), and :meth:`run` for its children."""

    staging: Path
    final: Path
    lock: EntryLock

    def run(self, command: Sequence[str], log: Path, env: Mapping[str, str] | None = None) -> None:
        """``command`` to its end, its output appended to ``log``, in a process group of its own that holds
        the entry's lock; a failure raises :class:`subprocess.CalledProcessError`."""
        status = child_process.run_child(
            [str(word) for word in command],
            self.staging.parent,  # the staging directory itself may not exist yet (uv venv makes it)
            os.environ if env is None else env,
            log=log,
            append_log=True,
            keep_fds=(self.lock.fd,),
            on_start=lambda process: self.lock.add_group(process.pid),
        )
        if status != 0:
            raise subprocess.CalledProcessError(status, list(command))


Maker = Callable[[Making], None]


def obtain(store: Path, key: EntryKey, make: Maker, say: Say = to_stderr, wait: bool = True) -> Path | None:
    """The entry of ``key`` in ``store``, reused when it matches its manifest, else made by ``make`` (under
    its lock, in a staging directory renamed into place). Without ``wait``, None when another run holds
    its lock (the caller may do another entry first)."""
    entry = store / key.name
    if check(entry, key) is None:
        touch_last_use(entry)
        return entry
    lock = EntryLock(store, key.name, say)
    if not lock.acquire(wait):
        return None
    try:
        problem = check(entry, key)
        if problem is None:  # made meanwhile by the run we waited for
            touch_last_use(entry)
            return entry
        if problem != "absent":
            say(f"      cache: {entry.name} {problem}: making it again")
            _discard(store, entry)
        _remove_staging(store, key.name)
        staging = store / STAGING / f"{key.name}@{os.getpid()}"
        staging.mkdir(parents=True)
        try:
            make(Making(staging, entry, lock))
            manifest = Manifest(key, time.time(), _take_manifest(staging))
            staging.rename(entry)
            _sync_directory(store)
            manifest.write(entry)  # last: the entry exists from here on
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        _digests_checked.add(_manifest_stamp(entry))
    finally:
        lock.release()
    evict(store, keep=entry.name, say=say)
    return entry


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _discard(store: Path, path: Path) -> None:
    """No entry any more (its manifest removed first), out of the way at once (a rename), then removed."""
    manifest_path(path).unlink(missing_ok=True)
    if not os.path.lexists(path):
        return
    trash = store / TRASH
    trash.mkdir(parents=True, exist_ok=True)
    target = trash / f"{path.name}@{os.getpid()}-{time.monotonic_ns()}"
    path.rename(target)
    shutil.rmtree(target, ignore_errors=True)


def _remove_staging(store: Path, name: str) -> None:
    """What killed makers of ``name`` left (the caller holds its lock), and removals a kill cut short."""
    for leftover in _leftovers(store, name):
        shutil.rmtree(leftover, ignore_errors=True)


def _leftovers(store: Path, name: str = "*") -> list[Path]:
    """Staging and trash directories (``<entry>@<pid>...``) of ``name``, or of every entry."""
    return sorted(path for place in (STAGING, TRASH) for path in (store / place).glob(f"{name}@*"))


def remove_leftovers(store: Path) -> list[Path]:
    """Every staging or trash directory whose entry no run is making now (a stopped maker's leftovers)."""
    removed = []
    for leftover in _leftovers(store):
        lock = EntryLock(store, leftover.name.split("@")[0])
        if lock.acquire(wait=False):
            try:
                shutil.rmtree(leftover, ignore_errors=True)
                removed.append(leftover)
            finally:
                lock.release()
    return removed


def leftovers(store: Path) -> list[Path]:
    return _leftovers(store)


# ---- listing and pruning -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Listed:
    """One directory of a store: an entry (with its manifest) or what older tools left (``manifest`` None)."""

    path: Path
    manifest: Manifest | None
    last_use: float

    @property
    def size(self) -> int:
        if self.manifest is not None:
            return self.manifest.size
        return sum(p.lstat().st_size for p in self.path.rglob("*") if not p.is_dir() or p.is_symlink())


def stores(root: Path) -> list[Path]:
    """The store directories below ``root`` (those with a ``.locks`` directory), ``root`` included."""
    found = []
    pending = [root]
    for _depth in range(4):
        below = []
        for directory in pending:
            if (directory / LOCKS).is_dir():
                found.append(directory)
            with contextlib.suppress(OSError):
                below += [
                    child
                    for child in directory.iterdir()
                    if child.is_dir() and not child.is_symlink() and child.name not in INTERNAL
                    and not manifest_path(child).exists()
                ]  # fmt: skip
        pending = below
    return sorted(found)


def listing(store: Path) -> list[Listed]:
    """Every entry of ``store`` and whatever older tools left in it, the least recently used first."""
    found = []
    with contextlib.suppress(FileNotFoundError):
        for child in store.iterdir():
            if child.name in INTERNAL or (child.name.startswith(".") and child.name.endswith(".lock")):
                continue
            if (child / LOCKS).is_dir():
                continue  # a store of its own (the local channel's, below the rehearsal's)
            found.append(Listed(child, Manifest.read(child), last_use(child)))
    return sorted(found, key=lambda item: item.last_use)


def remove_entry(store: Path, path: Path, wait: bool = True) -> bool:
    """Removes one directory (an entry, or what older tools left) of ``store`` under its lock; without
    ``wait``, False when another run holds the lock."""
    lock = EntryLock(store, path.name)
    if not lock.acquire(wait):
        return False
    try:
        if path.is_dir() and not path.is_symlink():
            _discard(store, path)
        else:
            path.unlink(missing_ok=True)
        _remove_staging(store, path.name)
        with contextlib.suppress(OSError):
            lock.path.unlink()  # a run waiting on this inode takes the new file's lock (EntryLock.acquire)
    finally:
        lock.release()
    return True


def max_bytes(environ: Mapping[str, str] | None = None) -> int:
    environ = os.environ if environ is None else environ
    given = environ.get(MAX_BYTES_ENV)
    if not given:
        return MAX_BYTES
    try:
        return int(float(given) * 1024**3)
    except ValueError:
        raise ToolError(
            f"${MAX_BYTES_ENV} is {given!r}, not a number of GiB: set it to e.g. 6, or unset it"
        ) from None


def evict(store: Path, keep: str = "", say: Say = _quiet, now: float | None = None) -> list[Path]:
    """Removes the entries of ``store`` unused for :data:`MAX_AGE_DAYS`, then the least recently used while
    the store is over :func:`max_bytes`; never ``keep``, one used in the last :data:`KEEP_RECENT_SECONDS`,
    or one whose lock another run holds."""
    now = time.time() if now is None else now
    items = listing(store)
    total = sum(item.size for item in items)
    limit = max_bytes()
    items = [item for item in items if item.path.name != keep]
    removed = []
    for item in items:  # least recently used first
        idle = now - item.last_use
        if idle < KEEP_RECENT_SECONDS:
            break
        if idle < MAX_AGE_DAYS * 86400 and total <= limit:
            continue
        if remove_entry(store, item.path, wait=False):
            total -= item.size
            removed.append(item.path)
            say(f"      cache: removed {item.path.name} (unused for {idle / 86400:.0f} days)")
    return removed
