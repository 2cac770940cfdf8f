"""The upstream text the project holds for judging its patches, per release, in ``tests/patch_fixtures/``:

* ``pytorch-<version>-preimage.txt``: the verified pre-image a person keeps (the text the patches were made
  and checked against: conda-forge's patches' context, the release wheel's files);
* ``pytorch-<version>-from-wheels.txt``: what ``bump`` read of the release from its wheels (the files they
  carry verbatim, around each hunk), so ``check`` judges a bumped recipe's patches as the bump did.

The pre-image wins where both exist. Format (each file's own header says it too): ``@@ <path> <first line>
<source>`` segments of verbatim upstream lines at their line numbers; ``@@ <path> whole <wheel member> (blob
X)`` names a file a release wheel ships whole, which needs the wheel and is therefore not read here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.maintainer.patch_hunks import FileText

FIXTURES = REPO_ROOT / "tests" / "patch_fixtures"
_SEGMENT = re.compile(r"^@@ (\S+) (\d+) \S")
_WHOLE = re.compile(r"^@@ (\S+) whole (\S+) \(blob ([0-9a-f]+)\)$")


def preimage_fixture(version: str, fixtures: Path = FIXTURES) -> Path:
    """Where the pre-image lines of upstream ``version`` are kept (the file may not exist)."""
    return fixtures / f"pytorch-{version}-preimage.txt"


def wheels_fixture(version: str, fixtures: Path = FIXTURES) -> Path:
    """Where ``bump`` writes what it read of ``version`` from the release's wheels (may not exist)."""
    return fixtures / f"pytorch-{version}-from-wheels.txt"


def evidence_fixture(version: str, fixtures: Path = FIXTURES) -> Path:
    """The evidence ``check`` reads for ``version``: the pre-image where there is one, else what the bump
    read from the release's wheels (when neither exists: the pre-image's name, for the message)."""
    preimage = preimage_fixture(version, fixtures)
    wheels = wheels_fixture(version, fixtures)
    return wheels if not preimage.is_file() and wheels.is_file() else preimage


@dataclass(frozen=True)
class Blob:
    """The git blob id an evidence file names for a path (abbreviated as git's ``index`` lines are)."""

    blob: str
    whole: bool  # the file is named whole (a wheel ships it byte for byte), not only cut into segments


_BLOB = re.compile(r"^@@ (\S+) .*\(blob ([0-9a-f]+)\)$", re.MULTILINE)


def blob_ids(text: str) -> dict[str, Blob]:
    """path -> the blob id the evidence's ``@@`` lines name for it (a whole file's, else a segment's)."""
    found: dict[str, Blob] = {}
    for match in _BLOB.finditer(text):
        whole = _WHOLE.match(match[0]) is not None
        if whole or match[1] not in found:
            found[match[1]] = Blob(match[2], whole)
    return found


def read_segments(fixture: Path) -> dict[str, FileText]:
    """The fixture's segments, path -> the known lines (several segments of one path merged)."""
    try:
        text = fixture.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolError(f"{fixture}: cannot read the patch evidence ({exc}); restore it from git") from exc
    return parse_segments(text, fixture)


def parse_segments(text: str, fixture: Path) -> dict[str, FileText]:
    """The segments of an evidence file's ``text`` (``fixture`` names it in errors)."""
    segments: dict[str, list[tuple[int, list[str]]]] = {}
    current: list[str] | None = None
    for number, line in enumerate(text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"), 1):
        if line.startswith("@@"):
            segment = _SEGMENT.match(line)
            if _WHOLE.match(line):
                current = None
            elif segment:
                current = []
                segments.setdefault(segment[1], []).append((int(segment[2]), current))
            else:
                raise ToolError(
                    f"{fixture}:{number}: {line!r} is neither '@@ <path> <line> <source>' nor "
                    "'@@ <path> whole <member> (blob <id>)'; fix the line (format in the file's header)"
                )
        elif current is not None:
            current.append(line)
        elif line and not line.startswith("#"):
            raise ToolError(f"{fixture}:{number}: a line outside any '@@' segment; start a segment above it")
    return {path: FileText.of_segments(parts) for path, parts in segments.items()}
