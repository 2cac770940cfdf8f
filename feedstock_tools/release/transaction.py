"""All or nothing: every file a bump may write is kept before its first write and put back on any failure.

Every write goes through the build driver's one atomic writer (``recipe/megabuild/atomic_file.py``: a unique
temporary file beside the target, renamed over it, removed on error), so a failure never leaves a file
half-written; :func:`all_or_nothing` then restores the bytes and modes of every file that was there and
removes every file and directory the failed bump added, tracked or not.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from feedstock_tools.common.recipe_imports import import_megabuild

_atomic_file = import_megabuild("atomic_file")

# Directories (whole) and files, relative to the feedstock root, that the bump or render-ci may write or
# chmod: the recipe's two files, the v1 recipe, the release's patch evidence, render-ci's files and modes,
# and the anchor-parity document.
WRITTEN: tuple[str, ...] = (
    "recipe/meta.yaml",
    "recipe/conda_build_config.yaml",
    "recipe-v1",
    "tests/patch_fixtures",
    ".ci_support",
    ".github",
    "templates",
    ".scripts",
    "build-locally.py",
    "docs/reference/anchor-parity.md",
)


@dataclass(frozen=True)
class Snapshot:
    root: Path
    names: tuple[str, ...]
    files: dict[Path, tuple[bytes, int]]  # content and permission bits
    dirs: frozenset[Path]
    absent: tuple[Path, ...]  # names (and their directories) that did not exist, deepest first

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

    def restore(self) -> None:
        """Put every file back as it was; remove what was not there."""
        for path in self.absent:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
        for path in sorted(_walk(self.root, self.names), reverse=True):
            if path.is_dir() and not path.is_symlink():
                if path not in self.dirs and not any(path.iterdir()):
                    path.rmdir()
            elif path not in self.files:
                path.unlink()
        for path, (data, mode) in self.files.items():
            if not path.is_file() or path.read_bytes() != data:
                path.parent.mkdir(parents=True, exist_ok=True)
                _atomic_file.write_bytes(path, data)
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


@contextmanager
def all_or_nothing(root: Path, names: Sequence[str] = WRITTEN) -> Iterator[None]:
    """Within the block, any exception (a failed write, render or row, an interruption) restores every
    file below ``names`` before it propagates."""
    snapshot = Snapshot.take(root, names)
    try:
        yield
    except BaseException:
        snapshot.restore()
        raise
