"""Jinja expressions of meta.yaml, parsed by Jinja2 and written back as rattler-build's v1 spells them.

conda-build evaluates meta.yaml's ``{{ ... }}``, ``{% ... %}`` and its ``# [selector]`` lines (Python
expressions, which Jinja parses alike) with Jinja2; rattler-build evaluates ``${{ ... }}`` and ``if:`` with
minijinja, the same expression language less Python's string methods. What differs is a short table:

* names conda-build sets that rattler-build spells otherwise: ``PKG_HASH`` is ``hash``, ``CONDA_PY`` is
  ``python | version_to_buildstring``, the selector name ``py`` (an int, ``py == 312``) is that as an int;
* ``pin_subpackage``/``pin_compatible``'s ``max_pin``/``min_pin`` are ``upper_bound``/``lower_bound``;
* ``text.replace(a, b)`` and ``text.split(sep)`` (Python methods, which minijinja refuses: "string has no
  method named replace", py-rattler-build 0.73.0, measured) are the ``replace`` and ``split`` filters
  (minijinja has both, measured; Jinja2 has no ``split`` filter, so meta.yaml says the method).

:func:`unparse` writes a node back; an expression the table leaves alone keeps its own text.
"""

from __future__ import annotations

from collections.abc import Callable

import jinja2
from jinja2 import nodes

from feedstock_tools.common.errors import InputError

ENV = jinja2.Environment()

V0_NAMES = {
    "PKG_HASH": "hash",
    "CONDA_PY": "python | version_to_buildstring",
    "py": "python | version_to_buildstring | int",
}
PIN_KEYWORDS = {"max_pin": "upper_bound", "min_pin": "lower_bound"}
PIN_FUNCTIONS = ("pin_subpackage", "pin_compatible")
METHODS_AS_FILTERS = ("replace", "split")

# Jinja's grammar, loosest first (jinja2/parser.py: parse_condexpr, parse_or, ... parse_unary, postfix)
_PRECEDENCE: dict[type, int] = {
    nodes.CondExpr: 0,
    nodes.Or: 1,
    nodes.And: 2,
    nodes.Not: 3,
    nodes.Compare: 4,
    nodes.Add: 5,
    nodes.Sub: 5,
    nodes.Concat: 6,
    nodes.Mul: 7,
    nodes.Div: 7,
    nodes.FloorDiv: 7,
    nodes.Mod: 7,
    nodes.Pow: 8,
    nodes.Neg: 9,
    nodes.Pos: 9,
}
_COMPARE = {
    "eq": "==",
    "ne": "!=",
    "gt": ">",
    "gteq": ">=",
    "lt": "<",
    "lteq": "<=",
    "in": "in",
    "notin": "not in",
}
_BINARY = {
    nodes.Add: "+",
    nodes.Sub: "-",
    nodes.Mul: "*",
    nodes.Div: "/",
    nodes.FloorDiv: "//",
    nodes.Mod: "%",
}
_BINARY[nodes.Pow] = "**"


def parse(text: str, where: str) -> nodes.Expr:
    """One Jinja expression; a syntax error names ``where`` (file:line)."""
    try:
        template = ENV.parse("{{ " + text + " }}")
    except jinja2.TemplateSyntaxError as exc:
        raise InputError(f"{where}: not a Jinja expression: {text.strip()!r} ({exc.message})") from None
    body = template.body
    if len(body) != 1 or not isinstance(body[0], nodes.Output) or len(body[0].nodes) != 1:
        raise InputError(f"{where}: not one Jinja expression: {text.strip()!r}")
    return body[0].nodes[0]


_V0_NODES = {name: parse(text, "jinja_expr.V0_NAMES") for name, text in V0_NAMES.items()}


def free_names(node: nodes.Node) -> set[str]:
    names = {name.name for name in node.find_all(nodes.Name)}  # find_all skips the node itself
    return names | {node.name} if isinstance(node, nodes.Name) else names


def substitute(node: nodes.Expr, replace: Callable[[str], nodes.Expr | None]) -> nodes.Expr:
    """A copy of ``node`` with each name ``replace`` gives a node for replaced by that node."""
    if isinstance(node, nodes.Name):
        found = replace(node.name)
        return node if found is None else found
    copy = object.__new__(type(node))
    for field in node.fields:
        value = getattr(node, field, None)
        if isinstance(value, nodes.Node):
            value = substitute(value, replace)  # type: ignore[arg-type]
        elif isinstance(value, list):
            value = [substitute(v, replace) if isinstance(v, nodes.Node) else v for v in value]  # type: ignore[arg-type]
        setattr(copy, field, value)
    for attribute in node.attributes:
        setattr(copy, attribute, getattr(node, attribute, None))
    return copy


def to_v1(node: nodes.Expr, where: str) -> nodes.Expr:
    """The expression as rattler-build's v1 says it (the table of the module docstring)."""
    node = substitute(node, _V0_NODES.get)
    calls = [node] if isinstance(node, nodes.Call) else []
    for call in calls + list(node.find_all(nodes.Call)):  # find_all skips the node itself
        if isinstance(call.node, nodes.Name) and call.node.name in PIN_FUNCTIONS:
            for keyword in call.kwargs:
                keyword.key = PIN_KEYWORDS.get(keyword.key, keyword.key)
    return _methods_as_filters(node, where)


def _methods_as_filters(node: nodes.Expr, where: str) -> nodes.Expr:
    if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Getattr):
        if node.node.attr not in METHODS_AS_FILTERS:
            raise InputError(
                f"{where}: the method .{node.node.attr}() has no v1 equivalent (rattler-build's minijinja "
                "has no string methods); use a Jinja filter in meta.yaml"
            )
        return nodes.Filter(
            _methods_as_filters(node.node.node, where),
            node.node.attr,
            [_methods_as_filters(a, where) for a in node.args],
            list(node.kwargs),
            None,
            None,
        )
    for field in node.fields:
        value = getattr(node, field, None)
        if isinstance(value, nodes.Expr):
            setattr(node, field, _methods_as_filters(value, where))
        elif isinstance(value, list):
            setattr(
                node,
                field,
                [_methods_as_filters(v, where) if isinstance(v, nodes.Expr) else v for v in value],
            )
    return node


def _precedence(node: nodes.Node) -> int:
    return _PRECEDENCE.get(type(node), 10)


def _wrapped(node: nodes.Node, least: int) -> str:
    """``node`` as an operand; a filtered value in an operation is parenthesized too, for the reader
    (``a + (b | int)``: Jinja binds the filter first either way)."""
    text = unparse(node)
    operand = isinstance(node, nodes.Filter | nodes.Test) and 1 < least < 10
    return f"({text})" if _precedence(node) < least or operand else text


def _const(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def _arguments(node: nodes.Call | nodes.Filter | nodes.Test) -> str:
    return ", ".join([unparse(a) for a in node.args] + [f"{k.key}={unparse(k.value)}" for k in node.kwargs])


def _postfix(node: nodes.Filter | nodes.Test, word: str) -> str:
    arguments = _arguments(node)
    return f"{_wrapped(node.node, 10)} {word} {node.name}" + (f"({arguments})" if arguments else "")


def _condexpr(node: nodes.CondExpr) -> str:
    text = f"{_wrapped(node.expr1, 1)} if {_wrapped(node.test, 1)}"
    return text + (f" else {_wrapped(node.expr2, 1)}" if node.expr2 is not None else "")


def _compare(node: nodes.Compare) -> str:
    return _wrapped(node.expr, 5) + "".join(
        f" {_COMPARE[operand.op]} {_wrapped(operand.expr, 5)}" for operand in node.ops
    )


def _binary(node: nodes.BinExpr) -> str:
    level = _precedence(node)
    return f"{_wrapped(node.left, level)} {_BINARY[type(node)]} {_wrapped(node.right, level + 1)}"


def _tuple(node: nodes.Tuple) -> str:
    return "(" + ", ".join(unparse(item) for item in node.items) + ("," if len(node.items) == 1 else "") + ")"


_WRITERS: dict[type, Callable[..., str]] = {
    nodes.Name: lambda n: n.name,
    nodes.Const: lambda n: _const(n.value),
    nodes.List: lambda n: "[" + ", ".join(unparse(item) for item in n.items) + "]",
    nodes.Tuple: _tuple,
    nodes.CondExpr: _condexpr,
    # an "and" inside an "or" in parentheses, for the reader
    nodes.Or: lambda n: f"{_wrapped(n.left, 3)} or {_wrapped(n.right, 3)}",
    nodes.And: lambda n: f"{_wrapped(n.left, 2)} and {_wrapped(n.right, 3)}",
    nodes.Not: lambda n: f"not {_wrapped(n.node, 10)}",
    nodes.Compare: _compare,
    nodes.Concat: lambda n: " ~ ".join(_wrapped(part, 7) for part in n.nodes),
    nodes.Neg: lambda n: "-" + _wrapped(n.node, 9),
    nodes.Pos: lambda n: "+" + _wrapped(n.node, 9),
    nodes.Filter: lambda n: _postfix(n, "|"),
    nodes.Test: lambda n: _postfix(n, "is"),
    nodes.Call: lambda n: f"{_wrapped(n.node, 10)}({_arguments(n)})",
    nodes.Getattr: lambda n: f"{_wrapped(n.node, 10)}.{n.attr}",
    nodes.Getitem: lambda n: f"{_wrapped(n.node, 10)}[{unparse(n.arg)}]",
    **dict.fromkeys(_BINARY, _binary),
}


def unparse(node: nodes.Node) -> str:
    """Jinja source for ``node``, with the parentheses its operators need (and around a negated operand
    that is not a single name, for the reader)."""
    writer = _WRITERS.get(type(node))
    if writer is None:
        raise TypeError(f"no v1 spelling for the Jinja node {type(node).__name__}")
    return writer(node)


def is_boolean(node: nodes.Node) -> bool:
    """Whether the expression is a test (a comparison, and/or/not, true/false)."""
    if isinstance(node, nodes.Compare | nodes.And | nodes.Or | nodes.Not | nodes.Test):
        return True
    if isinstance(node, nodes.Const):
        return isinstance(node.value, bool)
    if isinstance(node, nodes.CondExpr):
        return is_boolean(node.expr1) and node.expr2 is not None and is_boolean(node.expr2)
    return False


def simplified(node: nodes.Expr) -> nodes.Expr:
    """``true if T else false`` is T, ``false if T else true`` is ``not T``."""
    if (
        isinstance(node, nodes.CondExpr)
        and isinstance(node.expr1, nodes.Const)
        and isinstance(node.expr2, nodes.Const)
        and {node.expr1.value, node.expr2.value} == {True, False}
    ):
        return node.test if node.expr1.value is True else nodes.Not(node.test)
    return node


def evaluate(node: nodes.Expr, values: dict[str, object]) -> object:
    """The value of an expression whose names are all in ``values`` (Jinja2 evaluates it)."""
    return ENV.compile_expression(unparse(node), undefined_to_none=False)(**values)
