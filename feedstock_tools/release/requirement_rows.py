"""The pytorch output's run requirements brought to the release's ``Requires-Dist``.

Each requirement of the wheels (extras left out) is mapped to its conda name (the recipe's own spelling, else
``deps``' table) and its lower bound written into the recipe's run line (``~=3.9.0`` -> ``3.9.*``; the
recipe's own upper bounds stay). A requirement may have one line per CUDA series: PyPI's Linux wheel is one
CUDA build (its ``torch/version.py``), and a package that follows the CUDA toolkit's major version
(``cuda-bindings <14,>=13.0.3`` in the CUDA 13.0 wheel: cuda-bindings' major.minor are the toolkit's, as
NVIDIA's maintainer says in pytorch/pytorch#156424) speaks for the configurations of that CUDA major only.
Lines for another CUDA major are kept as the recipe has them, and each configuration needs a line of its
own series (docs/guides/bump-a-release.md, "Per-CUDA-series run requirements").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from feedstock_tools.common.configuration import Configuration
from feedstock_tools.common.feedstock import Feedstock
from feedstock_tools.conda.selectors import evaluate_selector, selector_namespace
from feedstock_tools.maintainer.deps import DEPENDENCIES
from feedstock_tools.maintainer.upstream_versions import normalise_name
from feedstock_tools.maintainer.version_compare import version_numbers
from feedstock_tools.release import recipe_edit
from feedstock_tools.release.recipe_edit import RunLine
from feedstock_tools.release.release_metadata import Release, release_cuda, requirements
from feedstock_tools.release.rows import CHANGED, PERSON, SAME, Row

# Requires-Dist names conda-forge's CUDA packages stand for: the recipe gets them through the run_exports
# of its CUDA -dev host packages, so they are compared in the CUDA rows, not as run requirements.
CUDA_STACK = re.compile(r"^(cuda-toolkit|nvidia-.*)$")
# What upstream's CUDA builds that PyPI does not carry (PyPI has the default CUDA only) require of a
# CUDA-series package, by CUDA major, as a conda spec: cuda-bindings ==12.9.4 for the CUDA 12.6, 12.8 and
# 12.9 wheels (upstream's .github/scripts/generate_binary_build_matrix.py, PYTORCH_EXTRA_INSTALL_REQUIREMENTS,
# read at a 2.10-era commit; pytorch/pytorch#188594 restricts that 12.9 entry on release/2.13, so it is still
# there), and conda-forge's cuda-bindings 12.9.x (cuda-python-feedstock's 12.9 branch, 624ab39: 12.9.7) runs
# on every CUDA 12. The bound is the floor of that series: conda-forge's builds are newer than 12.9.4.
OTHER_SERIES: dict[str, dict[str, str]] = {"cuda-bindings": {"12": ">=12.9.4,<13"}}
# A marker's platform_system and the selector flag conda-build spells it with
_MARKER_PLATFORMS = {"Linux": "linux", "Windows": "win", "Darwin": "osx"}


@dataclass(frozen=True)
class SelectedConfiguration:
    """A ``.ci_support`` configuration and the namespace a line selector of its build sees."""

    config: Configuration
    namespace: Mapping[str, Any]

    @property
    def cuda(self) -> str | None:  # None for a CPU build
        return self.config.cuda

    @property
    def pythons(self) -> tuple[str, ...]:  # "3.12", ...
        return tuple(python.version for python in self.config.pythons)

    def selects(self, line: RunLine) -> bool:
        return line.selector is None or evaluate_selector(line.selector, self.namespace)

    def label(self) -> str:
        subdir = self.config.target_platform
        return f"{subdir} CUDA {self.cuda}" if self.cuda else f"{subdir} CPU"


def configurations(feedstock: Feedstock) -> list[SelectedConfiguration]:
    found = []
    for config in feedstock.configurations():
        variant = {key: value for key in config if (value := config.first(key)) is not None}
        found.append(SelectedConfiguration(config, selector_namespace(config.target_platform, variant)))
    return found


def conda_spec(pypi_spec: str, recipe_spec: str) -> str:
    """The conda spec of a PyPI spec, keeping the recipe's upper bounds that upstream does not state:
    ``~=3.9.0`` -> ``3.9.*``; ``>=4.13.0`` with the recipe's ``>=4.10.0`` -> ``>=4.13.0``;
    ``>=77.0.3`` with ``>=77.0.3,<82`` -> ``>=77.0.3,<82``."""
    if pypi_spec == "*":
        return ""
    if pypi_spec.startswith("~="):
        parts = pypi_spec[2:].split(".")
        return ".".join(parts[:-1]) + ".*"
    upstream = sorted(pypi_spec.split(","), key=lambda part: not part.startswith(">"))
    kept = [part for part in recipe_spec.replace(" ", "").split(",") if part.startswith("<")]
    if any(part.startswith("<") for part in upstream):
        kept = []
    return ",".join(upstream + kept)


def cuda_series(pypi_spec: str, cuda: str | None) -> str | None:
    """The CUDA major a spec belongs to (``>=13.0.3,<14`` in a CUDA 13.0 wheel -> "13"), None for a spec
    that says nothing of the toolkit's series (``~=3.8.0`` of triton)."""
    if cuda is None:
        return None
    major = cuda.split(".")[0]
    lower = re.search(r">=\s*(\d+)\.", pypi_spec)
    upper = re.search(r"<\s*(\d+)(?:\.0)?(?:,|$)", pypi_spec)
    if lower and upper and lower[1] == major and int(upper[1]) == int(major) + 1:
        return major
    return None


def conda_name(pypi_name: str, recipe_names: Sequence[str]) -> str | None:
    for name in recipe_names:
        if normalise_name(name) == pypi_name:
            return name
    for dependency in DEPENDENCIES:
        if dependency.python_name and normalise_name(dependency.python_name) == pypi_name:
            return dependency.conda_names[0]
    return None


def marker_selector(marker: str, configs: Sequence[SelectedConfiguration]) -> tuple[str, list[str]]:
    """A PEP 508 marker as a conda line selector, and the marker's clauses that need no selector here
    (``python_version < "3.15"`` when no configuration builds 3.15)."""
    words: list[str] = []
    dropped: list[str] = []
    for clause in (c.strip() for c in marker.split(" and ") if c.strip()):
        platform = re.fullmatch(r"platform_system\s*==\s*['\"](\w+)['\"]", clause)
        below = re.fullmatch(r"python_version\s*<\s*['\"](\d+)\.(\d+)['\"]", clause)
        if platform and platform[1] in _MARKER_PLATFORMS:
            words.append(_MARKER_PLATFORMS[platform[1]])
        elif below:
            limit = (int(below[1]), int(below[2]))
            built = [p for c in configs for p in c.pythons]
            if all(tuple(map(int, p.split(".")[:2])) < limit for p in built):
                dropped.append(clause)
            else:
                words.append(f"py<{below[1]}{below[2]}")
        else:
            words.append(f"({clause}: translate by hand)")
    return " and ".join(words), dropped


def _series_lines(
    name: str, spec: str, marker: str, cuda: str, configs: Sequence[SelectedConfiguration]
) -> tuple[list[str], list[str]]:
    """The lines a CUDA-series requirement needs (one per CUDA version of the marker's platform), and the
    CUDA versions whose spec the release does not say (another major than PyPI's wheel)."""
    selector, _ = marker_selector(marker, configs)
    flag = selector.split(" and ")[0] if selector else ""
    versions = sorted(
        {c.cuda for c in configs if c.cuda and (not flag or c.namespace.get(flag))}, key=version_numbers
    )
    major = cuda.split(".", maxsplit=1)[0]
    lines, others = [], []
    for version in versions:
        where = " and ".join(w for w in (flag, f'cuda_compiler_version == "{version}"') if w)
        series = version.split(".", maxsplit=1)[0]
        known = OTHER_SERIES.get(name, {}).get(series)
        if series == major:
            lines.append(f"`- {name} {conda_spec(spec, '')}  # [{where}]`")
        elif known:
            lines.append(f"`- {name} {known}  # [{where}]`")
        else:
            lines.append(f"`- {name} <its {series}.x series>  # [{where}]`")
            others.append(version)
    return lines, others


def requirement_changes(release: Release, meta: str, feedstock: Feedstock) -> tuple[str, list[Row]]:
    """The pytorch output's run requirements brought to the wheels' Requires-Dist, and their rows."""
    configs = configurations(feedstock)
    lines = recipe_edit.run_requirement_lines(meta)
    names = list(dict.fromkeys(line.name for line in lines))
    cuda = release_cuda(release)
    rows = []
    upstream = requirements(release)
    for pypi_name, (spec, marker) in upstream.items():
        if CUDA_STACK.match(pypi_name):
            continue  # compared in the CUDA rows
        name = conda_name(pypi_name, names)
        shown = f"{pypi_name} {spec}" + (f" ; {marker}" if marker else "")
        series = cuda_series(spec, cuda)
        own = [line for line in lines if line.name == name]
        if not own:
            rows.append(
                _missing_row(
                    pypi_name,
                    name=name,
                    spec=spec,
                    marker=marker,
                    shown=shown,
                    series=series,
                    cuda=cuda,
                    configs=configs,
                )
            )
            continue
        for line in own:
            selected = [c for c in configs if c.selects(line)]
            others = sorted({c.cuda for c in selected if c.cuda and c.cuda.split(".")[0] != series})
            if series and selected and all(c.cuda and c.cuda.split(".")[0] != series for c in selected):
                rows.append(
                    Row(
                        "run requirement",
                        line.shown(),
                        line.spec or "(any)",
                        line.spec or "(any)",
                        SAME,
                        f"kept: for CUDA {', '.join(others)}; PyPI's wheel is CUDA {cuda} ({shown})",
                    )
                )
                continue
            new_spec = conda_spec(spec, line.spec)
            if new_spec != line.spec:
                meta = recipe_edit.set_run_requirement(meta, line.name, new_spec, line.selector)
            status = CHANGED if new_spec != line.spec else SAME
            rows.append(
                Row(
                    "run requirement",
                    line.shown(),
                    line.spec or "(any)",
                    new_spec or "(any)",
                    status,
                    f"from {shown}" if status == CHANGED else "",
                )
            )
            if series and others:
                rows.append(
                    Row(
                        "run requirement",
                        line.shown(),
                        f"also for CUDA {', '.join(others)}",
                        f"{name} {new_spec}: CUDA {series}'s series",
                        PERSON,
                        f"split the line in recipe/meta.yaml's pytorch run requirements, one per CUDA "
                        f"version: {'; '.join(_series_lines(name, spec, marker, cuda or '', configs)[0])} "
                        "(docs/guides/bump-a-release.md, 'Per-CUDA-series run requirements')",
                    )
                )
        if series:
            uncovered = [
                c.label()
                for c in configs
                if c.cuda and c.namespace.get("linux") and not any(c.selects(line) for line in own)
            ]
            if uncovered and "Linux" in marker:
                rows.append(
                    Row(
                        "run requirement",
                        f"{name}: configurations without a line",
                        "",
                        ", ".join(uncovered),
                        PERSON,
                        "add a line of each one's CUDA series to recipe/meta.yaml's pytorch run requirements "
                        "(docs/guides/bump-a-release.md, 'Per-CUDA-series run requirements')",
                    )
                )
    tracked = {normalise_name(d.python_name) for d in DEPENDENCIES if d.python_name}
    for name in names:
        if normalise_name(name) in tracked and normalise_name(name) not in upstream:
            first = next(line for line in lines if line.name == name)
            rows.append(
                Row(
                    "run requirement",
                    name,
                    first.spec or "(any)",
                    "(not required upstream)",
                    PERSON,
                    "drop its line(s) from recipe/meta.yaml's pytorch run requirements, or say in a comment "
                    "above it why it stays",
                )
            )
    return meta, rows


def _missing_row(
    pypi_name: str,
    *,
    name: str | None,
    spec: str,
    marker: str,
    shown: str,
    series: str | None,
    cuda: str | None,
    configs: Sequence[SelectedConfiguration],
) -> Row:
    """What to add for a requirement the recipe lacks: the line(s), their selectors, the records."""
    conda = name or pypi_name  # conda-forge spells most PyPI packages so: the row says to check it
    selector, dropped = marker_selector(marker, configs)
    note = f" (its marker's {' and '.join(dropped)} excludes no Python built here)" if dropped else ""
    if name is None:
        note += f" ({conda} is the PyPI name: check conda-forge's on its feedstock)"
    if series and cuda:
        lines, others = _series_lines(conda, spec, marker, cuda, configs)
        action = (
            f"add to recipe/meta.yaml's pytorch run requirements one line per CUDA version: "
            f"{'; '.join(lines)}{note}. PyPI's wheel is CUDA {cuda}; the other series are what upstream's "
            "CUDA wheels of that major require (not on PyPI; docs/guides/bump-a-release.md, "
            "'Per-CUDA-series run requirements')"
            + (f", unknown here for CUDA {', '.join(others)}: find it there" if others else "")
            + ". Then solve-check needs a record of each series in "
            "feedstock_tools/proofs/solve/solve_metadata.yaml (docs/guides/bump-a-release.md, "
            "'solve-check records')"
        )
    else:
        line = f"- {conda} {conda_spec(spec, '')}".rstrip() + (f"  # [{selector}]" if selector else "")
        action = (
            f"add `{line}` to recipe/meta.yaml's pytorch run requirements{note}, or a comment there saying "
            "why not; then a solve-check record in feedstock_tools/proofs/solve/solve_metadata.yaml if its "
            "spec has a bound (docs/guides/bump-a-release.md, 'solve-check records')"
        )
    return Row("run requirement", pypi_name, "(not in the recipe)", shown, PERSON, action)
