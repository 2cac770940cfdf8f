"""Reading the YAML conda-smithy writes (.ci_support files, conda-forge.yml) with the standard library only.

``build-locally.py`` and ``.scripts/`` must run on a bare Python (no PyYAML), so every tool reads the CI
files with this module (a ``.ci_support`` file through :mod:`feedstock_tools.common.configuration`).
They are YAML of a simple shape -- block mappings, block lists (also lists of lists, as in
``zip_keys``), plain or quoted scalars and ``#`` comments -- which is all PyYAML's block style emits
for them. Every scalar is returned as text, exactly like PyYAML's ``BaseLoader`` (the loader
conda-build reads variant files with); the tests compare the two readers on every file.
Anything outside that shape (flow style, anchors, multi-line scalars) is a :class:`CiFileError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feedstock_tools.common.errors import InputError
from feedstock_tools.common.inputs import read_text

Node = str | list[Any] | dict[str, Any]

_COMMENT = re.compile(r"""(?:^|\s)#.*$""")


class CiFileError(InputError):
    """A file is not of the simple YAML shape this reader understands; the message names the line."""


@dataclass(frozen=True)
class _Line:
    number: int
    indent: int
    text: str


def _strip_comment(line: str) -> str:
    """The line without a trailing comment, leaving ``#`` inside quotes alone."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"" and (index == 0 or line[index - 1] in " -:"):
            quote = char
        elif char == "#" and (index == 0 or line[index - 1] in " \t"):
            return line[:index].rstrip()
    return line.rstrip()


def _scalar(text: str, number: int) -> str:
    text = text.strip()
    if text.startswith("'"):
        if not text.endswith("'") or len(text) < 2:
            raise CiFileError(f"line {number}: unterminated single-quoted scalar")
        return text[1:-1].replace("''", "'")
    if text.startswith('"'):
        if not text.endswith('"') or len(text) < 2:
            raise CiFileError(f"line {number}: unterminated double-quoted scalar")
        return bytes(text[1:-1], "utf-8").decode("unicode_escape")
    if text[:1] in "[{&*!|>":
        raise CiFileError(f"line {number}: flow style, anchors, tags and block scalars are not supported")
    return text


def _split_key(text: str, number: int) -> tuple[str, str] | None:
    """``key: value`` -> (key, value); None when the text is not a mapping entry."""
    match = re.match(r"""^('(?:[^']|'')*'|"[^"]*"|[^\s'"#][^:#]*?)\s*:(?:\s+(.*))?$""", text)
    if not match:
        return None
    return _scalar(match.group(1), number), (match.group(2) or "")


def _tokens(text: str) -> list[_Line]:
    lines = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise CiFileError(f"line {number}: tab in indentation")
        stripped = _strip_comment(raw)
        if not stripped.strip() or stripped.strip() in ("---", "..."):
            continue
        lines.append(_Line(number, len(stripped) - len(stripped.lstrip()), stripped.strip()))
    return lines


class _Parser:
    def __init__(self, lines: list[_Line]) -> None:
        self.lines = lines
        self.position = 0

    def peek(self) -> _Line | None:
        return self.lines[self.position] if self.position < len(self.lines) else None

    def block(self, indent: int) -> Node:
        line = self.peek()
        if line is None or line.indent < indent:
            return ""
        if line.text.startswith("- ") or line.text == "-":
            return self.sequence(line.indent)
        return self.mapping(line.indent)

    def sequence(self, indent: int) -> list[Any]:
        items: list[Any] = []
        while (
            (line := self.peek()) is not None
            and line.indent == indent
            and (line.text.startswith("- ") or line.text == "-")
        ):
            self.position += 1
            rest = line.text[1:].lstrip()
            if not rest:
                items.append(self.block(indent + 1))
            elif rest.startswith("- ") or rest == "-":
                # "- - a": a nested list whose first item sits on this line.
                inner_indent = indent + (len(line.text) - len(rest))
                self.lines.insert(self.position, _Line(line.number, inner_indent, rest))
                items.append(self.sequence(inner_indent))
            elif _split_key(rest, line.number) is not None:
                raise CiFileError(f"line {line.number}: mappings inside lists are not supported")
            else:
                items.append(_scalar(rest, line.number))
        return items

    def mapping(self, indent: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        while (line := self.peek()) is not None and line.indent == indent:
            entry = _split_key(line.text, line.number)
            if entry is None:
                raise CiFileError(f"line {line.number}: expected 'key: value', got {line.text!r}")
            key, value = entry
            self.position += 1
            if key in result:
                raise CiFileError(f"line {line.number}: duplicate key {key!r}")
            if value:
                result[key] = _scalar(value, line.number)
                continue
            following = self.peek()
            if following is not None and (
                following.indent > indent
                or (
                    following.indent == indent
                    and following.text.startswith(("- ", "-"))
                    and following.text[:2] != "--"
                )
            ):
                result[key] = self.block(following.indent)
            else:
                result[key] = ""
        if (line := self.peek()) is not None and line.indent > indent:
            raise CiFileError(f"line {line.number}: unexpected indentation")
        return result


def parse(text: str) -> dict[str, Any]:
    """A CI file's text as nested dicts and lists of strings (PyYAML ``BaseLoader`` semantics)."""
    lines = _tokens(text)
    if not lines:
        return {}
    parser = _Parser(lines)
    node = parser.block(lines[0].indent)
    if (line := parser.peek()) is not None:
        raise CiFileError(f"line {line.number}: unexpected content {line.text!r}")
    if not isinstance(node, dict):
        raise CiFileError("the top level of a CI file must be a mapping")
    return node


def read(path: Path) -> dict[str, Any]:
    """:func:`parse` of a file; errors name the file (a byte that is not UTF-8: its line and column too)."""
    try:
        return parse(read_text(path))
    except CiFileError as exc:
        raise CiFileError(f"{path}: {exc}") from None
