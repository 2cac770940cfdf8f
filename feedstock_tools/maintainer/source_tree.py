"""Read-only access to an upstream source tree given as a directory or as a release tarball.

The PyTorch release tarball (``pytorch-v2.13.0.tar.gz``) holds one top-level directory with the
submodules inside; the dependency table reads a handful of small files from it, so the tarball is
indexed once and members are read on demand instead of unpacking gigabytes.
"""

from __future__ import annotations

import fnmatch
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Protocol


class CorruptArchive(ValueError):
    """A tarball that cannot be read to its end."""


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
    """A release tarball, read in one streaming pass: names of every file, contents of the wanted ones.

    A gzip stream cannot seek backwards cheaply, so the files the caller may read (``wanted``, matched on
    the path below the top-level directory) are kept in memory during the single pass.
    """

    def __init__(self, archive: Path, wanted: Callable[[str], bool] = lambda name: True) -> None:
        self.archive = archive
        self.label = str(archive)
        names: list[str] = []
        contents: dict[str, bytes] = {}
        try:
            with tarfile.open(archive, mode="r|*") as tar:
                for member in tar:
                    if not member.isfile():
                        continue
                    names.append(member.name)
                    top, _, below = member.name.partition("/")
                    if wanted(below or top) or wanted(member.name):
                        handle = tar.extractfile(member)
                        if handle is not None:
                            contents[member.name] = handle.read()
        except (tarfile.TarError, EOFError, zlib.error) as exc:  # cut short, or not what it claims to be
            raise CorruptArchive(
                f"{archive} is truncated or corrupt ({exc}): download it again and check its sha256"
            ) from None
        prefix = _common_top_directory(names)
        self._names = sorted(name[len(prefix) :] for name in names)
        self._contents = {name[len(prefix) :]: data for name, data in contents.items()}

    def read_text(self, relative: str) -> str | None:
        data = self._contents.get(relative)
        return None if data is None else data.decode("utf-8", errors="replace")

    def glob(self, pattern: str) -> list[str]:
        return [
            name
            for name in self._names
            if fnmatch.fnmatch(name, pattern) or PurePosixPath(name).match(pattern)
        ]


def _common_top_directory(names: list[str]) -> str:
    """``"pytorch-v2.13.0/"`` when every member lives under that one directory, else ``""``."""
    tops = {name.split("/", 1)[0] for name in names if "/" in name}
    if len(tops) == 1 and all("/" in name for name in names):
        return f"{tops.pop()}/"
    return ""


def open_tree(path: Path, wanted: Callable[[str], bool] = lambda name: True) -> SourceTree:
    """A directory or a tar archive as a :class:`SourceTree`; ``ValueError`` if it is neither.

    ``wanted`` names the files a tarball's contents are kept for (a directory is read on demand).
    """
    if path.is_dir():
        return DirectoryTree(path)
    if path.is_file() and _looks_like_tarball(path):
        return TarballTree(path, wanted)
    if not path.exists():
        raise ValueError(f"{path} does not exist")
    raise ValueError(f"{path} is neither a directory nor a tar archive")


def _looks_like_tarball(path: Path) -> bool:
    """``tarfile.is_tarfile``, except that a compressed stream cut before its first member is a corrupt
    tarball (is_tarfile lets gzip's EOFError through)."""
    try:
        return tarfile.is_tarfile(path)
    except (EOFError, zlib.error) as exc:
        raise CorruptArchive(
            f"{path} is truncated or corrupt ({exc}): download it again and check its sha256"
        ) from None
