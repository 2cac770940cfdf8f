"""conda-build's line selectors (``# [linux and cuda_compiler_version != "None"]``), reproduced.

conda-build keeps or drops every line of ``meta.yaml`` and ``conda_build_config.yaml`` that ends in a
``[...]`` selector by evaluating the bracketed Python expression in a namespace of platform flags
(``linux``, ``osx``, ``x86_64``, ``aarch64`` …), ``py``/``np``, ``os``/``environ`` and the variant's keys.
This module builds that namespace from a conda subdir and a variant, the way conda-build's ``ns_cfg``
does, so that the project's tools see the same lines conda-build sees.
"""

from __future__ import annotations

import ast
import difflib
import functools
import os
import re
from collections.abc import Iterable, Mapping
from types import CodeType
from typing import Any

from feedstock_tools.common.configuration import PythonVersion

# conda-build's selector pattern: content, optional comment, then a bracketed expression at line end.
SELECTOR_LINE = re.compile(r"(.+?)\s*(#.*)?\[([^\[\]]+)\](?(2)[^\(\)]*)$")

KNOWN_SUBDIRS = ("linux-64", "linux-aarch64", "linux-ppc64le", "osx-64", "osx-arm64", "win-64")
# Architectures that conda-build exposes as their own flag (everything that is not plain x86).
NON_X86_MACHINES = ("armv6l", "armv7l", "aarch64", "arm64", "ppc64", "ppc64le", "s390x", "riscv64")


class SelectorError(ValueError):
    """A selector could not be evaluated; the message names the line."""


def selector_namespace(
    subdir: str,
    variant: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    build_subdir: str | None = None,
) -> dict[str, Any]:
    """The names a selector may use for a build of ``subdir`` with ``variant`` (conda-build ``ns_cfg``)."""
    if subdir not in KNOWN_SUBDIRS:
        raise SelectorError(f"unknown conda subdir {subdir!r}; expected one of {', '.join(KNOWN_SUBDIRS)}")
    variant = dict(variant or {})
    environ = dict(os.environ if environ is None else environ)
    arch = subdir.split("-", 1)[1]
    namespace: dict[str, Any] = {
        "linux": subdir.startswith("linux-"),
        "linux32": subdir == "linux-32",
        "linux64": subdir == "linux-64",
        "arm": subdir.startswith("linux-arm"),
        "osx": subdir.startswith("osx-"),
        "unix": subdir.startswith(("linux-", "osx-")),
        "win": subdir.startswith("win-"),
        "win32": subdir == "win-32",
        "win64": subdir == "win-64",
        "x86": subdir.endswith(("-32", "-64")),
        "x86_64": subdir.endswith("-64"),
        "os": _OsWithEnviron(environ),
        "environ": environ,
        "nomkl": bool(int(environ.get("FEATURE_NOMKL", "0") or 0)),
        "build_platform": build_subdir or subdir,
    }
    for machine in NON_X86_MACHINES:
        namespace[machine] = arch == machine
    python = variant.get("python")
    if isinstance(python, list | tuple):
        python = python[0]
    # conda-build's py selector: 312 for "3.12.* *_cpython"
    py = int(PythonVersion.parse(str(python)).nodot) if python else 312
    namespace.update(py=py, py3k=py >= 30, py2k=py < 30)
    numpy = variant.get("numpy")
    namespace["np"] = int("".join(str(numpy).split(".")[:2])) if numpy else None
    # Variant keys come last and do not shadow the platform flags; numbers and "true"/"false" are
    # converted as conda-build does, so `c_compiler_version >= 14` and `megabuild` read naturally.
    for key, value in variant.items():
        if key in namespace:
            continue
        namespace[key] = _selector_value(value)
    return namespace


def _selector_value(value: Any) -> Any:
    if isinstance(value, bool | int):
        return value
    try:
        return int(value)
    except (TypeError, ValueError):
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        return value


class _OsWithEnviron:
    """``os`` as selectors see it, with ``os.environ`` bound to the environment given (not the caller's)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


class _UnknownNamesAreFalse(dict):
    """A namespace in which a name nobody defined reads as False, as conda-build's eval_selector does."""

    def __missing__(self, key: str) -> bool:
        return False


def evaluate_selector(expression: str, namespace: Mapping[str, Any], strict: bool = False) -> bool:
    """Evaluate one bracketed selector expression.

    conda-build reads a name it does not know as False (``magma_variant`` on a platform that lacks the
    key); ``strict=True`` makes it an error instead, which catches typos in a recipe we own.
    """
    return _evaluate(expression, _selector_names(namespace, strict))


def _selector_names(namespace: Mapping[str, Any], strict: bool) -> dict[str, Any]:
    return dict(namespace) if strict else _UnknownNamesAreFalse(namespace)


# What a selector may be made of: names, constants, comparisons, and/or/not, and the calls and attributes
# selectors use (os.environ.get(...), a value's startswith). Every selector of the recipe, the pinning and
# its migrations is of these. A selector is read from files found as well as named (conda-forge's pinning
# beside the checkout, in conda-smithy's cache): evaluated as any Python, with ``os`` in its namespace, a
# planted ``# [os.system(...)]`` ran as the maintainer; attributes are limited to these names, none with
# an underscore (which closes the ``().__class__`` ways out of the empty builtins).
_SELECTOR_NODES = (
    ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd, ast.Compare,
    ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn, ast.Is, ast.IsNot, ast.Name,
    ast.Constant, ast.Tuple, ast.List, ast.Load, ast.Attribute, ast.Call,
)  # fmt: skip
_SELECTOR_ATTRIBUTES = frozenset({"environ", "get", "getenv", "startswith", "endswith", "lower", "upper"})


def _refuse_code(expression: str, tree: ast.Expression) -> None:
    for node in ast.walk(tree):
        allowed = isinstance(node, _SELECTOR_NODES)
        if isinstance(node, ast.Attribute):
            allowed = node.attr in _SELECTOR_ATTRIBUTES
        elif isinstance(node, ast.Call):
            allowed = isinstance(node.func, ast.Attribute) and not node.keywords
        if not allowed:
            raise SelectorError(
                f"invalid selector [{expression}]: {ast.unparse(node)!r} is not a selector's (names, "
                "constants, comparisons, and/or/not, os.environ.get, startswith/endswith/lower/upper): "
                "nothing else is evaluated"
            )


@functools.lru_cache(maxsize=1024)
def _selector_code(expression: str) -> CodeType:
    """Compiled once: a recipe's selectors are evaluated for every line of every variant of every render."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise SelectorError(f"invalid selector [{expression}]: {exc.msg}") from exc
    _refuse_code(expression, tree)
    return compile(tree, "<string>", "eval")


def _evaluate(expression: str, names: dict[str, Any]) -> bool:
    try:
        return bool(eval(_selector_code(expression), {"__builtins__": {}}, names))
    except SelectorError:
        raise
    except Exception as exc:
        raise SelectorError(f"invalid selector [{expression}]: {exc}") from exc


def select_lines(text: str, namespace: Mapping[str, Any], strict: bool = False) -> str:
    """Apply line selectors to ``text``: keep unselected lines and lines whose selector is true.

    Comment-only lines are dropped, and a kept line loses its selector and trailing comment,
    exactly like conda-build's ``select_lines``. ``strict`` as in :func:`evaluate_selector`.
    """
    return select_numbered_lines(text, namespace, strict)[0]


def select_numbered_lines(
    text: str, namespace: Mapping[str, Any], strict: bool = False
) -> tuple[str, tuple[int, ...]]:
    """:func:`select_lines`, and for each line of its result the number of the line of ``text`` it came
    from, so that an error in the selected text (a YAML error) can name the line of the file."""
    names = _selector_names(namespace, strict)  # once per text, not per line
    verdicts: list[bool] = []
    # each distinct selector once, in the order of its first line (so an error names the first line the
    # failing selector is on, as a line-by-line evaluation would): a recipe has ~30 distinct selectors on
    # ~700 lines, selected for every variant of every render
    for expression, first_line in _distinct_selectors(text):
        try:
            verdicts.append(_evaluate(expression, names))
        except SelectorError as exc:
            raise SelectorError(f"line {first_line}: {exc}") from None
    return _kept_lines(text, tuple(verdicts))


@functools.lru_cache(maxsize=1024)
def _distinct_selectors(text: str) -> tuple[tuple[str, int], ...]:
    """Each distinct selector of ``text`` with the number of the first line it is on."""
    first: dict[str, int] = {}
    for number, _, expression in _split_selectors(text):
        if expression is not None:
            first.setdefault(expression, number)
    return tuple(first.items())


@functools.lru_cache(maxsize=1024)
def _kept_lines(text: str, verdicts: tuple[bool, ...]) -> tuple[str, tuple[int, ...]]:
    """The selected text and its line numbers, given each distinct selector's verdict (in the order of
    :func:`_distinct_selectors`): variants that agree on every selector share one result."""
    expressions = [expression for expression, _ in _distinct_selectors(text)]
    verdict_of = dict(zip(expressions, verdicts, strict=True))
    kept: list[str] = []
    numbers: list[int] = []
    for number, line, expression in _split_selectors(text):
        if expression is None or verdict_of[expression]:
            kept.append(line)
            numbers.append(number)
    return "\n".join(kept) + "\n", tuple(numbers)


def all_platform_names() -> frozenset[str]:
    """Every name a selector may use on some platform without any variant key (``linux``, ``py``, ``os``…)."""
    return frozenset(name for subdir in KNOWN_SUBDIRS for name in selector_namespace(subdir, {}, {}))


def unknown_selector_names(text: str, known: Iterable[str]) -> list[tuple[int, str, str]]:
    """(line number, name, selector) for each name a selector of ``text`` uses that is not in ``known``.

    conda-build reads such a name as False and silently drops the line (``# [linx]``), so in a file this
    project writes it is a typo. A selector that is not a Python expression is left to its evaluation.
    """
    known = set(known)
    found: list[tuple[int, str, str]] = []
    for number, _, expression in _split_selectors(text):
        if expression is None:
            continue
        try:
            tree = ast.parse(expression.strip(), mode="eval")
        except SyntaxError:
            continue
        names = [node.id for node in ast.walk(tree) if isinstance(node, ast.Name)]
        found += [(number, name, expression) for name in dict.fromkeys(names) if name not in known]
    return found


def close_name(name: str, known: Iterable[str]) -> str | None:
    """The known name ``name`` is most likely a typo of (``linx`` -> ``linux``), or None."""
    matches = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
    return matches[0] if matches else None


@functools.lru_cache(maxsize=1024)
def _split_selectors(text: str) -> tuple[tuple[int, str, str | None], ...]:
    """Each non-comment line as (number, the line without its selector, the selector or None); split once
    per text, since a recipe is selected for every variant."""
    lines: list[tuple[int, str, str | None]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if line.lstrip().startswith("#"):
            continue
        trailing_quote = line[-1] if line and line[-1] in "'\"" else ""
        match = SELECTOR_LINE.match(line)
        if match:
            lines.append((number, match.group(1) + trailing_quote, match.group(3)))
        else:
            lines.append((number, line, None))
    return tuple(lines)
