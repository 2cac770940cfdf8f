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

from feedstock_tools.maintainer.patch_entries import read_entries
from feedstock_tools.maintainer.patch_evidence import (
    FIXTURES,
    Blob,
    blob_ids,
    evidence_fixture,
    preimage_fixture,
    read_segments,
)
from feedstock_tools.maintainer.patch_hunks import (
    FileDiff,
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
# A patch header's "not verified: <path>@<line> (<why>)" entries (docs/reference/patches.md).
_NOT_VERIFIED = re.compile(r"not verified: (\S+)@(\d+) \(([^)]+)\)")
# git's "index <pre-image>..<post-image> [mode]" line of a file diff
_INDEX = re.compile(r"^index ([0-9a-f]+)\.\.([0-9a-f]+)")
# `git format-patch --abbrev=11`, the documented command (docs/guides/add-a-patch.md): an id git can still
# tell apart in PyTorch's history and the length conda-forge's patches and the evidence files carry. git's
# default abbreviation grows with the repository's object count (7 digits in a small or shallow clone).
BLOB_DIGITS = 11
# git's diffstat summary under the commit message
_DIFFSTAT = re.compile(
    r"^ (\d+) files? changed(?:, (\d+) insertions?\(\+\))?(?:, (\d+) deletions?\(-\))?$", re.MULTILINE
)
HOW_TO_MAKE = "docs/guides/add-a-patch.md"


@dataclass(frozen=True)
class PatchProblem:
    """A rule the patch tests hold a patch to, broken: ``check`` reports each as a finding."""

    patch: str  # as meta.yaml lists it
    rule: str  # patch-offset | patch-unverified | patch-blob | patch-format
    message: str


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
    problems: tuple[PatchProblem, ...] = ()

    @property
    def preimage(self) -> bool:
        """Whether the evidence is the verified pre-image of the version (the text the patches were made
        against: offsets and undeclared unknown hunks are problems), not what a bump read from wheels."""
        return self.evidence == preimage_fixture(self.version, self.evidence.parent)

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
    return {entry.path: f"[{entry.selector}]" if entry.selector else "" for entry in read_entries(meta_text)}


def not_verified(patch_text: str) -> dict[str, str]:
    """The header's "not verified" entries: ``path@line`` -> why."""
    message = " ".join(patch_text.split("\n---\n", 1)[0].split())
    return {f"{path}@{line}": why for path, line, why in _NOT_VERIFIED.findall(message)}


def index_ids(diff: FileDiff) -> tuple[str, str] | None:
    """The (pre-image, post-image) blob ids of the diff's ``index`` line; None without one."""
    for line in diff.header:
        match = _INDEX.match(line)
        if match:
            return match[1], match[2]
    return None


def blob_problems(diffs: Sequence[FileDiff], blobs: Mapping[str, Blob]) -> list[str]:
    """The ``index`` lines against the rules: every pre-image id at least BLOB_DIGITS long (an all-zero one,
    a new file's, names nothing); where the evidence names the file's blob, the same id, and a file the
    evidence holds whole named by one (which file the hunks were made against)."""
    found = []
    for diff in diffs:
        path = diff.old_path or diff.path
        ids = index_ids(diff)
        known = blobs.get(path)
        if ids is None:
            if known is not None and known.whole:
                found.append(
                    f"{path}: no 'index' line naming its pre-image blob {known.blob} (the evidence holds "
                    f"the file whole); make the patch with git format-patch --abbrev={BLOB_DIGITS} "
                    f"({HOW_TO_MAKE})"
                )
            continue
        pre = ids[0]
        if set(pre) == {"0"}:
            continue
        if len(pre) < BLOB_DIGITS:
            found.append(
                f"{path}: the 'index' line abbreviates the pre-image blob to {len(pre)} digits ({pre}), the "
                f"evidence and the patch tests want {BLOB_DIGITS}; make the patch with git format-patch "
                f"--abbrev={BLOB_DIGITS} ({HOW_TO_MAKE})"
            )
        elif known is not None and not (pre.startswith(known.blob) or known.blob.startswith(pre)):
            found.append(
                f"{path}: the 'index' line names pre-image blob {pre}, the evidence's {path} is blob "
                f"{known.blob}: the patch was made against other text; make it again on the release's tag"
            )
    return found


def numbering_problems(diffs: Sequence[FileDiff]) -> list[str]:
    """Hunks whose new-side line does not follow the earlier hunks of their file (GNU patch and git apply
    look for a hunk from its new-side line; ``git format-patch`` always gets it right, a hand edit not)."""
    found = []
    for diff in diffs:
        delta = 0
        for hunk in diff.hunks:
            if hunk.old_start and hunk.new_start != hunk.old_start + delta:
                found.append(
                    f"{hunk.name()}: '@@ -{hunk.old_start} +{hunk.new_start}' should say +"
                    f"{hunk.old_start + delta} after the earlier hunks of {diff.path}; make the patch again"
                )
            delta += len(hunk.new_lines) - len(hunk.old_lines)
    return found


def diffstat_problem(text: str, diffs: Sequence[FileDiff]) -> str | None:
    """The diffstat's summary line against the diff itself (a hand-edited hunk leaves it stale)."""
    match = _DIFFSTAT.search(text.split("\ndiff --git ", 1)[0])
    if match is None:
        return None
    stated = (int(match[1]), int(match[2] or 0), int(match[3] or 0))
    hunks = [hunk for diff in diffs for hunk in diff.hunks]
    counted = (
        len(diffs),
        sum(line[0] == "+" for hunk in hunks for line in hunk.lines),
        sum(line[0] == "-" for hunk in hunks for line in hunk.lines),
    )
    if stated == counted:
        return None
    return (
        f"the diffstat says {stated[0]} file(s), {stated[1]} insertion(s), {stated[2]} deletion(s); the diff "
        f"has {counted[0]}, {counted[1]}, {counted[2]}; make the patch again ({HOW_TO_MAKE})"
    )


def declaration_problems(patch_text: str, diffs: Sequence[FileDiff], version: str) -> list[str]:
    """The header's "not verified" entries: each names a hunk of the patch, under a sentence that says
    against which release."""
    hunks = {hunk.name() for diff in diffs for hunk in diff.hunks}
    entries = not_verified(patch_text)
    found = [
        f"the header's 'not verified: {name}' names no hunk of the patch (its hunks: "
        f"{', '.join(sorted(hunks))})"
        for name in entries
        if name not in hunks
    ]
    message = patch_text.split("\n---\n", 1)[0]
    if entries and f"Not verified against {version}" not in " ".join(message.split()):
        found.append(
            f"the header declares hunks not verified without a 'Not verified against {version}' sentence "
            "before them"
        )
    return found


@dataclass(frozen=True)
class _Evidence:
    """What the patches of one version are judged against."""

    file: Path
    version: str
    lines: Mapping[str, FileText]
    preimage: bool  # the verified pre-image (offsets and undeclared unknown hunks are problems)
    blobs: Mapping[str, Blob]  # the pre-image's blob ids (none for a bump's evidence: a newer release's)

    @classmethod
    def of(cls, version: str, fixtures: Path) -> _Evidence:
        file = evidence_fixture(version, fixtures)
        if not file.is_file():
            return cls(file, version, {}, False, {})
        preimage = file == preimage_fixture(version, fixtures)
        blobs = blob_ids(file.read_text(encoding="utf-8")) if preimage else {}
        return cls(file, version, read_segments(file), preimage, blobs)


def _hunk_problem(
    row: HunkRow, alone: Judgement, declared: Mapping[str, str], evidence: _Evidence
) -> str | None:
    """Against the pre-image: a hunk that applies only at an offset, an unknown one its header does not
    declare, a declared one the evidence holds."""
    if row.verdict is Verdict.APPLIES and alone.offset:
        return (
            f"{row.hunk}: applies at line {alone.line} ({alone.offset:+d} lines), not at the line its @@ "
            "names: git apply would take it, the patch tests do not; renumber the hunk by making the patch "
            f"again on the release's tag ({HOW_TO_MAKE})"
        )
    if row.verdict is Verdict.UNKNOWN and row.hunk not in declared:
        return (
            f"{row.hunk}: {row.detail}, and the header does not declare it: add its upstream lines to "
            f"{evidence.file.name} (python -m feedstock_tools patches --source <the release's tree>), or "
            f"'not verified: {row.hunk} (why)' under a 'Not verified against {evidence.version}' sentence "
            f"of the header ({HOW_TO_MAKE})"
        )
    if row.verdict is not Verdict.UNKNOWN and row.hunk in declared:
        return (
            f"{row.hunk}: the header declares it not verified, but the evidence holds its lines (it "
            f"{row.verdict.value}): drop the 'not verified:' entry"
        )
    return None


def patch_problems(
    patch: str, text: str, rows: Sequence[HunkRow], alone: Sequence[Judgement], evidence: _Evidence
) -> list[PatchProblem]:
    """The rules of the patch tests, for one patch (its rows and its hunks judged alone)."""
    diffs = parse_patch(text)
    format_lines = numbering_problems(diffs) + [line for line in [diffstat_problem(text, diffs)] if line]
    found = [PatchProblem(patch, "patch-format", line) for line in format_lines]
    found += [PatchProblem(patch, "patch-blob", line) for line in blob_problems(diffs, evidence.blobs)]
    if evidence.preimage:
        declared = not_verified(text)
        found += [
            PatchProblem(patch, "patch-unverified", line)
            for line in declaration_problems(text, diffs, evidence.version)
        ]
        for row, judgement in zip(rows, alone, strict=True):
            line = _hunk_problem(row, judgement, declared, evidence)
            if line:
                rule = "patch-offset" if row.verdict is Verdict.APPLIES else "patch-unverified"
                found.append(PatchProblem(patch, rule, line))
    return found


def check_patch_series(
    recipe_dir: Path, version: str, series: Mapping[str, Sequence[str]], fixtures: Path | None = None
) -> PatchReport:
    """Judge the listed patches against the pre-image text of ``version``.

    ``series``: configuration -> the patches its rendered ``source.patches`` lists, in order. A patch that
    no configuration applies is judged alone all the same.
    """
    known = _Evidence.of(version, fixtures or FIXTURES)
    evidence = known.lines
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
        text_now: Mapping[str, FileText] = evidence
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
    problems: list[PatchProblem] = []
    for patch, judgements in alone.items():
        declared = not_verified(texts[patch])
        patch_rows = []
        for judgement in judgements:
            final, where = worst[(patch, judgement.hunk)]
            detail = final.detail + where
            if final.verdict is Verdict.UNKNOWN and judgement.hunk.name() in declared:
                detail += f"; header: not verified ({declared[judgement.hunk.name()]})"
            patch_rows.append(
                HunkRow(patch, selectors.get(patch, ""), judgement.hunk.name(), final.verdict, detail)
            )
        rows += patch_rows
        problems += patch_problems(patch, texts[patch], patch_rows, judgements, known)
    return PatchReport(version, known.file, tuple(rows), tuple(unreadable), tuple(problems))
