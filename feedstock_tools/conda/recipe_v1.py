"""``convert-v1``: recipe-v1/recipe.yaml, generated from recipe/meta.yaml.

meta.yaml is the one recipe a maintainer edits: conda-forge builds it (conda-forge.yml: conda-build), the
regro bot bumps its ``{% set version %}`` and sha256, and conda-forge moves a recipe to v1 by converting
meta.yaml (conda-recipe-manager's ``convert``). recipe-v1/recipe.yaml says the same in rattler-build's v1
format and is written by this module, byte for byte the same from the same meta.yaml; ``convert-v1
--check``, ``render-ci --check``, ``check`` and CI fail when the committed file is not what it writes
(docs/rattler-build.md).

How meta.yaml is read: the Jinja of meta.yaml's preamble is evaluated *symbolically*. A list built with
``{% set %}`` under ``{% if %}`` blocks (``cpp_host``, ``cuda_dev``, ...) becomes items each with the
conditions it was added under; ``{% for x in LIST %}`` writes those items where it stands (v1 cannot
splice a list into a list, so the items are written out in every output, with ``if:``/``then:``); a
``# [selector]`` is an ``if:``. A scalar ``{% set %}`` of the preamble is a ``context`` entry; a test
(``is_cuda``, ``tegra``) and a set inside the outputs (v1 has no per-output context, and a context entry
naming a variant key makes that key every output's: py-rattler-build 0.73.0, measured) is written out
where it is used. A condition on constants only (``"rc" in version``) is decided here. meta.yaml's
comments go with the lines they stand above, and a Jinja comment with the first item its ``{% set %}``
adds.

The structure is conda-build's mapped to rattler-build's, one table: the top-level build is pass 1, the
``staging`` output (CEP 41) every scripted output inherits; ``script: build.sh`` is a script that runs
recipe/'s build.sh; ``script_env`` is ``script.env``; ``force_use_keys`` is ``variant.use_keys``; ``test``
is a ``python`` test (imports) and a script test whose files come from recipe/ as path sources (rattler-build
copies a test's ``files.recipe`` from its own directory only); and the renamed keys of ``_BUILD_KEYS``.
Anything else in meta.yaml stops the conversion with the line and what to do, rather than be guessed.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from jinja2 import nodes

from feedstock_tools.common.errors import InputError, ToolError
from feedstock_tools.common.recipe_imports import REPO_ROOT, import_megabuild
from feedstock_tools.conda import jinja_expr

V1_DIRNAME = "recipe-v1"
COMMAND = "python -m feedstock_tools convert-v1"
GENERATED = "recipe.yaml"
# conda-smithy reads the variant file from conda-forge.yml's recipe_dir (configure_feedstock.py,
# get_package_combined_spec): the v1 directory holds a copy of recipe/'s
VARIANT_FILE = "conda_build_config.yaml"

Cond = tuple[str, ...]  # a conjunction of v1 expressions


# ---- 1. meta.yaml's text as Jinja comments, statements and YAML lines ---------------------------------


@dataclass(frozen=True)
class Token:
    kind: str  # "comment" | "stmt" | "yaml"
    text: str
    line: int
    selector: str | None = None


_SELECTOR = re.compile(r"#\s*\[(?P<expr>[^\[\]]+)\]\s*$")


def _split_comment(text: str) -> tuple[str, str | None]:
    """A YAML line's content and its trailing ``# comment`` (a ``#`` after a space, outside quotes and
    ``{{ }}``)."""
    quote, depth = "", 0
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif text.startswith("{{", i):
            depth += 1
        elif text.startswith("}}", i) and depth:
            depth -= 1
        elif char in "'\"" and not depth and (i == 0 or text[i - 1] in " :-[,"):
            quote = char
        elif char == "#" and not depth and (i == 0 or text[i - 1] in " \t"):
            return text[:i].rstrip(), text[i:]
    return text.rstrip(), None


def tokenize(text: str, source: str) -> list[Token]:
    tokens: list[Token] = []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    i = 0
    while i < len(lines):
        start, stripped = i, lines[i].lstrip()
        if stripped.startswith(("{#", "{%")):
            close = "#}" if stripped.startswith("{#") else "%}"
            chunk = stripped
            while close not in chunk:
                i += 1
                if i == len(lines):
                    raise InputError(f"{source}:{start + 1}: no closing {close!r}; close the Jinja tag")
                chunk += "\n" + lines[i]
            end = chunk.index(close) + 2
            body, rest = chunk[:end], chunk[end:].strip()
            kind = "comment" if close == "#}" else "stmt"
            selector = None
            if rest.startswith("{#") and rest.endswith("#}"):
                tokens.append(Token("comment", rest, start + 1))
            elif rest and (match := _SELECTOR.fullmatch(rest)):
                selector = match["expr"]
            elif rest:
                raise InputError(
                    f"{source}:{i + 1}: text after a Jinja tag ({rest!r}); put it on a line of its own"
                )
            tokens.append(Token(kind, body, start + 1, selector))
        else:
            tokens.append(Token("yaml", lines[i], i + 1))
        i += 1
    return tokens


def _comment_lines(token_text: str) -> tuple[str, ...]:
    body = token_text[2:-2].strip("-").strip()
    return tuple(line.strip() for line in body.split("\n"))


# ---- 2. the Jinja, evaluated symbolically -------------------------------------------------------------


@dataclass(frozen=True)
class Comment:
    """A comment block; ``key`` makes it print once however often its item is written out."""

    lines: tuple[str, ...]
    key: int
    jinja: bool = False  # a {# #} comment (a set takes those before it; a YAML comment stays for its line)


@dataclass(frozen=True)
class Item:
    """One element of a symbolic list: v1 text, the conditions it was added under, its comments."""

    text: str
    cond: Cond
    comments: tuple[Comment, ...] = ()


@dataclass
class Scalar:
    node: nodes.Expr
    kind: str  # "context" (a context entry) | "inline" (written out where used)
    used: bool = False


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


@dataclass
class _If:
    branches: list[tuple[str | None, int, list]]  # (test text or None for else, line, body)


@dataclass
class _For:
    var: str
    expr: str
    line: int
    body: list


def _blocks(tokens: list[Token], source: str) -> list:
    """The tokens with their if/for blocks nested."""
    root: list = []
    stack: list[tuple[object, list]] = [(None, root)]
    for token in tokens:
        if token.kind != "stmt":
            stack[-1][1].append(token)
            continue
        body = token.text[2:-2].strip("-").strip()
        word = body.split(None, 1)[0] if body else ""
        rest = body[len(word) :].strip()
        where = f"{source}:{token.line}"
        if token.selector and word != "set":
            raise InputError(f"{where}: a selector on a {{% {word} %}} line; use an {{% if %}} block")
        if word == "set":
            stack[-1][1].append(token)
        elif word == "if":
            block = _If([(rest, token.line, [])])
            stack[-1][1].append(block)
            stack.append((block, block.branches[0][2]))
        elif word in ("elif", "else"):
            block = _innermost(stack, _If, word, where)
            block.branches.append((rest if word == "elif" else None, token.line, []))
            stack.append((block, block.branches[-1][2]))
        elif word == "for":
            match = re.fullmatch(r"(\w+)\s+in\s+(.+)", rest, re.DOTALL)
            if not match:
                raise InputError(f"{where}: a for loop other than 'for NAME in LIST'")
            loop = _For(match[1], match[2], token.line, [])
            stack[-1][1].append(loop)
            stack.append((loop, loop.body))
        elif word in ("endif", "endfor"):
            _innermost(stack, _If if word == "endif" else _For, word, where)
        else:
            raise InputError(
                f"{where}: {{% {word} %}} is not one of the Jinja statements {COMMAND} converts "
                "(set, if/elif/else, for); write it with those"
            )
    if len(stack) > 1:
        raise InputError(f"{source}: an {{% if %}} or {{% for %}} block is not closed")
    return root


def _innermost(stack: list[tuple[object, list]], kind: type, word: str, where: str) -> Any:
    """Close the innermost block, which must be of ``kind``; returns it."""
    if not isinstance(stack[-1][0], kind):
        raise InputError(
            f"{where}: {{% {word} %}} without the {{% {kind.__name__[1:].lower()} %}} it belongs to"
        )
    return stack.pop()[0]


class Evaluator:
    """meta.yaml's Jinja, run once for every configuration at the same time: values carry conditions."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.scalars: dict[str, Scalar] = {}
        self.lists: dict[str, list[Item]] = {}
        self.context: list[tuple[str, Scalar | None, tuple[Comment, ...]]] = []  # name, value, comments
        self.header: tuple[Comment, ...] = ()
        self.pending: list[Comment] = []
        self.lines: list[Line] = []
        self.in_body = False  # the YAML has begun: sets from here on are written out where used
        self._keys = 0
        self._continuation: tuple[int, int] | None = None  # (line index, column) of the last eol comment

    # -- names and conditions
    def _comment(self, lines: tuple[str, ...], jinja: bool = False) -> Comment:
        self._keys += 1
        return Comment(lines, self._keys, jinja)

    def _take_jinja_comments(self) -> tuple[Comment, ...]:
        taken = tuple(c for c in self.pending if c.jinja)
        self.pending = [c for c in self.pending if not c.jinja]
        return taken

    def _resolve(self, name: str) -> nodes.Expr | None:
        scalar = self.scalars.get(name)
        if scalar is None:
            return None
        scalar.used = True
        return scalar.node if scalar.kind == "inline" else None

    def _v1(self, node: nodes.Expr, where: str) -> nodes.Expr:
        node = jinja_expr.substitute(node, self._resolve)
        return jinja_expr.to_v1(node, where)

    def _constants(self) -> dict[str, object]:
        return {
            name: s.node.value
            for name, s in self.scalars.items()
            if s.kind == "context" and isinstance(s.node, nodes.Const)
        }

    def atom(self, text: str, line: int) -> str | bool:
        """A condition as a v1 expression, or its value when it names constants only."""
        where = f"{self.source}:{line}"
        original = jinja_expr.parse(text, where)
        node = jinja_expr.substitute(original, self._resolve)
        constants = self._constants()
        if jinja_expr.free_names(node) <= set(constants):
            return bool(jinja_expr.evaluate(node, constants))
        translated = jinja_expr.to_v1(node, where)
        return text.strip() if translated == original else jinja_expr.unparse(translated)

    def expression(self, text: str, line: int) -> str:
        """A ``{{ }}`` expression as v1 text (its own text where nothing changes)."""
        where = f"{self.source}:{line}"
        original = jinja_expr.parse(text, where)
        translated = self._v1(original, where)
        return text.strip() if translated == original else jinja_expr.unparse(translated)

    def template(self, text: str, line: int, bindings: dict[str, str]) -> str:
        """A YAML line's text with every ``{{ expr }}`` as ``${{ expr }}`` (a loop variable: its item)."""

        def one(match: re.Match[str]) -> str:
            inner = match[1].strip()
            if inner in bindings:
                return bindings[inner]
            names = jinja_expr.free_names(jinja_expr.parse(inner, f"{self.source}:{line}"))
            if names & set(bindings):
                raise InputError(
                    f"{self.source}:{line}: a loop variable inside an expression ({inner!r}); "
                    "use it alone, as {{ NAME }}"
                )
            return "${{ " + self.expression(inner, line) + " }}"

        return re.sub(r"(?<!\$)\{\{(.*?)\}\}", one, text)

    # -- symbolic lists
    def items(self, node: nodes.Expr, line: int) -> list[Item]:
        where = f"{self.source}:{line}"
        if isinstance(node, nodes.List):
            return [Item(self._item_text(element, line), ()) for element in node.items]
        if isinstance(node, nodes.Add):
            return self.items(node.left, line) + self.items(node.right, line)
        if isinstance(node, nodes.Name) and node.name in self.lists:
            return list(self.lists[node.name])
        if isinstance(node, nodes.CondExpr) and node.expr2 is not None:
            test = self.atom(jinja_expr.unparse(node.test), line)
            result = []
            for branch, atom in ((node.expr1, test), (node.expr2, _not(test))):
                start = conjoin((), atom)
                for item in self.items(branch, line) if start is not None else []:
                    merged = _merge(start, item.cond)  # type: ignore[arg-type]
                    if merged is not None:
                        result.append(replace(item, cond=merged))
            return result
        if isinstance(node, nodes.Filter) and node.name == "list" and not node.args:
            return self.items(node.node, line)
        if isinstance(node, nodes.Filter) and node.name == "map":
            args = [a.value for a in node.args if isinstance(a, nodes.Const)]
            if len(args) == 3 and args[0] == "replace" and len(node.args) == 3:
                # a derived list (variant key names): its items' comments stay with the original
                return [
                    replace(item, text=item.text.replace(args[1], args[2]), comments=())
                    for item in self.items(node.node, line)
                ]
        raise InputError(
            f"{where}: a list expression {COMMAND} cannot follow ({jinja_expr.unparse(node)}); build lists "
            "with [..], +, (A if TEST else B), map('replace', ..) and list"
        )

    def _item_text(self, node: nodes.Expr, line: int) -> str:
        """A list element as v1 text: its strings as they are, every other part as ``${{ }}``."""
        parts = node.nodes if isinstance(node, nodes.Concat) else [node]
        text = ""
        for part in parts:
            if isinstance(part, nodes.Const) and isinstance(part.value, str):
                text += part.value
            else:
                text += "${{ " + jinja_expr.unparse(self._v1(part, f"{self.source}:{line}")) + " }}"
        return text

    # -- statements
    def set(self, token: Token, cond: Cond) -> None:
        match = re.fullmatch(r"set\s+(\w+)\s*=\s*(.+)", token.text[2:-2].strip("-").strip(), re.DOTALL)
        where = f"{self.source}:{token.line}"
        if not match:
            raise InputError(f"{where}: a set statement other than 'set NAME = EXPRESSION'")
        name, node = match[1], jinja_expr.parse(match[2], where)
        jinja_expr.to_v1(node, where)  # what v1 cannot say stops here, at this line
        if token.selector:
            atom = self.atom(token.selector, token.line)
            cond = conjoin(cond, atom)  # type: ignore[assignment]
            if cond is None:
                return
        if name in self.lists or _is_list(node, self.lists):
            self._set_list(name, node, cond, token.line)
        else:
            self._set_scalar(name, node, cond, token.line)

    def _set_list(self, name: str, node: nodes.Expr, cond: Cond, line: int) -> None:
        old = self.lists.get(name, [])
        if isinstance(node, nodes.Add) and isinstance(node.left, nodes.Name) and node.left.name == name:
            kept, new = old, self.items(node.right, line)
        else:
            otherwise = negate(joined(cond)) if cond else None
            kept = [] if otherwise is None else [i for i in (_with(i, (otherwise,)) for i in old) if i]
            new = self.items(node, line)
        added = [i for i in (_with(item, cond) for item in new) if i]
        if added:
            added[0] = replace(added[0], comments=(*self._take_jinja_comments(), *added[0].comments))
        self.lists[name] = kept + added

    def _set_scalar(self, name: str, node: nodes.Expr, cond: Cond, line: int) -> None:
        where = f"{self.source}:{line}"
        previous = self.scalars.get(name)
        if previous is not None and previous.used:
            raise InputError(
                f"{where}: {name} is set again after it was used; v1 has one value per name: set it once, "
                "before it is used"
            )
        prior = previous.node if previous is not None else None
        if prior is not None:
            node = jinja_expr.substitute(node, lambda n: prior if n == name else None)
        if cond:
            test = jinja_expr.parse(joined(cond), where)
            if prior is None:
                raise InputError(f"{where}: {name} is set under a condition only; set it first without one")
            node = nodes.CondExpr(test, node, prior)
        node = jinja_expr.simplified(node)
        shadows = previous is None and name in jinja_expr.free_names(node)
        if shadows or self.in_body or jinja_expr.is_boolean(node):
            kind = "inline"
            node = jinja_expr.substitute(node, lambda n: None if n == name else self._resolve(n))
        else:
            kind = "context"
            node = jinja_expr.substitute(node, self._resolve)
        comments = self._take_jinja_comments()
        if previous is None:
            self.scalars[name] = Scalar(node, kind)
            self.context.append((name, self.scalars[name], comments))
        else:
            previous.node, previous.kind = node, kind
            if comments:
                self.context.append((name, None, comments))

    # -- the whole template
    def run(self, blocks: list, cond: Cond = (), bindings: dict[str, str] | None = None) -> None:
        bindings = bindings or {}
        for block in blocks:
            if isinstance(block, Token) and block.kind == "comment":
                comment = self._comment(_comment_lines(block.text), jinja=True)
                if not self.in_body and not self.scalars and not self.lists:
                    self.header = (*self.header, comment)
                else:
                    self.pending.append(comment)
            elif isinstance(block, Token) and block.kind == "stmt":
                self.set(block, cond)
            elif isinstance(block, Token):
                self._yaml(block, cond, bindings)
            elif isinstance(block, _If):
                self._run_if(block, cond, bindings)
            else:
                self._run_for(block, cond, bindings)

    def _run_if(self, block: _If, cond: Cond, bindings: dict[str, str]) -> None:
        """Each branch under its test and the negation of every earlier one; a branch that can never be
        taken is not run."""
        taken: list[str | bool] = []
        for test, line, body in block.branches:
            branch: Cond | None = cond
            for earlier in taken:
                branch = None if branch is None else conjoin(branch, _not(earlier))
            atom = True if test is None else self.atom(test, line)
            branch = None if branch is None else conjoin(branch, atom)
            taken.append(atom)
            if branch is not None:
                self.run(body, branch, bindings)

    def _run_for(self, block: _For, cond: Cond, bindings: dict[str, str]) -> None:
        """The body once per item, under the item's conditions, its variable bound to the item's text."""
        where = f"{self.source}:{block.line}"
        for item in self.items(jinja_expr.parse(block.expr, where), block.line):
            merged = _merge(cond, item.cond)
            if merged is None:
                continue
            self.pending = [*self.pending, *item.comments]
            self.run(block.body, merged, {**bindings, block.var: item.text})

    def _yaml(self, token: Token, cond: Cond, bindings: dict[str, str]) -> None:
        raw = token.text
        content, comment = _split_comment(raw)
        indent = len(raw) - len(raw.lstrip())
        if not content.strip():
            if comment is None:
                return
            column = raw.index("#")
            previous = self._continuation
            if previous is not None and previous[1] == column and previous[0] == len(self.lines) - 1:
                last = self.lines[-1]
                self.lines[-1] = replace(last, eol=f"{last.eol}\n{comment[1:].strip()}")
                return
            self.pending.append(self._comment((comment[1:].strip(),)))
            return
        selector = _SELECTOR.fullmatch(comment) if comment else None
        if selector:
            atom = self.atom(selector["expr"], token.line)
            merged = conjoin(cond, atom)
            if merged is None:
                self.pending = []
                return
            cond, comment = merged, None
        self.in_body = True
        text = self.template(content.strip(), token.line, bindings)
        eol = comment[1:].strip() if comment else None
        self._continuation = (len(self.lines), raw.index(comment)) if comment else None
        self.lines.append(Line(indent, text, cond, tuple(self.pending), eol, token.line))
        self.pending = []


def _not(atom: str | bool) -> str | bool:
    return (not atom) if isinstance(atom, bool) else negate(atom)


def _merge(cond: Cond, more: Cond) -> Cond | None:
    merged: Cond | None = cond
    for atom in more:
        merged = None if merged is None else conjoin(merged, atom)
    return merged


def _with(item: Item, cond: Cond) -> Item | None:
    merged = _merge(cond, item.cond)
    return None if merged is None else replace(item, cond=merged)


def _is_list(node: nodes.Expr, lists: dict[str, list[Item]]) -> bool:
    if isinstance(node, nodes.List):
        return True
    if isinstance(node, nodes.Add):
        return _is_list(node.left, lists) or _is_list(node.right, lists)
    if isinstance(node, nodes.Name):
        return node.name in lists
    if isinstance(node, nodes.CondExpr):
        return _is_list(node.expr1, lists)
    if isinstance(node, nodes.Filter):
        return node.name in ("list", "map") and _is_list(node.node, lists)
    return False


# ---- 3. the YAML of those lines, as a tree with conditions and comments ----------------------------------


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


# ---- 4. conda-build's recipe structure as rattler-build's ---------------------------------------------

# build: keys of a v0 output and where v1 says them (path below the output; "requirements/..." moves there)
_BUILD_KEYS = {
    "number": ("build", "number"),
    "string": ("build", "string"),
    "skip": ("build", "skip"),
    "script_env": ("build", "script", "env"),
    "force_use_keys": ("build", "variant", "use_keys"),
    "detect_binary_files_with_prefix": ("build", "prefix_detection", "ignore_binary_files"),
    "missing_dso_whitelist": ("build", "dynamic_linking", "missing_dso_allowlist"),
    "entry_points": ("build", "python", "entry_points"),
    "run_exports": ("requirements", "run_exports"),
    "ignore_run_exports_from": ("requirements", "ignore_run_exports", "from_package"),
}
_REQUIREMENT_KEYS = {"build": "build", "host": "host", "run": "run", "run_constrained": "run_constraints"}
_ABOUT_KEYS = {
    "home": "homepage",
    "dev_url": "repository",
    "doc_url": "documentation",
    "license": "license",
    "license_file": "license_file",
    "summary": "summary",
    "description": "description",
}
# v1's about has no license_family (the SPDX license says it)
_ABOUT_DROPPED = ("license_family",)
_TEST_KEYS = ("requires", "imports", "files", "source_files", "commands")
_SPEC_OPERATORS = "<>=!~*"


def _scalar(text: str) -> Node:
    return Node("scalar", text=text)


def _map(
    pairs: Sequence[tuple[str, Node | None]], comments: dict[str, tuple[Comment, ...]] | None = None
) -> Node:
    comments = comments or {}
    return Node("map", [Entry(k, v, comments=comments.get(k, ())) for k, v in pairs if v is not None])


def _generated(*lines: str) -> tuple[Comment, ...]:
    return (Comment(tuple(lines), -1),)


def spec_words(text: str) -> list[str]:
    """A match spec's words; a ``${{ ... }}`` is part of the word it stands in."""
    spans = iter(re.findall(r"\$\{\{.*?\}\}", text))
    words = re.sub(r"\$\{\{.*?\}\}", "\0", text).split()
    return [re.sub("\0", lambda _: next(spans), word) for word in words]


def canonical_spec(text: str) -> str:
    """conda's short version forms as rattler-build's strict parser needs them: ``name 1.2`` is
    ``name 1.2.*`` and ``name 1.2 build`` is ``name ==1.2 build`` (conda's match-spec meaning; rattler-build
    0.73.0 refuses the short forms: "missing range specifier")."""
    words = spec_words(text)
    if len(words) not in (2, 3) or words[1][:1] in _SPEC_OPERATORS or "*" in words[1]:
        return text
    words[1] = f"{words[1]}.*" if len(words) == 2 else f"=={words[1]}"
    return " ".join(words)


class Converter:
    def __init__(self, tree: Node, evaluator: Evaluator, source: str, recipe_from_v1: str) -> None:
        self.tree, self.evaluator, self.source = tree, evaluator, source
        self.recipe_from_v1 = recipe_from_v1  # "../recipe": recipe/ seen from the v1 directory
        self.test_dirs: list[str] = []

    def error(self, entry: Entry | None, what: str) -> InputError:
        line = f":{entry.line}" if entry is not None and entry.line else ""
        return InputError(f"{self.source}{line}: {what}")

    def fields(self, node: Node, where: str, allowed: Sequence[str]) -> dict[str, list[Entry]]:
        found: dict[str, list[Entry]] = {}
        if node.kind != "map":
            raise self.error(None, f"{where} is not a mapping")
        for entry in node.entries:
            if entry.key not in allowed:
                raise self.error(
                    entry,
                    f"{where}: {entry.key!r} has no v1 counterpart in {COMMAND} (feedstock_tools/conda/"
                    "recipe_v1.py); add its mapping there or leave the key out",
                )
            found.setdefault(entry.key, []).append(entry)  # type: ignore[arg-type]
        return found

    def required(self, found: dict[str, list[Entry]], key: str, where: str) -> Entry:
        entry = self.one(found, key)
        if entry is None:
            raise self.error(None, f"{where} has no {key!r}; a recipe {COMMAND} converts states it")
        return entry

    def one(self, found: dict[str, list[Entry]], key: str) -> Entry | None:
        """The entry of ``key``: once, and under a condition only when it is a list (the condition goes to
        its items)."""
        entries = found.get(key, [])
        if len(entries) > 1 or (entries and entries[0].cond and entries[0].value.kind != "seq"):
            raise self.error(entries[-1], f"{key} under a condition or twice; v1 states a key once")
        return entries[0] if entries else None

    # -- lists
    def seq(self, entry: Entry | None, spec: bool = False, cond: Cond = ()) -> Node | None:
        """A list, its items with the entry's conditions (and, for requirements, canonical specs)."""
        if entry is None:
            return None
        if entry.value.kind != "seq":
            raise self.error(entry, f"{entry.key} is not a list")
        items = []
        for item in entry.value.entries:
            merged = _merge(_merge(cond, entry.cond) or (), item.cond)
            if merged is None:
                continue
            text = canonical_spec(item.value.text) if spec else item.value.text
            items.append(replace(item, value=_scalar(text), cond=merged))
        return Node("seq", items)

    def items(self, found: dict[str, list[Entry]], key: str, spec: bool = False) -> list[Entry]:
        """The items of the list ``key`` (none when it is absent)."""
        node = self.seq(self.one(found, key), spec=spec)
        return node.entries if node is not None else []

    # -- sections
    def convert(self) -> Node:
        top = self.fields(
            self.tree,
            "meta.yaml",
            ("package", "source", "build", "requirements", "outputs", "about", "extra"),
        )
        package = self.fields(
            self.required(top, "package", "meta.yaml").value, "package", ("name", "version")
        )
        name = self.required(package, "name", "package").value.text
        build = self.fields(
            self.required(top, "build", "meta.yaml").value,
            "build",
            ("number", "skip", "error_overlinking", "script_env", "force_use_keys"),
        )
        outputs_entry = self.required(top, "outputs", "meta.yaml")
        outputs = [self.output(o, name) for o in outputs_entry.value.entries]
        staging = self.staging(name, build, self.one(top, "requirements"))
        pairs: list[tuple[str, Node | None]] = [
            ("context", self.context()),
            (
                "recipe",
                _map(
                    [("name", _scalar(name)), ("version", self.required(package, "version", "package").value)]
                ),
            ),
            ("source", self.sources(self.required(top, "source", "meta.yaml"))),
            ("build", self.top_build(build)),
            ("outputs", Node("seq", [Entry(None, staging, comments=outputs_entry.comments), *outputs])),
            ("about", self.about(self.one(top, "about"))),
            ("extra", self.one(top, "extra").value if top.get("extra") else None),  # type: ignore[union-attr]
        ]
        return _map(pairs)

    def context(self) -> Node:
        entries = []
        for name, scalar, comments in self.evaluator.context:
            if scalar is None or scalar.kind == "inline":
                notes = comments
                if scalar is not None:
                    text = jinja_expr.unparse(jinja_expr.to_v1(scalar.node, self.source))
                    notes = (*comments, *_generated(f"({name}: written out where it is used, as {text})"))
                if notes:
                    entries.append(Entry(None, Node("comments"), comments=notes))
                continue
            node = scalar.node
            if (
                isinstance(node, nodes.Const)
                and isinstance(node.value, str | int)
                and not isinstance(node.value, bool)
            ):
                text = jinja_expr.unparse(node)
            else:
                text = "${{ " + jinja_expr.unparse(jinja_expr.to_v1(node, self.source)) + " }}"
            entries.append(Entry(name, _scalar(text), comments=comments))
        return Node("map", entries)

    def sources(self, entry: Entry) -> Node:
        found = self.fields(entry.value, "source", ("url", "sha256", "git_url", "git_rev", "patches"))
        pairs: list[tuple[str, Node | None]] = []
        for v0, v1 in (("url", "url"), ("sha256", "sha256"), ("git_url", "git"), ("git_rev", "rev")):
            chosen = self.one(found, v0)
            if chosen is not None:
                pairs.append((v1, chosen.value))
        patches = self.seq(self.one(found, "patches"))
        if patches is not None:
            for item in patches.entries:
                item.value = _scalar(f"{self.recipe_from_v1}/{item.value.text}")
            pairs.append(("patches", patches))
        comments = {"patches": found["patches"][0].comments} if "patches" in found else {}
        entries = [Entry(None, _map(pairs, comments))]
        for index, directory in enumerate(self.test_dirs):
            entries.append(
                Entry(
                    None,
                    _map(
                        [
                            ("path", _scalar(f"{self.recipe_from_v1}/{directory}")),
                            ("target_directory", _scalar(directory)),
                        ]
                    ),
                    comments=()
                    if index
                    else _generated(
                        "the package tests' files, recipe/'s: rattler-build (0.73.0, measured) copies",
                        "a test's `files.recipe` from this directory only, following no link: they come",
                        "in as sources",
                    ),
                )
            )
        return Node("seq", entries)

    def top_build(self, build: dict[str, list[Entry]]) -> Node:
        number = self.required(build, "number", "build")
        pairs: list[tuple[str, Node | None]] = [("number", number.value)]
        comments: dict[str, tuple[Comment, ...]] = {"number": number.comments}
        skip = self.skip(build)
        if skip is not None:
            pairs.append(("skip", skip))
            comments["skip"] = build["skip"][0].comments
        overlinking = self.one(build, "error_overlinking")
        if overlinking is not None and overlinking.value.text == "true":
            pairs.append(("dynamic_linking", _map([("overlinking_behavior", _scalar("error"))])))
            comments["dynamic_linking"] = overlinking.comments
        return _map(pairs, comments)

    def skip(self, found: dict[str, list[Entry]]) -> Node | None:
        entries = found.get("skip", [])
        if not entries:
            return None
        items = []
        for entry in entries:
            if entry.value.text not in ("true", "True"):
                raise self.error(entry, "skip is not 'true  # [condition]'")
            items.append(Entry(None, _scalar(joined(entry.cond) if entry.cond else "true"), eol=entry.eol))
        return Node("seq", items)

    def script(self, scripts: list[Entry], env: Entry | None, extra_env: list[tuple[str, str]]) -> Node:
        """The v1 script of an output conda-build runs ``script:`` (a file of recipe/) for: the file, run from
        recipe/ with RECIPE_DIR pointed there, so the driver sees what it sees under conda-build; and
        ``script_env`` as ``env`` entries (after ``extra_env``)."""
        back = self.recipe_from_v1
        content = []
        for entry in scripts:
            filename = entry.value.text
            if filename.endswith(".bat"):
                lines = [
                    f'set "RECIPE_DIR=%RECIPE_DIR%\\{back.replace("/", chr(92))}"',
                    f'call "%RECIPE_DIR%\\{filename}"',
                    "if errorlevel 1 exit 1",
                ]
            elif filename.endswith(".sh"):
                lines = [f'export RECIPE_DIR="${{RECIPE_DIR}}/{back}"', f'bash "${{RECIPE_DIR}}/{filename}"']
            else:
                raise self.error(entry, f"script {filename!r} is neither a .sh nor a .bat file of the recipe")
            content += [Entry(None, _scalar(line), cond=entry.cond) for line in lines]
        content[0].comments = _generated(
            "the driver and its scripts are recipe/'s, shared with meta.yaml: run there, as from there"
        )
        env_entries = [Entry(k, _scalar(v)) for k, v in extra_env]
        names = self.seq(env).entries if env is not None else []  # type: ignore[union-attr]
        for index, item in enumerate(names):
            if item.cond:
                raise self.error(env, "script_env under a condition; v1's env is one mapping")
            name = item.value.text
            note = (
                ()
                if index
                else _generated(
                    "(script_env: v1 passes no variable through by name; empty is unset to the driver)"
                )
            )
            value = _scalar(f'${{{{ env.get("{name}", default="") }}}}')
            env_entries.append(Entry(name, value, comments=(*item.comments, *note)))
        env_node = Node("map", env_entries) if env_entries else None
        return _map([("content", Node("seq", content)), ("env", env_node)])

    def staging(self, name: str, build: dict[str, list[Entry]], requirements: Entry | None) -> Node:
        """Pass 1: conda-build's top-level build of a multi-output recipe (build.sh / bld.bat, its
        requirements) as a staging output."""
        scripts = [
            Entry("script", _scalar("build.sh"), cond=("unix",)),
            Entry("script", _scalar("bld.bat"), cond=("win",)),
        ]
        extra_env = [("PKG_NAME", name), ("PKG_VERSION", "${{ version }}")]
        script = self.script(scripts, self.one(build, "script_env"), extra_env)
        env = next(e for e in script.entries if e.key == "env").value
        env.entries[0].comments = _generated(
            "rattler-build sets neither PKG_NAME nor PKG_VERSION in a staging output (measured with 0.73.0):",
            "the driver chooses its pass by PKG_NAME, and the compiler activation's -fdebug-prefix-map names",
            "both, so without them pass 1's flags differ from every later output's (the driver stops there)",
        )
        pairs: list[tuple[str, Node | None]] = [
            ("staging", _map([("name", _scalar(name))])),
            ("build", _map([("script", script)])),
            ("requirements", self.requirements(requirements, None)),
        ]
        comments = {}
        if build.get("force_use_keys"):
            comments["build"] = _generated(
                "(meta.yaml's top-level force_use_keys: a staging build takes only a script (0.73.0:",
                "\"only 'script' and 'steps' are allowed in staging builds\"); its host names the keys)",
            )
        return _map(pairs, comments)

    def requirements(self, entry: Entry | None, build: dict[str, list[Entry]] | None) -> Node | None:
        pairs: list[tuple[str, Node | None]] = []
        comments: dict[str, tuple[Comment, ...]] = {}
        if entry is not None:
            found = self.fields(entry.value, "requirements", tuple(_REQUIREMENT_KEYS))
            for v0, v1 in _REQUIREMENT_KEYS.items():
                chosen = self.one(found, v0)
                pairs.append((v1, self.seq(chosen, spec=True)))
                if chosen is not None:
                    comments[v1] = chosen.comments
        if build is not None:
            exports = self.one(build, "run_exports")
            pairs.append(("run_exports", self.seq(exports)))
            ignored = self.one(build, "ignore_run_exports_from")
            if ignored is not None:
                names = self.seq(ignored)
                for item in names.entries:  # type: ignore[union-attr]
                    # a package name: meta.yaml's "python *" keeps conda-build from taking python as a key
                    item.value = _scalar(spec_words(item.value.text)[0])
                pairs.append(("ignore_run_exports", _map([("from_package", names)])))
                comments["ignore_run_exports"] = ignored.comments
        node = _map(pairs, comments)
        return node if node.entries else None

    def output(self, entry: Entry, staging_name: str) -> Entry:
        found = self.fields(entry.value, "output", ("name", "script", "build", "requirements", "test"))
        name = self.required(found, "name", "an output").value.text
        build_entry = self.one(found, "build")
        build = (
            self.fields(build_entry.value, f"output {name}: build", tuple(_BUILD_KEYS)) if build_entry else {}
        )
        scripts = found.get("script", [])
        pairs: list[tuple[str, Node | None]] = [("package", _map([("name", _scalar(name))]))]
        comments: dict[str, tuple[Comment, ...]] = {}
        if scripts:
            pairs.append(
                ("inherit", _map([("from", _scalar(staging_name)), ("run_exports", _scalar("false"))]))
            )
            comments["inherit"] = _generated(
                "pass 1's work directory; run_exports: false, or the staging host's run-exports (python_abi",
                "of its Python above all) land on every output (pytorch-cpu-feedstock#518)",
            )
        pairs.append(("build", self.output_build(build, scripts)))
        pairs.append(("requirements", self.requirements(self.one(found, "requirements"), build)))
        pairs.append(("tests", self.tests(self.one(found, "test"))))
        return Entry(None, _map(pairs, comments), comments=entry.comments)

    def output_build(self, build: dict[str, list[Entry]], scripts: list[Entry]) -> Node:
        tree: dict[str, object] = {}
        for key, path in _BUILD_KEYS.items():
            if path[0] != "build" or key == "script_env":
                continue
            if key == "skip":
                chosen, value = (build.get("skip") or [None])[0], self.skip(build)
            else:
                chosen = self.one(build, key)
                if chosen is None:
                    continue
                if key == "detect_binary_files_with_prefix":
                    if chosen.value.text != "false":
                        raise self.error(
                            chosen, f"{key}: only 'false' has a v1 counterpart (ignore_binary_files)"
                        )
                    value = _scalar("true")
                else:
                    value = self.seq(chosen) if chosen.value.kind == "seq" else chosen.value
            if value is None or chosen is None:
                continue
            position = tree
            for part in path[1:-1]:
                position = position.setdefault(part, {})  # type: ignore[assignment]
            position[path[-1]] = Entry(path[-1], value, comments=chosen.comments, eol=chosen.eol)
        if scripts:
            tree["script"] = Entry("script", self.script(scripts, self.one(build, "script_env"), []))
        order = (
            "number",
            "string",
            "skip",
            "script",
            "variant",
            "prefix_detection",
            "dynamic_linking",
            "python",
        )
        return Node("map", [_nested(key, tree[key]) for key in order if key in tree])

    def tests(self, entry: Entry | None) -> Node | None:
        if entry is None:
            return None
        found = self.fields(entry.value, "test", _TEST_KEYS)
        tests = []
        imports = self.one(found, "imports")
        if imports is not None:
            python = _map([("imports", self.seq(imports)), ("pip_check", _scalar("false"))])
            python.entries[1].comments = _generated(
                "meta.yaml's imports test runs no pip check (a command may)"
            )
            tests.append(Entry(None, _map([("python", python)]), comments=imports.comments))
        commands = self.one(found, "commands")
        if commands is not None:
            recipe_files = self.items(found, "files")
            for item in recipe_files:
                if "/" not in item.value.text:
                    raise self.error(item, f"test file {item.value.text!r} is not in a directory of recipe/")
                directory = item.value.text.split("/")[0]
                if directory not in self.test_dirs:
                    self.test_dirs.append(directory)
            files = recipe_files + self.items(found, "source_files")
            requires = self.items(found, "requires", spec=True)
            script_test = _map(
                [
                    ("files", _map([("source", Node("seq", files))]) if files else None),
                    ("requirements", _map([("run", Node("seq", requires))]) if requires else None),
                    ("script", self.seq(commands)),
                ],
                {"script": commands.comments},
            )
            tests.append(Entry(None, script_test))
        return Node("seq", tests) if tests else None

    def about(self, entry: Entry | None) -> Node | None:
        if entry is None:
            return None
        found = self.fields(entry.value, "about", (*_ABOUT_KEYS, *_ABOUT_DROPPED))
        pairs: list[tuple[str, Node | None]] = []
        comments = {}
        for v0, v1 in _ABOUT_KEYS.items():
            chosen = self.one(found, v0)
            if chosen is None:
                continue
            pairs.append((v1, self.seq(chosen) if chosen.value.kind == "seq" else chosen.value))
            comments[v1] = chosen.comments
        return _map(pairs, comments)


def _nested(key: str, value: object) -> Entry:
    """A tree of dicts with Entry leaves as an Entry; a branch takes the comments of its first leaf."""
    if isinstance(value, Entry):
        return value
    entries = [_nested(k, v) for k, v in value.items()]  # type: ignore[union-attr]
    comments = entries[0].comments
    entries[0] = replace(entries[0], comments=())
    return Entry(key, Node("map", entries), comments=comments)


# ---- 5. the v1 text ---------------------------------------------------------------------------------------


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


def _banner(source: str) -> tuple[Comment, ...]:
    return _generated(
        f"GENERATED from {source} by `{COMMAND}`: do not edit this file.",
        "Edit meta.yaml, then run that command (the release bump and render-ci run it too; check,",
        "render-ci --check and CI fail when this file is not what it writes).",
        "",
        "rattler-build's v1 format (CEP 13/14), pass 1 of the megabuild as a `staging` output (CEP 41). Its",
        "own directory: conda-smithy's linter refuses one holding meta.yaml and recipe.yaml (lint R-051);",
        "the patches, scripts and test files are recipe/'s. The comments are meta.yaml's; how the formats",
        "map: docs/rattler-build.md.",
    )


def convert(meta_text: str, *, source: str = "recipe/meta.yaml", recipe_from_v1: str = "../recipe") -> str:
    """recipe.yaml's text for ``meta_text`` (the same text for the same input, byte for byte)."""
    evaluator = Evaluator(source)
    evaluator.run(_blocks(tokenize(meta_text, source), source))
    parser = _Parser(evaluator.lines, source)
    tree = parser.node() if evaluator.lines else Node("map")
    if parser.i != len(parser.lines):
        raise parser.error(parser.lines[parser.i], "indented less than the top level")
    converter = Converter(tree, evaluator, source, recipe_from_v1)
    v1 = converter.convert()
    emitter = Emitter()
    emitter.comments((*_banner(source), *evaluator.header), 0)
    emitter.out.append("")
    for index, entry in enumerate(v1.entries):
        if index:
            emitter.out.append("")
        emitter.comments(entry.comments, 0)
        if entry.key == "outputs":
            emitter.out.append("outputs:")
            emitter.sequence(entry.value.entries, 2, spaced=True)
        else:
            emitter.value(f"{entry.key}:", entry.value, 0, entry.eol)
    return "\n".join(emitter.out) + "\n"


# ---- 6. the files, the check and the command ----------------------------------------------------------


def expected_files(root: Path) -> dict[Path, str]:
    """recipe-v1/'s files (relative path -> text), or none when the feedstock keeps no v1 recipe."""
    v1_dir = root / V1_DIRNAME
    if not v1_dir.is_dir():
        return {}
    recipe_dir = root / "recipe"
    meta = recipe_dir / "meta.yaml"
    try:
        text = meta.read_text(encoding="utf-8")
        variants = (recipe_dir / VARIANT_FILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolError(f"{meta.parent}: cannot read the recipe ({exc})") from exc
    source = meta.relative_to(root).as_posix()
    back = Path(os.path.relpath(recipe_dir, v1_dir)).as_posix()
    return {
        Path(V1_DIRNAME) / GENERATED: convert(text, source=source, recipe_from_v1=back),
        Path(V1_DIRNAME) / VARIANT_FILE: variants,
    }


def stale(root: Path) -> list[str]:
    """One line per recipe-v1 file that is not what the command writes (empty when up to date)."""
    problems = []
    for path, text in expected_files(root).items():
        target = root / path
        if not target.is_file():
            problems.append(f"missing: {path} (run: {COMMAND})")
        elif target.read_bytes() != text.encode("utf-8"):
            problems.append(f"out of date: {path}, not what meta.yaml converts to (run: {COMMAND})")
    return problems


def write(root: Path) -> list[str]:
    """Write recipe-v1/'s files (atomically, each); returns what changed."""
    atomic_file = import_megabuild("atomic_file")
    changes = []
    for path, text in expected_files(root).items():
        target = root / path
        if target.is_file() and target.read_bytes() == text.encode("utf-8"):
            continue
        atomic_file.write_text(target, text, newline="")
        changes.append(f"wrote {path}")
    return changes


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "convert-v1",
        help="write recipe-v1/recipe.yaml from recipe/meta.yaml (--check: fail when it is stale)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--check", action="store_true", help="report a stale recipe-v1/ instead of writing")
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="feedstock root (default: %(default)s)")
    parser.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    if not (args.root / V1_DIRNAME).is_dir():
        raise ToolError(f"{args.root / V1_DIRNAME}: no such directory; the feedstock keeps no v1 recipe")
    if args.check:
        problems = stale(args.root)
        for problem in problems:
            print(problem)
        if problems:
            raise ToolError(f"recipe-v1/ is not what recipe/meta.yaml converts to; run: {COMMAND}")
        print(f"{V1_DIRNAME}/ is up to date with recipe/meta.yaml")
        return 0
    for change in write(args.root) or ["nothing to change"]:
        print(change)
    return 0
