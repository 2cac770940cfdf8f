"""A snapshot of the files a command is about to rewrite, kept on disk until it has finished: the bump's.

The bump rewrites the recipe, the CI files and the v1 recipe in stages (feedstock_tools/release/bump.py,
all or nothing: feedstock_tools/release/transaction.py). An exception puts every file back from the
snapshot in memory; a SIGKILL, an OOM kill or a power loss cannot, so before its first write the bump also
writes the snapshot to this journal, and any later ``bump`` or ``check`` of the tree finds it and puts the
tree back (:func:`recover`).

Where: ``<git directory>/pytorch-feedstock/bump-journal/``: the repository's own git directory (``.git``),
or, where ``.git`` is a file (a worktree, a submodule), the directory its ``gitdir:`` line names, which is
that worktree's own: not in the work tree, so no ``git status``, ``check`` or copy of the feedstock ever
sees it, and never shared by two worktrees. A tree without git keeps it in ``.bump-journal/`` at its root.

What: ``snapshot.zip``, every file below the command's names with its permission bits, the directories
there were and the names that did not exist, written whole or not at all (the one writer: a temporary file
synced, renamed into place, the directory synced). A killed writer of the journal leaves only its
temporary file, with nothing of the tree written yet: the next run removes it. ``finished`` is written once
the command has done all it does, then the journal is removed: a journal with ``finished`` is dropped, the
tree left as the command made it. The journal is kept while a restore could not put everything back.

Each run holds the journal's lock (``journal.lock``, an flock the kernel drops with the process) from before
it writes the journal until it has removed it; :func:`recover` takes it too, so it never touches the tree of
a run still going. Standard library only.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from feedstock_tools.common import path_safety
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.run_lock import RunLock
from megabuild import atomic_file

FORMAT = 1
SNAPSHOT = "snapshot.zip"
FINISHED = "finished"
LOCK = "journal.lock"
MANIFEST = "manifest.json"  # inside the zip, beside files/<relative path>


# ---- the snapshot --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """The files below ``names`` of ``root`` (content and permission bits), its directories, and the names
    (and their directories) that did not exist, deepest first."""

    root: Path
    names: tuple[str, ...]
    files: dict[Path, tuple[bytes, int]]
    dirs: frozenset[Path]
    absent: tuple[Path, ...]

    @classmethod
    def take(cls, root: Path, names: Sequence[str]) -> Snapshot:
        files: dict[Path, tuple[bytes, int]] = {}
        dirs: set[Path] = set()
        for path in _walk(root, names):
            if path.is_dir():
                dirs.add(path)
            elif path.is_file():
                files[path] = (path.read_bytes(), path.stat().st_mode & 0o7777)
        absent: set[Path] = set()
        for name in names:
            path = root / name
            while path != root and not path.exists():
                absent.add(path)
                path = path.parent
        deepest_first = tuple(sorted(absent, key=lambda p: len(p.parts), reverse=True))
        return cls(root, tuple(names), files, frozenset(dirs), deepest_first)

    def restore(self) -> list[str]:
        """Put every file back as it was and remove what was not there, going on past a step that fails;
        returns what could not be put back (``path (reason)``), empty when all was."""
        failed: list[str] = []

        def attempt(path: Path, step: Callable[[], object]) -> None:
            try:
                step()
            except OSError as exc:
                failed.append(f"{self._relative(path)} ({exc.strerror or exc})")

        for path in self.absent:
            if path.is_dir() and not path.is_symlink():
                attempt(path, lambda path=path: shutil.rmtree(path))
            elif path.exists() or path.is_symlink():
                attempt(path, path.unlink)
        try:
            present = sorted(_walk(self.root, self.names), reverse=True)
        except OSError as exc:
            present = []
            failed.append(f"{self.root} ({exc.strerror or exc})")
        for path in present:
            if path.is_dir() and not path.is_symlink():
                if path not in self.dirs and not any(path.iterdir()):
                    attempt(path, path.rmdir)
            elif path not in self.files:
                attempt(path, path.unlink)
        for path, (data, mode) in self.files.items():
            attempt(path, lambda path=path, data=data, mode=mode: _put_back(path, data, mode))
        return failed

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() if path.is_relative_to(self.root) else str(path)

    def write_zip(self, handle: BinaryIO, what: str) -> None:
        """The snapshot as a zip (``handle``: a binary stream), ``what`` naming the run it is for."""
        manifest = {
            "format": FORMAT,
            "what": what,
            "pid": os.getpid(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "names": list(self.names),
            "files": {self._relative(path): mode for path, (_, mode) in self.files.items()},
            "dirs": sorted(self._relative(path) for path in self.dirs),
            "absent": [self._relative(path) for path in self.absent],
        }
        with zipfile.ZipFile(handle, "w", zipfile.ZIP_DEFLATED) as archive:
            for path, (data, _) in self.files.items():
                archive.writestr(f"files/{self._relative(path)}", data)
            archive.writestr(MANIFEST, json.dumps(manifest, indent=1))

    @classmethod
    def read_zip(cls, root: Path, path: Path) -> tuple[Snapshot, dict]:
        """The snapshot a journal holds, and its manifest."""
        with zipfile.ZipFile(path) as archive:
            manifest = json.loads(archive.read(MANIFEST))
            if manifest.get("format") != FORMAT:
                raise ValueError(f"format {manifest.get('format')!r}, this code reads {FORMAT}")

            def at(relative: str) -> Path:
                return path_safety.inside(root, relative, f"{path}: path")

            files = {
                at(name): (archive.read(f"files/{name}"), int(mode))
                for name, mode in manifest["files"].items()
            }
        snapshot = cls(
            root,
            tuple(manifest["names"]),
            files,
            frozenset(at(name) for name in manifest["dirs"]),
            tuple(at(name) for name in manifest["absent"]),
        )
        return snapshot, manifest


def _put_back(path: Path, data: bytes, mode: int) -> None:
    if not path.is_file() or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_file.write_bytes(path, data)
    if path.stat().st_mode & 0o7777 != mode:
        path.chmod(mode)


def _walk(root: Path, names: Sequence[str]) -> list[Path]:
    """The files and directories below ``names`` (Python's caches left out: importing writes them)."""
    found = []
    for name in names:
        path = root / name
        if path.is_dir():
            found += [p for p in path.rglob("*") if "__pycache__" not in p.parts]
        elif path.exists():
            found.append(path)
    return found


# ---- the journal ---------------------------------------------------------------------------------------


def journal_dir(root: Path) -> Path:
    """Where the journal of the tree at ``root`` is kept (see the module's docstring)."""
    git = root / ".git"
    if git.is_dir():
        return git / "pytorch-feedstock" / "bump-journal"
    if git.is_file():
        try:
            first = git.read_text(encoding="utf-8").splitlines()[0]
        except (OSError, UnicodeDecodeError, IndexError):
            first = ""
        if first.startswith("gitdir:"):
            gitdir = (root / first.removeprefix("gitdir:").strip()).resolve()
            if gitdir.is_dir():
                return gitdir / "pytorch-feedstock" / "bump-journal"
    return root / ".bump-journal"


class Journal:
    """The journal of one tree: :meth:`begin` before the first write, :meth:`finish` after the last,
    :meth:`drop` after an exception's restore put everything back."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dir = journal_dir(root)
        self.snapshot = self.dir / SNAPSHOT
        self.finished = self.dir / FINISHED
        self.lock = RunLock(self.dir / LOCK, f"the bump journal of {root}")

    def begin(self, snapshot: Snapshot, what: str) -> None:
        """Hold the lock, then write ``snapshot`` durably: a journal there already (a run killed, not yet
        recovered) is a one-line error, the tree untouched."""
        self.lock.acquire()
        try:
            # the journal's directory, made with the lock, is on disk before the journal counts on it
            atomic_file.sync_directory(self.dir.parent)
            self._remove_incomplete()
            if self.snapshot.exists():
                raise ToolError(
                    f"{self.snapshot}: the journal of an earlier run that was stopped is still there: run "
                    "check (or the bump) once to put the tree back from it"
                )
            with atomic_file.replacing(self.snapshot, durable=True) as handle:
                snapshot.write_zip(handle, what)
        except BaseException:
            self.lock.release()
            raise

    def finish(self) -> None:
        """The run did all it does: recorded, then the journal is removed."""
        atomic_file.write_text(self.finished, "the run finished; the tree is as it left it\n", durable=True)
        self.drop()

    def drop(self) -> None:
        """Remove the journal (the snapshot first: a ``finished`` alone means nothing) and release it."""
        try:
            self.snapshot.unlink(missing_ok=True)
            self.finished.unlink(missing_ok=True)
        finally:
            self.lock.release()

    def keep(self) -> None:
        """Leave the journal for a later run, and release it."""
        self.lock.release()

    def _remove_incomplete(self) -> None:
        """A journal whose writer was killed while writing it: only its temporary file, the tree untouched
        (the lock is held: nobody is writing it now)."""
        for name in (SNAPSHOT, FINISHED):
            for partial in self.dir.glob(f".{name}.*.tmp"):
                partial.unlink(missing_ok=True)


def recover(root: Path) -> str | None:
    """Put the tree at ``root`` back from the journal a stopped run left, or drop a finished run's: the one
    line that says which, None when there was none. A restore that cannot put everything back is a
    one-line ToolError listing what, the journal kept for the next try; a run still going holds the lock
    (a one-line ToolError naming its pid)."""
    journal = Journal(root)
    if not journal.dir.is_dir():
        return None
    journal.lock.acquire()
    try:
        journal._remove_incomplete()
        if not journal.snapshot.exists():
            journal.finished.unlink(missing_ok=True)
            return None
        if journal.finished.exists():
            journal.snapshot.unlink()
            journal.finished.unlink()
            return (
                f"{root}: a run had finished its writes when it was stopped; its journal ({journal.dir}) is "
                "dropped and the tree kept as it left it"
            )
        try:
            snapshot, manifest = Snapshot.read_zip(root, journal.snapshot)
        except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
            raise ToolError(
                f"{journal.snapshot}: the journal of a stopped run cannot be read ({exc}): the tree may be "
                "half-written; put it back with git (git status, git checkout, git clean) and delete the "
                "journal"
            ) from exc
        what = f"{manifest['what']} (pid {manifest['pid']}, started {manifest['started']})"
        failed = snapshot.restore()
        if failed:
            raise ToolError(
                f"{what} was stopped; putting {root} back from its journal, {len(failed)} could not be "
                f"put back: {', '.join(failed)}; the journal {journal.snapshot} is kept: fix that and run "
                "check or the bump again"
            )
        journal.snapshot.unlink()
        return (
            f"{what} was stopped after it began writing: {root} is put back as it was before it "
            f"({len(snapshot.files)} files, from its journal); run it again"
        )
    finally:
        journal.lock.release()
