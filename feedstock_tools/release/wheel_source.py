"""Where the bump reads a release's wheels from: a real ``.whl``, or the small fixture set cut from one.

A :class:`WheelSource` answers the four questions the bump asks of one platform's wheel: its file list, the
needs of its binaries (lief), the text of a member (METADATA, ``torch/version.py``, a CMake file, a header),
and its name. :class:`ZipWheel` reads a real wheel; :class:`FixtureWheel` reads the fixture set
:func:`cut_fixtures` writes from one (``tests/data``), so CI runs the same bump on a few kB:

* ``<stem>-wheel-files.txt.gz``: every member (``wheel-layout --file-list``; its first line names the wheel);
* ``<stem>-wheel-needs.txt.gz``: every binary's needs (``wheel-layout --needs-list``);
* ``<stem>-wheel-texts.json.gz``: the lines of the members the bump reads, by path: whole small files
  (``WHEEL``, ``torch/version.py``), the lines that carry a version, and around each patch hunk the lines
  it applies to in the release (or the lines it expects there, where it conflicts).

The bump fetches nothing: :func:`find_wheels` looks in the directories it is given (``--wheels``, else
pip's cache directory) and names the ``pip download`` line of each wheel it misses.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from feedstock_tools.common.errors import ToolError
from feedstock_tools.maintainer.patch_hunks import FileText
from feedstock_tools.proofs.wheels import linkage
from feedstock_tools.proofs.wheels.wheel_layout import (
    ListedFile,
    read_file_list,
    wheel_files,
    write_file_list,
)
from megabuild import atomic_file

# The Python of the wheels the bump reads: one is enough (the C++ side is the same for every CPython), and
# 3.12 is in every supported range so far. The fixtures in tests/data are cp312 wheels.
PYTHON_TAG = "cp312"
PYTHON_VERSION = "3.12"


@dataclass(frozen=True)
class Target:
    """One platform's PyPI wheel: its platform tag and the conda subdir whose configurations it stands for."""

    platform_tag: str
    subdir: str

    def wheel_name(self, version: str) -> str:
        return f"torch-{version}-{PYTHON_TAG}-{PYTHON_TAG}-{self.platform_tag}.whl"

    def pip_download(self, version: str) -> str:
        return (
            f"pip download torch=={version} --no-deps --only-binary=:all: --python-version {PYTHON_VERSION} "
            f"--platform {self.platform_tag} -d DIR"
        )


# The platforms PyPI has wheels of and this feedstock builds (osx-64: none on PyPI since 2.3).
TARGETS: tuple[Target, ...] = (
    Target("manylinux_2_28_x86_64", "linux-64"),
    Target("manylinux_2_28_aarch64", "linux-aarch64"),
    Target("macosx_14_0_arm64", "osx-arm64"),
    Target("win_amd64", "win-64"),
)

FILES_SUFFIX = "-wheel-files.txt.gz"
NEEDS_SUFFIX = "-wheel-needs.txt.gz"
TEXTS_SUFFIX = "-wheel-texts.json.gz"
# write_file_list's first line: "# Every file of NAME.whl, sha256 HEX: ..."
_FILE_LIST_HEAD = re.compile(r"^# Every file of (?P<name>\S+\.whl), sha256 (?P<sha256>[0-9a-f]{64})")


# file lists read once per process (a wheel's zip directory, a fixture's gzip): the bump asks several times
_FILES: dict[Path, list[ListedFile]] = {}


class WheelSource(Protocol):
    """One platform's wheel of a release, as the bump reads it."""

    name: str  # the wheel's file name

    def files(self) -> list[ListedFile]: ...

    def needs(self) -> dict[str, linkage.BinaryNeeds]: ...

    def text(self, member: str) -> str | None:
        """The member's text (a fixture set: its known lines), None when the source does not have it."""
        ...

    def file_text(self, member: str) -> FileText | None:
        """The member's lines by number, for the patch judge; None when the source does not have it."""
        ...


@dataclass
class ZipWheel:
    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    def _open(self) -> zipfile.ZipFile:
        try:
            return zipfile.ZipFile(self.path)
        except (zipfile.BadZipFile, OSError) as exc:
            raise ToolError(f"{self.path} is not a readable wheel ({exc}): download it again") from None

    def files(self) -> list[ListedFile]:
        if self.path not in _FILES:
            self._open().close()
            _FILES[self.path] = wheel_files(self.path)
        return _FILES[self.path]

    def needs(self) -> dict[str, linkage.BinaryNeeds]:
        return dict(linkage.wheel_needs(self.path))

    def text(self, member: str) -> str | None:
        with self._open() as archive:
            try:
                return archive.read(member).decode("utf-8", errors="replace")
            except KeyError:
                return None

    def file_text(self, member: str) -> FileText | None:
        text = self.text(member)
        return FileText.of_text(text) if text is not None else None


@dataclass
class FixtureWheel:
    """The fixture set of one wheel (``<stem>-wheel-{files,needs,texts}...``), named by its file list."""

    files_path: Path
    name: str

    def _sibling(self, suffix: str) -> Path:
        return self.files_path.with_name(self.files_path.name.removesuffix(FILES_SUFFIX) + suffix)

    def files(self) -> list[ListedFile]:
        if self.files_path not in _FILES:
            _FILES[self.files_path] = read_file_list(self.files_path)
        return _FILES[self.files_path]

    def needs(self) -> dict[str, linkage.BinaryNeeds]:
        path = self._sibling(NEEDS_SUFFIX)
        if not path.is_file():
            raise ToolError(f"{path} is missing: the fixture set of {self.name} needs its needs list")
        return linkage.read_needs_list(path)

    def file_text(self, member: str) -> FileText | None:
        path = self._sibling(TEXTS_SUFFIX)
        if not path.is_file():
            return None
        excerpt = json.loads(gzip.decompress(path.read_bytes()))["texts"].get(member)
        if excerpt is None:
            return None
        segments = [(int(first), lines) for first, lines in excerpt["segments"]]
        return FileText(FileText.of_segments(segments).lines, whole=excerpt["whole"])

    def text(self, member: str) -> str | None:
        known = self.file_text(member)
        return "\n".join(known.lines[n] for n in sorted(known.lines)) if known is not None else None


def fixture_wheel_name(files_path: Path) -> str | None:
    """The wheel a file list fixture was cut from (its first line), None for another file."""
    try:
        with gzip.open(files_path, "rt") as handle:
            match = _FILE_LIST_HEAD.match(handle.readline())
    except (OSError, EOFError, UnicodeDecodeError):
        return None
    return match["name"] if match else None


def pip_cache_dir() -> Path | None:
    """pip's cache directory (``pip cache dir``), None where pip has none."""
    result = subprocess.run(
        [sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True, check=False
    )
    path = Path(result.stdout.strip()) if result.returncode == 0 and result.stdout.strip() else None
    return path if path and path.is_dir() else None


def find_wheel(directories: Iterable[Path], version: str, target: Target) -> WheelSource | None:
    """The wheel of ``target`` for ``version`` in ``directories`` (searched below, too): the real wheel
    first, else its fixture set."""
    wanted = target.wheel_name(version)
    fixtures: list[Path] = []
    for directory in directories:
        for path in sorted(directory.rglob(wanted)):
            return ZipWheel(path)
        fixtures += [
            p for p in sorted(directory.rglob(f"*{FILES_SUFFIX}")) if fixture_wheel_name(p) == wanted
        ]
    return FixtureWheel(fixtures[0], wanted) if fixtures else None


def find_wheels(directories: list[Path], version: str) -> dict[str, WheelSource]:
    """Every target's wheel of ``version`` by subdir; a missing one is an error naming how to get it."""
    found: dict[str, WheelSource] = {}
    missing: list[str] = []
    for target in TARGETS:
        source = find_wheel(directories, version, target)
        if source is None:
            missing.append(target.pip_download(version))
        else:
            found[target.subdir] = source
    if missing:
        where = ", ".join(str(d) for d in directories) or "no directory (pip has no cache directory)"
        raise ToolError(
            f"{len(missing)} wheel(s) of torch {version} not in {where}: get them with "
            + "; ".join(missing)
            + ", then pass --wheels DIR"
        )
    return found


def excerpt(text: FileText, keep: Iterable[int] | None) -> dict[str, object]:
    """What a fixture keeps of a member: every line (``keep`` None) or the numbered lines ``keep``."""
    numbers = sorted(text.lines) if keep is None else sorted(set(keep) & set(text.lines))
    segments: list[list[object]] = []
    for number in numbers:
        if segments and number == segments[-1][0] + len(segments[-1][1]):  # type: ignore[arg-type]
            segments[-1][1].append(text.lines[number])  # type: ignore[union-attr]
        else:
            segments.append([number, [text.lines[number]]])
    return {"whole": keep is None and text.whole, "segments": segments}


def cut_fixtures(
    wheel: Path, directory: Path, keep: Mapping[str, Iterable[int] | None], provenance: str
) -> list[Path]:
    """Write the fixture set of ``wheel`` into ``directory``: file list, needs list and, of each member
    in ``keep`` the wheel has, the lines named there (None: all). The stem is the wheel's name."""
    stem = directory / wheel.name.removesuffix(".whl")
    files_path = stem.with_name(stem.name + FILES_SUFFIX)
    needs_path = stem.with_name(stem.name + NEEDS_SUFFIX)
    texts_path = stem.with_name(stem.name + TEXTS_SUFFIX)
    write_file_list(wheel, files_path, provenance)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    header = f"The binaries of {wheel.name}, sha256 {digest}. {provenance}".strip()
    linkage.write_needs_list(linkage.wheel_needs(wheel), needs_path, header)
    source = ZipWheel(wheel)
    texts = {}
    for member, lines in sorted(keep.items()):
        text = source.file_text(member)
        if text is not None:
            texts[member] = excerpt(text, lines)
    document = {
        "about": f"Lines of members of {wheel.name} (sha256 {digest}), by line number. {provenance}".strip(),
        "written_by": "python -m feedstock_tools bump VERSION --cut-fixtures DIR --wheels WHEELS",
        "texts": texts,
    }
    atomic_file.write_bytes(
        texts_path, gzip.compress(json.dumps(document, indent=0, sort_keys=True).encode(), mtime=0)
    )
    return [files_path, needs_path, texts_path]
