"""The recipe as a YAML tree whose entries carry conditions and comments: read from meta.yaml's lines (after
its Jinja, :mod:`feedstock_tools.conda.meta_jinja`), written as rattler-build's v1 text, where a list item
under conditions is an ``if:``/``then:``/``else:`` (standard library).

A condition is a conjunction of v1 expressions (``Cond``); an item whose conditions contradict is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from feedstock_tools.common.errors import InputError

Cond = tuple[str, ...]  # a conjunction of v1 expressions


@dataclass(frozen=True)
class Comment:
    """A comment block; ``key`` makes it print once however often its item is written out."""

    lines: tuple[str, ...]
    key: int
    jinja: bool = False  # a {# #} comment (a set takes those before it; a YAML comment stays for its line)


@dataclass(frozen=True)
class Line:
    """A YAML line of meta.yaml after the Jinja: indentation, v1 text, conditions, comments."""

    indent: int
    text: str
    cond: Cond
    comments: tuple[Comment, ...]
    eol: str | None
    number: int


def negate(atom: str) -> str:
    if re.fullmatch(r"[A-Za-z_]\w*", atom):
        return f"not {atom}"
    match = re.fullmatch(r"not ([A-Za-z_]\w*)", atom)
    if match:
        return match[1]
    if atom.startswith("not (") and atom.endswith(")") and _balanced(atom[5:-1]):
        return atom[5:-1]
    return f"not ({atom})"


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def conjoin(cond: Cond, atom: str | bool) -> Cond | None:
    """``cond`` and ``atom``; None when that can never hold."""
    if atom is True:
        return cond
    if atom is False or negate(atom) in cond:  # type: ignore[arg-type]
        return None
    return cond if atom in cond else (*cond, atom)  # type: ignore[misc]


def joined(cond: Cond) -> str:
    """A conjunction as one v1 condition."""
    return " and ".join(f"({a})" if len(cond) > 1 and re.search(r" or | if ", a) else a for a in cond)


def merge(cond: Cond, more: Cond) -> Cond | None:
    merged: Cond | None = cond
    for atom in more:
        merged = None if merged is None else conjoin(merged, atom)
    return merged


# ---- the YAML of those lines, as a tree with conditions and comments ----------------------------------


@dataclass
class Node:
    kind: str  # "map" | "seq" | "scalar" | "block"
    entries: list[Entry] = field(default_factory=list)
    text: str = ""
    lines: list[str] = field(default_factory=list)  # a block scalar's lines


@dataclass
class Entry:
    key: str | None  # None: a sequence item
    value: Node
    cond: Cond = ()
    comments: tuple[Comment, ...] = ()
    eol: str | None = None
    line: int = 0


_KEY = re.compile(r"(?P<key>[A-Za-z_][\w.-]*|\"[^\"]*\"):(?:\s+(?P<rest>.*))?$")


class _Parser:
    def __init__(self, lines: list[Line], source: str) -> None:
        self.lines, self.source, self.i = lines, source, 0

    def error(self, line: Line, what: str) -> InputError:
        return InputError(f"{self.source}:{line.number}: {what}")

    def node(self) -> Node:
        """The block that starts at the current line (a list or a mapping, by its first line)."""
        line = self.lines[self.i]
        if line.text.startswith("- ") or line.text == "-":
            return self.sequence(line.indent)
        return self.mapping(line.indent)

    def mapping(self, indent: int) -> Node:
        node = Node("map")
        while self.i < len(self.lines) and self.lines[self.i].indent == indent:
            line = self.lines[self.i]
            match = _KEY.match(line.text)
            if not match or line.text.startswith("- "):
                break
            self.i += 1
            node.entries.append(self._entry(match["key"], match["rest"] or "", line, indent))
        if self.i < len(self.lines) and self.lines[self.i].indent > indent:
            raise self.error(self.lines[self.i], "indented deeper than the mapping around it")
        return node

    def _entry(self, key: str, rest: str, line: Line, indent: int) -> Entry:
        if rest in ("|", ">", "|-", ">-"):
            block = Node("block", text=rest)
            while self.i < len(self.lines) and self.lines[self.i].indent > indent:
                block.lines.append(self.lines[self.i].text)
                self.i += 1
            value = block
        elif rest:
            value = Node("scalar", text=rest)
        elif self.i < len(self.lines) and (
            self.lines[self.i].indent > indent
            or (self.lines[self.i].indent == indent and self.lines[self.i].text.startswith("- "))
        ):
            value = self.node()
        else:
            value = Node("scalar", text="")
        return Entry(key, value, line.cond, line.comments, line.eol, line.number)

    def sequence(self, indent: int) -> Node:
        node = Node("seq")
        while self.i < len(self.lines) and self.lines[self.i].indent == indent:
            line = self.lines[self.i]
            if not (line.text.startswith("- ") or line.text == "-"):
                break
            rest = line.text[2:].strip()
            match = _KEY.match(rest)
            if match:
                inner = replace(line, indent=indent + 2, text=rest, comments=(), eol=line.eol)
                self.lines[self.i] = inner
                value = self.mapping(indent + 2)
                node.entries.append(Entry(None, value, line.cond, line.comments, None, line.number))
            else:
                self.i += 1
                node.entries.append(
                    Entry(None, Node("scalar", text=rest), line.cond, line.comments, line.eol, line.number)
                )
        return node


def parse(lines: list[Line], source: str) -> Node:
    """The YAML tree of meta.yaml's lines (after its Jinja)."""
    if not lines:
        return Node("map")
    parser = _Parser(list(lines), source)
    tree = parser.node()
    if parser.i != len(parser.lines):
        raise parser.error(parser.lines[parser.i], "indented less than the top level")
    return tree


# ---- the v1 text ---------------------------------------------------------------------------------------


class Emitter:
    def __init__(self) -> None:
        self.out: list[str] = []
        self.printed: set[int] = set()

    def comments(self, comments: Sequence[Comment], indent: int) -> None:
        for comment in comments:
            if comment.key in self.printed:
                continue
            if comment.key >= 0:
                self.printed.add(comment.key)
            for line in comment.lines:
                self.out.append(" " * indent + ("# " + line if line else "#"))

    def eol(self, text: str, eol: str | None, indent: int) -> None:
        if eol is None:
            self.out.append(text)
            return
        first, *more = eol.split("\n")
        self.out.append(f"{text}  # {first}")
        column = len(text) + 2
        self.out.extend(" " * column + f"# {line}" for line in more)

    def mapping(self, node: Node, indent: int) -> None:
        for entry in node.entries:
            if entry.value.kind == "comments":
                self.comments(entry.comments, indent)
                continue
            if entry.cond:
                raise ValueError(f"a conditional mapping entry {entry.key} reached the emitter")
            self.comments(entry.comments, indent)
            self.value(f"{' ' * indent}{entry.key}:", entry.value, indent, entry.eol)

    def value(self, prefix: str, node: Node, indent: int, eol: str | None = None) -> None:
        if node.kind == "scalar":
            self.eol(f"{prefix} {node.text}" if node.text else prefix, eol, indent)
        elif node.kind == "block":
            self.eol(f"{prefix} {node.text}", eol, indent)
            self.out.extend(" " * (indent + 2) + line for line in node.lines)
        elif node.kind == "map":
            self.eol(prefix, eol, indent)
            self.mapping(node, indent + 2)
        else:
            self.eol(prefix, eol, indent)
            self.sequence(node.entries, indent + 2)

    def sequence(self, entries: list[Entry], indent: int, spaced: bool = False) -> None:
        i = 0
        first = True
        while i < len(entries):
            entry = entries[i]
            if spaced and not first:
                self.out.append("")
            first = False
            if not entry.cond:
                self.item(entry, indent)
                i += 1
                continue
            atom = entry.cond[0]
            j = i
            while j < len(entries) and entries[j].cond[:1] == (atom,):
                j += 1
            k = j
            other = negate(atom)
            while k < len(entries) and entries[k].cond[:1] == (other,):
                k += 1
            then = [replace(e, cond=e.cond[1:]) for e in entries[i:j]]
            otherwise = [replace(e, cond=e.cond[1:]) for e in entries[j:k]]
            hoisted = then[0].comments
            then[0] = replace(then[0], comments=())
            self.comments(hoisted, indent)
            self.out.append(f"{' ' * indent}- if: {atom}")
            self.branch("then", then, indent + 2)
            if otherwise:
                self.branch("else", otherwise, indent + 2)
            i = k

    def branch(self, word: str, entries: list[Entry], indent: int) -> None:
        only = entries[0]
        if len(entries) == 1 and not only.cond and only.value.kind == "scalar" and not only.comments:
            self.eol(f"{' ' * indent}{word}: {only.value.text}", only.eol, indent)
            return
        self.out.append(f"{' ' * indent}{word}:")
        self.sequence(entries, indent + 2)

    def item(self, entry: Entry, indent: int) -> None:
        self.comments(entry.comments, indent)
        node = entry.value
        if node.kind == "map":
            inner = Emitter()
            inner.printed = self.printed
            inner.mapping(node, indent + 2)
            lines = inner.out
            # the first key goes on the dash's line, after its own comments
            first = next(n for n, line in enumerate(lines) if not line.lstrip().startswith("#"))
            self.out.extend(lines[:first])
            self.out.append(f"{' ' * indent}- {lines[first][indent + 2 :]}")
            self.out.extend(lines[first + 1 :])
        elif node.kind == "seq":
            raise ValueError("a list in a list reached the emitter")
        else:
            self.eol(f"{' ' * indent}- {node.text}", entry.eol, indent)
