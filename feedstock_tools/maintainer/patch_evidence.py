"""The upstream text the project holds for judging its patches: ``tests/patch_fixtures/pytorch-<version>-
preimage.txt`` (format in its own header: ``@@ <path> <first line> <source>`` segments of verbatim upstream
lines at their line numbers; ``@@ <path> whole <wheel member> (blob X)`` names a file a release wheel ships
whole, which needs the wheel and is therefore not read here).
"""

from __future__ import annotations

import re
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


def read_segments(fixture: Path) -> dict[str, FileText]:
    """The fixture's segments, path -> the known lines (several segments of one path merged)."""
    segments: dict[str, list[tuple[int, list[str]]]] = {}
    current: list[str] | None = None
    try:
        text = fixture.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolError(f"{fixture}: cannot read the patch evidence ({exc}); restore it from git") from exc
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
