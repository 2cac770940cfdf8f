"""meta.yaml's Jinja, evaluated symbolically: for every configuration at once, values carry conditions.

A list built with ``{% set %}`` under ``{% if %}`` blocks becomes items with the conditions they were added
under; ``{% for %}`` writes the items where it stands; a ``# [selector]`` is one more condition; a scalar
``{% set %}`` of the preamble is a context entry, a test or a set inside the YAML is written out where it is
used; a condition on constants only is decided. The result is meta.yaml's YAML lines, each with its
conditions and comments (:class:`feedstock_tools.conda.recipe_tree.Line`). Standard library and Jinja2's
expression parser (:mod:`feedstock_tools.conda.jinja_expr`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from jinja2 import nodes

from feedstock_tools.common.errors import InputError
from feedstock_tools.conda import jinja_expr
from feedstock_tools.conda.recipe_tree import Comment, Cond, Line, conjoin, joined, merge, negate

# ---- meta.yaml's text as Jinja comments, statements and YAML lines ---------------------------------


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


# ---- the Jinja, evaluated symbolically -------------------------------------------------------------


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
                f"{where}: {{% {word} %}} is not one of the Jinja statements convert-v1 converts "
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
                    merged = merge(start, item.cond)  # type: ignore[arg-type]
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
            f"{where}: a list expression convert-v1 cannot follow ({jinja_expr.unparse(node)}); build lists "
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
            merged = merge(cond, item.cond)
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


def _with(item: Item, cond: Cond) -> Item | None:
    merged = merge(cond, item.cond)
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


def evaluate(meta_text: str, source: str) -> Evaluator:
    """meta.yaml's Jinja run over ``meta_text`` (``source`` names it in errors)."""
    evaluator = Evaluator(source)
    evaluator.run(_blocks(tokenize(meta_text, source), source))
    return evaluator
