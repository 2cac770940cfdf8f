"""The recipe's GPU architecture lists: meta.yaml's ``{% set cuda_arch_list = "..." %}`` lines, read without a
render and held to the build driver's rules.

meta.yaml keeps one list per CUDA configuration (a selector on each line); script_env hands the selected one
to the driver (``MEGABUILD_CUDA_ARCH_LIST``), which refuses a list that is not oldest first, repeats an
entry, misspells one or puts ``+PTX`` anywhere but on the newest (``megabuild.cuda_targets.cuda_arch_list``).
Those rules are asked here of every line, selected or not, so ``check`` and ``render-ci --check`` report a
mistyped list as one line naming meta.yaml's line, never as the driver's traceback hours into a build.
Standard library and the recipe's tokenizer (:mod:`feedstock_tools.conda.meta_jinja`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from feedstock_tools.conda import meta_jinja

NAME = "cuda_arch_list"
_SET = re.compile(rf"""\{{%-?\s*set\s+{NAME}\s*=\s*(?P<quote>["'])(?P<value>[^"']*)(?P=quote)\s*-?%\}}""")
_ARCH = re.compile(r"(?P<major>\d+)\.(?P<minor>\d)(?:\+PTX)?")


@dataclass(frozen=True)
class ArchLine:
    """One ``{% set cuda_arch_list = "..." %}`` line of meta.yaml."""

    line: int
    value: str  # "" for the default of a configuration without a list
    selector: str | None


def arch_lines(meta_text: str, source: str = "recipe/meta.yaml") -> list[ArchLine]:
    """Every literal ``cuda_arch_list`` set line, in the file's order."""
    found = []
    for token in meta_jinja.tokenize(meta_text, source):
        match = _SET.fullmatch(token.text.strip()) if token.kind == "stmt" else None
        if match:
            found.append(ArchLine(token.line, match["value"], token.selector))
    return found


def arch_key(arch: str) -> tuple[int, int]:
    """``"7.5"`` / ``"12.0+PTX"`` -> (7, 5) / (12, 0), for ordering."""
    match = _ARCH.fullmatch(arch)
    if match is None:
        raise ValueError(f"{arch!r} is not an architecture (X.Y or X.Y+PTX)")
    return int(match["major"]), int(match["minor"])


def problem(value: str) -> str | None:
    """Why the driver would refuse ``value`` as a CUDA build's list (None: it builds with it)."""
    from megabuild import cuda_targets, errors

    try:
        cuda_targets.cuda_arch_list({cuda_targets.ARCH_LIST_VARIABLE: value})
    except errors.MegabuildError as exc:
        # the driver's sentence without the variable it was given and its own fix: the caller names the line
        return str(exc).removeprefix(f"{cuda_targets.ARCH_LIST_VARIABLE}={value}: ").split("; fix ", 1)[0]
    return None


@dataclass(frozen=True)
class ArchProblem:
    where: str  # "recipe/meta.yaml:94"
    message: str

    def line(self) -> str:
        return f"{self.where}: {self.message}"


def problems(meta_text: str, source: str = "recipe/meta.yaml") -> list[ArchProblem]:
    """One per non-empty list the driver would refuse, naming meta.yaml's line and the fix."""
    found = []
    for arch_line in arch_lines(meta_text, source):
        why = problem(arch_line.value) if arch_line.value else None
        if why:
            found.append(
                ArchProblem(
                    f"{source}:{arch_line.line}",
                    f"{NAME} {arch_line.value!r}: {why}; fix that line (oldest first, X.Y entries, +PTX on "
                    "the newest only: docs/guides/change-cuda-architectures.md)",
                )
            )
    return found


def architectures(meta_text: str) -> list[str]:
    """Every architecture any well-formed list of the recipe names, oldest first (``"8.7"``, no ``+PTX``)."""
    found: set[str] = set()
    for arch_line in arch_lines(meta_text):
        if arch_line.value and problem(arch_line.value) is None:
            found |= {arch.removesuffix("+PTX") for arch in arch_line.value.split(";")}
    return sorted(found, key=arch_key)
