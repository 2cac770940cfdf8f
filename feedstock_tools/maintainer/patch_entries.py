"""meta.yaml's ``source: patches:`` list, the one reader of its lines: ``patches`` writes it
(:mod:`feedstock_tools.maintainer.patch_list`), ``check`` and the patch report read it
(:mod:`feedstock_tools.maintainer.check`, :mod:`feedstock_tools.maintainer.patch_check`).

The list is literal text of meta.yaml, ``  patches:`` under source, then comment and entry lines indented by
four spaces, an entry's line selector after it (``    - patches/0002-....patch  # [win]``): read by line,
not rendered, so the comments above each entry stay as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from feedstock_tools.common.errors import ToolError

_BLOCK = re.compile(r"^  patches:\n(?P<body>(?:    (?:#.*|- .*)\n)*)", re.MULTILINE)
_ENTRY = re.compile(r"^    - (?P<path>\S+)(?:\s+#\s*\[(?P<selector>[^\[\]]+)\])?\s*$")


@dataclass(frozen=True)
class Entry:
    path: str  # relative to the recipe: "patches/0001-....patch"
    selector: str | None
    comments: tuple[str, ...]  # the comment lines above it, as written

    def lines(self) -> list[str]:
        entry = f"    - {self.path}" + (f"  # [{self.selector}]" if self.selector else "")
        return [*self.comments, entry]


def _block(meta_text: str) -> re.Match[str]:
    match = _BLOCK.search(meta_text)
    if match is None:
        raise ToolError(
            "recipe/meta.yaml has no '  patches:' list under source (its entries indented by four spaces); "
            "restore it (git diff recipe/meta.yaml)"
        )
    return match


def read_entries(meta_text: str) -> list[Entry]:
    """meta.yaml's patch list; each entry with the comment lines right above it."""
    entries, comments = [], []
    for line in _block(meta_text)["body"].splitlines():
        entry = _ENTRY.match(line)
        if entry is None:
            comments.append(line)
            continue
        entries.append(Entry(entry["path"], entry["selector"], tuple(comments)))
        comments = []
    return entries


def with_entries(meta_text: str, entries: list[Entry]) -> str:
    """meta.yaml with ``entries`` as its patch list (the rest of the text as it was)."""
    match = _block(meta_text)
    body = "".join(line + "\n" for entry in entries for line in entry.lines())
    return meta_text[: match.start("body")] + body + meta_text[match.end("body") :]
