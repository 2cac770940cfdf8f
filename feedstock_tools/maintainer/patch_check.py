"""Every patch the recipe lists, applied to the upstream text the project holds: one row per hunk.

Each patch is judged alone against the release's text (its line numbers are written against it, as a
``git format-patch`` against the upstream tag makes them), then each configuration's series (the patches its
selectors keep, in ``meta.yaml``'s order) is applied in turn, as conda-build does, so a patch whose context
an earlier patch of the series changes conflicts too. The text is the release's evidence in
``tests/patch_fixtures/`` (:mod:`feedstock_tools.maintainer.patch_evidence`: the pre-image, else what ``bump``
read from the release's wheels); a hunk whose lines it lacks is
"unknown text", which only ``git apply --check`` in the real source tree settles (docs/reference/patches.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from feedstock_tools.maintainer.patch_evidence import FIXTURES, evidence_fixture, read_segments
from feedstock_tools.maintainer.patch_hunks import (
    FileText,
    Hunk,
    Judgement,
    PatchFormatError,
    Verdict,
    apply_patch,
    parse_patch,
)

# Worst first: a row shows the worst verdict any series gave its hunk.
_RANK = {Verdict.CONFLICTS: 0, Verdict.UNKNOWN: 1, Verdict.APPLIES: 2}
_LISTED_WITH_SELECTOR = re.compile(r"^\s*-\s+([^\s#]+\.(?:patch|diff))\b[^#\n]*(?:#\s*(\[.*\]))?", re.M)
# A patch header's "not verified: <path>@<line> (<why>)" entries (docs/reference/patches.md).
_NOT_VERIFIED = re.compile(r"not verified: (\S+)@(\d+) \(([^)]+)\)")


@dataclass(frozen=True)
class HunkRow:
    patch: str  # as meta.yaml lists it, relative to the recipe
    selector: str  # the line selector meta.yaml gives it ("" for every configuration)
    hunk: str  # path@line
    verdict: Verdict
    detail: str


@dataclass(frozen=True)
class PatchReport:
    version: str
    evidence: Path
    rows: tuple[HunkRow, ...]
    unreadable: tuple[tuple[str, str], ...]  # (patch, why) for a patch that is not a diff git could parse

    def summary(self) -> str:
        counts = {verdict: sum(row.verdict is verdict for row in self.rows) for verdict in Verdict}
        patches = len({row.patch for row in self.rows})
        line = (
            f"patches: {patches} patch(es), {len(self.rows)} hunk(s) against {self.version}: "
            f"{counts[Verdict.APPLIES]} apply, {counts[Verdict.CONFLICTS]} conflict, "
            f"{counts[Verdict.UNKNOWN]} unknown text"
        )
        if not self.evidence.is_file():
            line += f" (no {self.evidence.name} in {self.evidence.parent.name}/)"
        return line

    def table(self) -> list[str]:
        """The rows as aligned text lines, a header line first."""
        header = ("patch", "for", "hunk", "verdict", "detail")
        cells = [
            (_number(row.patch), row.selector or "all", row.hunk, row.verdict.value, row.detail)
            for row in self.rows
        ]
        widths = [max(len(cell[i]) for cell in [header, *cells]) for i in range(4)]
        return [
            "  ".join(cell[i].ljust(widths[i]) for i in range(4)) + "  " + cell[4]
            for cell in [header, *cells]
        ]


def _number(patch: str) -> str:
    """``patches/0011-cmake-....patch`` -> ``0011``."""
    return Path(patch).name.split("-", 1)[0]


def patch_selectors(meta_text: str) -> dict[str, str]:
    """Listed patch -> its line selector (``[win]``), "" where it has none."""
    return {match[1]: match[2] or "" for match in _LISTED_WITH_SELECTOR.finditer(meta_text)}


def not_verified(patch_text: str) -> dict[str, str]:
    """The header's "not verified" entries: ``path@line`` -> why."""
    message = " ".join(patch_text.split("\n---\n", 1)[0].split())
    return {f"{path}@{line}": why for path, line, why in _NOT_VERIFIED.findall(message)}


def check_patch_series(
    recipe_dir: Path, version: str, series: Mapping[str, Sequence[str]], fixtures: Path | None = None
) -> PatchReport:
    """Judge the listed patches against the pre-image text of ``version``.

    ``series``: configuration -> the patches its rendered ``source.patches`` lists, in order. A patch that
    no configuration applies is judged alone all the same.
    """
    evidence_file = evidence_fixture(version, fixtures or FIXTURES)
    evidence: dict[str, FileText] = read_segments(evidence_file) if evidence_file.is_file() else {}
    selectors = patch_selectors((recipe_dir / "meta.yaml").read_text(encoding="utf-8"))
    texts: dict[str, str] = {}
    unreadable: list[tuple[str, str]] = []
    for patch in dict.fromkeys([*selectors, *(p for patches in series.values() for p in patches)]):
        path = recipe_dir / patch
        if not path.is_file():
            continue  # check's patch-missing rule reports it
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            parse_patch(text)
        except PatchFormatError as exc:
            unreadable.append((patch, str(exc)))
            continue
        texts[patch] = text
    alone = {patch: apply_patch(text, evidence)[0] for patch, text in texts.items()}
    worst: dict[tuple[str, Hunk], tuple[Judgement, str]] = {
        (patch, j.hunk): (j, "") for patch, judgements in alone.items() for j in judgements
    }
    for config, patches in sorted(series.items()):
        text_now: dict[str, FileText] = evidence
        touched: dict[str, list[str]] = {}  # path -> the series' earlier patches that changed it
        for patch in patches:
            if patch not in texts:
                continue
            judgements, text_now = apply_patch(texts[patch], text_now)
            for judgement in judgements:
                key = (patch, judgement.hunk)
                if _RANK[judgement.verdict] < _RANK[worst[key][0].verdict]:
                    earlier = ", ".join(touched.get(judgement.hunk.path, [])) or "no earlier patch"
                    worst[key] = (judgement, f" (in {config}'s series, after {earlier})")
            for path in dict.fromkeys(j.hunk.path for j in judgements):
                touched.setdefault(path, []).append(_number(patch))
    rows = []
    for patch, judgements in alone.items():
        declared = not_verified(texts[patch])
        for judgement in judgements:
            final, where = worst[(patch, judgement.hunk)]
            detail = final.detail + where
            if final.verdict is Verdict.UNKNOWN and judgement.hunk.name() in declared:
                detail += f"; header: not verified ({declared[judgement.hunk.name()]})"
            rows.append(
                HunkRow(patch, selectors.get(patch, ""), judgement.hunk.name(), final.verdict, detail)
            )
    return PatchReport(version, evidence_file, tuple(rows), tuple(unreadable))
