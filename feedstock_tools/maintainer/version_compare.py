"""Loose version comparison for the dependency table: concrete versions, pins and PEP 440-ish bounds.

The table compares values of very different shapes: ``12.9.1`` (an install script), ``12.9`` (a
conda-forge pin that means "12.9.*"), ``>=1.13.3`` (a wheel requirement), ``v2.29.3-1`` (a git tag).
A pin agrees with a concrete version when it is a component-wise prefix of it; a bound agrees with a
concrete version that satisfies it; two bounds agree when they are the same bound.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_OPERATORS = ("==", ">=", "<=", "!=", "~=", ">", "<", "=")
_NUMBER = re.compile(r"\d+")


def version_numbers(text: str) -> tuple[int, ...]:
    """``"v2.29.3-1"`` -> ``(2, 29, 3, 1)``: the numbers of a version, for ordering and prefixes."""
    return tuple(int(number) for number in _NUMBER.findall(text))


def is_bound(text: str) -> bool:
    """True for a constraint such as ``>=1.13.3`` or ``<2025,>=2023`` (not for a bare version)."""
    return text.strip().startswith(_OPERATORS)


def _split_constraint(part: str) -> tuple[str, str]:
    part = part.strip()
    for operator in _OPERATORS:
        if part.startswith(operator):
            return operator, part[len(operator) :].strip()
    return "==", part


def satisfies(version: str, constraint: str) -> bool:
    """Whether concrete ``version`` meets every comma-separated part of ``constraint``."""
    have = version_numbers(version)
    for part in constraint.split(","):
        if not part.strip():
            continue
        operator, wanted_text = _split_constraint(part)
        wanted = version_numbers(wanted_text)
        if wanted_text.endswith("*") or operator in ("==", "="):
            ok = have[: len(wanted)] == wanted
        elif operator == ">=":
            ok = have >= wanted
        elif operator == "<=":
            ok = have <= wanted
        elif operator == ">":
            ok = have > wanted
        elif operator == "<":
            ok = have < wanted
        elif operator == "!=":
            ok = have[: len(wanted)] != wanted
        else:  # "~=": at least wanted, same release series
            ok = have >= wanted and have[: len(wanted) - 1] == wanted[: len(wanted) - 1]
        if not ok:
            return False
    return True


def _normalise_bound(text: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple(sorted(_key(part) for part in text.split(",") if part.strip()))


def _key(part: str) -> tuple[str, tuple[int, ...]]:
    operator, version = _split_constraint(part)
    return operator, version_numbers(version)


def _pin_matches(pin: str, version: str) -> bool:
    """A pin (``12.9``, ``2``) matches a version (``12.9.1``) when one is a prefix of the other."""
    pin_key, version_key_ = version_numbers(pin), version_numbers(version)
    shorter = min(len(pin_key), len(version_key_))
    return shorter > 0 and pin_key[:shorter] == version_key_[:shorter]


def values_agree(upstream: Sequence[str], conda: Sequence[str]) -> tuple[bool, str]:
    """Whether every conda value is compatible with what upstream uses; the reason when not.

    ``upstream`` and ``conda`` are lists of values (CUDA has several of each). An unconstrained value
    (``*`` or empty) agrees with anything.
    """
    upstream = [value for value in upstream if value not in ("", "*")]
    conda = [value for value in conda if value not in ("", "*")]
    if not upstream or not conda:
        return True, ""
    for conda_value in conda:
        if not any(_agree(upstream_value, conda_value) for upstream_value in upstream):
            return False, f"{conda_value} does not match upstream {', '.join(upstream)}"
    return True, ""


def _exact(value: str) -> str:
    """``==13.0.3`` -> ``13.0.3``: an exact pin is a concrete version (so conda's ``13.0`` matches it)."""
    stripped = value.strip()
    if stripped.startswith("==") and "," not in stripped and "*" not in stripped:
        return stripped[2:].strip()
    return stripped


def _agree(upstream: str, conda: str) -> bool:
    upstream, conda = _exact(upstream), _exact(conda)
    upstream_bound, conda_bound = is_bound(upstream), is_bound(conda)
    if upstream_bound and conda_bound:
        # Equal bounds agree, and so does a conda bound that keeps every upstream clause and adds its own
        # (setuptools >=77.0.3,<82 against upstream's >=77.0.3: every version conda installs is one upstream
        # accepts). Anything else may let conda install what upstream rules out, or the reverse.
        return set(_normalise_bound(upstream)) <= set(_normalise_bound(conda))
    if upstream_bound:
        return satisfies(conda, upstream)
    if conda_bound:
        return satisfies(upstream, conda)
    return _pin_matches(conda, upstream)
