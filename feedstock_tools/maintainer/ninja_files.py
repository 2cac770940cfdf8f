"""Reading ``build.ninja``: the build statements CMake's Ninja generator writes.

(``.ninja_log`` is read by the build driver's ``megabuild.ninja_log``, shared with the tools.)
Only the parts the build-structure graph needs: each ``build`` statement's outputs, rule, explicit /
implicit / order-only inputs and its indented variables, with Ninja's ``$`` escapes (``$ `` space,
``$:`` colon, ``$$`` dollar, ``$`` + newline continuation) undone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class BuildStatement:
    outputs: list[str]
    rule: str
    inputs: list[str]
    implicit: list[str] = field(default_factory=list)
    order_only: list[str] = field(default_factory=list)
    variables: dict[str, str] = field(default_factory=dict)


def _logical_lines(text: str) -> list[str]:
    """Lines with ``$``-newline continuations joined (the continuation's leading blanks dropped)."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = pending + (raw.lstrip() if pending else raw)
        # An odd number of trailing '$' means the newline itself is escaped.
        trailing = len(line) - len(line.rstrip("$"))
        if trailing % 2 == 1:
            pending = line[:-1]
            continue
        pending = ""
        lines.append(line)
    if pending:
        lines.append(pending)
    return lines


def _split_paths(text: str) -> list[str]:
    """Split a path list on unescaped blanks, undoing ``$ ``, ``$:`` and ``$$``."""
    paths: list[str] = []
    current: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "$" and index + 1 < len(text):
            current.append(text[index + 1])
            index += 2
            continue
        if char == " ":
            if current:
                paths.append("".join(current))
                current = []
        else:
            current.append(char)
        index += 1
    if current:
        paths.append("".join(current))
    return paths


def _unescaped_colon(text: str) -> int:
    index = 0
    while index < len(text):
        if text[index] == "$":
            index += 2
            continue
        if text[index] == ":":
            return index
        index += 1
    return -1


def _unescaped_split(text: str, separator: str) -> tuple[str, str | None]:
    """``text`` split at the first unescaped `` | `` / `` || `` style separator token."""
    tokens = text.split(" ")
    for position, token in enumerate(tokens):
        if token == separator and (position == 0 or not tokens[position - 1].endswith("$")):
            return " ".join(tokens[:position]), " ".join(tokens[position + 1 :])
    return text, None


def parse_build_ninja(path: Path) -> list[BuildStatement]:
    """Every ``build`` statement of ``path`` (``include``d / ``subninja`` files are not followed)."""
    statements: list[BuildStatement] = []
    current: BuildStatement | None = None
    for line in _logical_lines(path.read_text(encoding="utf-8", errors="replace")):
        if line.startswith("build "):
            body = line[len("build ") :]
            colon = _unescaped_colon(body)
            if colon < 0:
                current = None
                continue
            outputs_text, rest = body[:colon], body[colon + 1 :].strip()
            outputs_text, _implicit_outputs = _unescaped_split(outputs_text, "|")
            rest, order_only = _unescaped_split(rest, "||")
            rest, implicit = _unescaped_split(rest, "|")
            rule, _, explicit = rest.partition(" ")
            current = BuildStatement(
                outputs=_split_paths(outputs_text),
                rule=rule,
                inputs=_split_paths(explicit),
                implicit=_split_paths(implicit or ""),
                order_only=_split_paths(order_only or ""),
            )
            statements.append(current)
        elif current is not None and line.startswith((" ", "\t")) and "=" in line:
            name, _, value = line.strip().partition("=")
            current.variables[name.strip()] = value.strip()
        elif line.strip() and not line.startswith((" ", "\t", "#")):
            current = None
    return statements
