"""Read-only access to an upstream source tree given as a directory or as a release tarball.

The PyTorch release tarball (``pytorch-v2.13.0.tar.gz``) holds one top-level directory with the
submodules inside; the dependency table reads a handful of small files from it, so the tarball is
indexed once and members are read on demand instead of unpacking gigabytes.
"""

from __future__ import annotations

import fnmatch
import tarfile
from pathlib import Path, PurePosixPath
from typing import Protocol


class SourceTree(Protocol):
    """What the dependency table needs from an upstream tree: read a file, list files by pattern."""

    label: str

    def read_text(self, relative: str) -> str | None: ...

    def glob(self, pattern: str) -> list[str]: ...


class DirectoryTree:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.label = str(root)

    def read_text(self, relative: str) -> str | None:
        path = self.root / relative
        if not path.is_file():
            return None
        return path.read_text(encoding="utf-8", errors="replace")

    def glob(self, pattern: str) -> list[str]:
        return sorted(str(path.relative_to(self.root)) for path in self.root.glob(pattern) if path.is_file())


class TarballTree:
    def __init__(self, archive: Path) -> None:
        self.archive = archive
        self.label = str(archive)
        with tarfile.open(archive) as tar:
            members = [member for member in tar.getmembers() if member.isfile()]
        prefix = _common_top_directory([member.name for member in members])
        self._members = {member.name[len(prefix) :]: member.name for member in members}

    def read_text(self, relative: str) -> str | None:
        name = self._members.get(relative)
        if name is None:
            return None
        with tarfile.open(self.archive) as tar:
            handle = tar.extractfile(name)
            return None if handle is None else handle.read().decode("utf-8", errors="replace")

    def glob(self, pattern: str) -> list[str]:
        return sorted(
            name
            for name in self._members
            if fnmatch.fnmatch(name, pattern) or PurePosixPath(name).match(pattern)
        )


def _common_top_directory(names: list[str]) -> str:
    """``"pytorch-v2.13.0/"`` when every member lives under that one directory, else ``""``."""
    tops = {name.split("/", 1)[0] for name in names if "/" in name}
    if len(tops) == 1 and all("/" in name for name in names):
        return f"{tops.pop()}/"
    return ""


def open_tree(path: Path) -> SourceTree:
    """A directory or a tar archive as a :class:`SourceTree`; ``ValueError`` if it is neither."""
    if path.is_dir():
        return DirectoryTree(path)
    if path.is_file() and tarfile.is_tarfile(path):
        return TarballTree(path)
    if not path.exists():
        raise ValueError(f"{path} does not exist")
    raise ValueError(f"{path} is neither a directory nor a tar archive")
