"""A patch's hunks judged against the text of the files they change: applies, conflicts or unknown.

The text may be whole files (a release's source, or the files a wheel ships verbatim) or only some lines of
a file at their line numbers (a fixture cut from such evidence). Judging follows ``git apply`` without
options: a hunk applies where all its old-side lines (context and removed) stand in the file, at the line
its ``@@`` header names or, failing that, at the nearest other line (git reports that as an offset); git
never fuzzes, so one differing line is a conflict. A line the evidence does not hold makes the hunk
unknown, unless the known lines already contradict it.

Used by ``check`` (every patch the recipe lists against ``tests/patch_fixtures``) and meant for ``bump``
(the patches against a new release's files). Standard library only.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NO_NEWLINE = "\\ No newline at end of file"


class PatchFormatError(ValueError):
    """The patch text is not a unified diff git could parse (the message names the line)."""


@dataclass(frozen=True)
class Hunk:
    path: str  # the file it changes (its new path; the old one for a deleted file)
    number: int  # 1-based, within its file's diff
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    lines: tuple[str, ...]  # the body: each line with its " ", "-" or "+" prefix, without the newline

    @property
    def old_lines(self) -> list[str]:
        """What the file must hold for the hunk to apply (context and removed lines)."""
        return [line[1:] for line in self.lines if line[0] in " -"]

    @property
    def new_lines(self) -> list[str]:
        return [line[1:] for line in self.lines if line[0] in " +"]

    @property
    def creates_file(self) -> bool:
        return self.old_start == 0 and self.old_count == 0

    def name(self) -> str:
        """How a report names it: ``path@line`` (the old-side line; a new file has none)."""
        return f"{self.path} (new file)" if self.creates_file else f"{self.path}@{self.old_start}"


@dataclass(frozen=True)
class FileDiff:
    old_path: str | None  # None: the patch creates the file
    new_path: str | None  # None: the patch deletes the file
    header: tuple[str, ...]  # from "diff --git" to "+++"
    hunks: tuple[Hunk, ...]

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""


def _strip_prefix(name: str) -> str | None:
    name = name.split("\t", 1)[0]
    if name == "/dev/null":
        return None
    return name[2:] if name[:2] in ("a/", "b/") else name


def parse_patch(text: str) -> list[FileDiff]:
    """The file diffs and hunks of a patch (``git format-patch`` mail or a bare diff).

    Hunk lengths come from the ``@@`` lines, as git reads them; a body shorter than its header says, or a
    body line with another prefix, raises :class:`PatchFormatError` naming the line.
    """
    lines = text.split("\n")
    diffs: list[FileDiff] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if not (line.startswith("diff --git ") or (line.startswith("--- ") and _next_is_plus(lines, index))):
            index += 1
            continue
        header, old_path, new_path, index = _read_header(lines, index)
        path = new_path or old_path or ""
        hunks: list[Hunk] = []
        while index < len(lines) and lines[index].startswith("@@"):
            hunk, index = _read_hunk(lines, index, path, len(hunks) + 1)
            hunks.append(hunk)
        diffs.append(FileDiff(old_path, new_path, tuple(header), tuple(hunks)))
    return diffs


def _read_header(lines: list[str], index: int) -> tuple[list[str], str | None, str | None, int]:
    """A file diff's header lines from ``index`` on, its old and new path, and where its hunks start."""
    header: list[str] = []
    old_path = new_path = None
    while index < len(lines) and not lines[index].startswith("@@"):
        header.append(lines[index])
        index += 1
        if header[-1].startswith("--- "):
            old_path = _strip_prefix(header[-1][4:])
        elif header[-1].startswith("+++ "):
            new_path = _strip_prefix(header[-1][4:])
            break
        if index < len(lines) and lines[index].startswith("diff --git "):
            break  # a diff without hunks (a mode change, a binary file): nothing to judge
    if header[0].startswith("diff --git ") and old_path is None and new_path is None:
        words = header[0].split()
        old_path, new_path = _strip_prefix(words[2]), _strip_prefix(words[3])
    return header, old_path, new_path, index


def _read_hunk(lines: list[str], index: int, path: str, number: int) -> tuple[Hunk, int]:
    """The hunk whose ``@@`` line is ``lines[index]``, and the index after it."""
    match = _HUNK_HEADER.match(lines[index])
    if not match:
        raise PatchFormatError(f"line {index + 1}: bad hunk header {lines[index]!r}")
    old_start, new_start = int(match[1]), int(match[3])
    old_count = int(match[2]) if match[2] is not None else 1
    new_count = int(match[4]) if match[4] is not None else 1
    old_left, new_left = old_count, new_count
    where = f"{path}: hunk @@ -{old_start}"
    body: list[str] = []
    index += 1
    while old_left or new_left:
        line = lines[index] if index < len(lines) else None
        if line == _NO_NEWLINE:
            index += 1
            continue
        kind = (line[:1] or " ") if line is not None else None  # some tools strip an empty context line
        if kind is None or kind not in " -+":
            raise PatchFormatError(f"line {index + 1}: {where} ends early, at {line!r}")
        if (kind in " -" and not old_left) or (kind in " +" and not new_left):
            raise PatchFormatError(f"line {index + 1}: {where} is longer than its @@ line says")
        body.append(kind + line[1:])
        old_left -= kind in " -"
        new_left -= kind in " +"
        index += 1
    if index < len(lines) and lines[index] == _NO_NEWLINE:
        index += 1
    return Hunk(path, number, old_start, old_count, new_start, new_count, tuple(body)), index


def _next_is_plus(lines: list[str], index: int) -> bool:
    return index + 1 < len(lines) and lines[index + 1].startswith("+++ ")


@dataclass(frozen=True)
class FileText:
    """What the evidence holds of one file: some or all of its lines, by 1-based line number."""

    lines: Mapping[int, str]
    whole: bool  # every line of the file is known (so the file ends after the last one)

    @classmethod
    def of_text(cls, text: str) -> FileText:
        """A whole file's text."""
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return cls(dict(enumerate(lines, start=1)), whole=True)

    @classmethod
    def of_segments(cls, segments: Iterable[tuple[int, Iterable[str]]]) -> FileText:
        """Known lines only: (first line number, its lines) per segment."""
        known: dict[int, str] = {}
        for first, segment in segments:
            for offset, line in enumerate(segment):
                known[first + offset] = line
        return cls(known, whole=False)


class Verdict(enum.Enum):
    APPLIES = "applies"
    CONFLICTS = "conflicts"
    UNKNOWN = "unknown text"


@dataclass(frozen=True)
class Judgement:
    hunk: Hunk
    verdict: Verdict
    detail: str  # where it applies, the line that differs, or which text is missing
    line: int | None = None  # the line it applies at

    @property
    def offset(self) -> int:
        """How far from its header's line it applies (0: exactly there, or it does not apply)."""
        return self.line - self.hunk.old_start if self.line is not None and self.hunk.old_count else 0


def _fits(known: Mapping[int, str], start: int, old: list[str]) -> bool:
    return all(known.get(start + i) == line for i, line in enumerate(old))


def _candidates(file: FileText, count: int) -> list[int]:
    """Start lines where all ``count`` lines are known."""
    if file.whole:
        return list(range(1, len(file.lines) - count + 2))
    return [start for start in file.lines if all(start + i in file.lines for i in range(count))]


def judge_hunk(hunk: Hunk, file: FileText | None) -> Judgement:
    """Whether ``hunk`` applies to ``file`` (None: the evidence has no text of the file)."""
    if hunk.creates_file:
        exists = file is not None
        verdict = Verdict.CONFLICTS if exists else Verdict.APPLIES
        return Judgement(
            hunk, verdict, "creates a file that already exists" if exists else "creates the file"
        )
    if file is None:
        return Judgement(hunk, Verdict.UNKNOWN, f"no text of {hunk.path} in the evidence")
    old = hunk.old_lines
    if not old:
        return _judge_insertion(hunk, file)
    start = hunk.old_start
    if _fits(file.lines, start, old):
        return Judgement(hunk, Verdict.APPLIES, f"at line {start}", start)
    found = sorted(
        (s for s in _candidates(file, len(old)) if s != start and _fits(file.lines, s, old)),
        key=lambda s: (abs(s - start), s),
    )
    if found:
        shift = found[0] - start
        return Judgement(hunk, Verdict.APPLIES, f"at line {found[0]} (offset {shift:+d} lines)", found[0])
    return _why_not(hunk, file, start, old)


def _judge_insertion(hunk: Hunk, file: FileText) -> Judgement:
    """A hunk without old lines (``diff -U0``) inserts after line ``old_start``, which must exist."""
    line = hunk.old_start
    if (file.whole and line <= len(file.lines)) or line in file.lines:
        return Judgement(hunk, Verdict.APPLIES, f"inserts after line {line}", line)
    verdict = Verdict.CONFLICTS if file.whole else Verdict.UNKNOWN
    return Judgement(hunk, verdict, f"line {line} is not in the text of {hunk.path}")


def _why_not(hunk: Hunk, file: FileText, start: int, old: list[str]) -> Judgement:
    """The judgement of a hunk found nowhere: the first known line that differs, else what is missing."""
    end = start + len(old) - 1
    for number, expected in enumerate(old, start=start):
        actual = file.lines.get(number)
        if actual is not None and actual != expected:
            detail = f"line {number} is {_short(actual)}, the hunk expects {_short(expected)}"
            return Judgement(hunk, Verdict.CONFLICTS, detail)
    if file.whole:
        detail = f"lines {start}-{end} run past the end of the file ({len(file.lines)} lines)"
        return Judgement(hunk, Verdict.CONFLICTS, detail)
    missing = [number for number in range(start, end + 1) if number not in file.lines]
    return Judgement(hunk, Verdict.UNKNOWN, f"lines {_ranges(missing)} of {hunk.path} not in the evidence")


def judge_patch(patch: str | Iterable[FileDiff], evidence: Mapping[str, FileText]) -> list[Judgement]:
    """Every hunk of a patch (its text, or its parsed diffs) judged against ``evidence`` (path -> text)."""
    return apply_patch(patch, evidence)[0]


def _short(line: str, width: int = 60) -> str:
    return repr(line if len(line) <= width else line[: width - 3] + "...")


def _ranges(numbers: list[int]) -> str:
    """``[3, 4, 5, 9]`` -> ``3-5, 9``."""
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)


def apply_hunks(file: FileText | None, judgements: Iterable[Judgement]) -> FileText | None:
    """The file's text after the hunks of one file diff, judged against ``file``: hunks that apply go in at
    their line; unknown ones at the line their header names (what git needs the real text to hold there);
    conflicting ones are left out. The hunks' old lines refer to ``file``, so they go in from the bottom up.
    """
    placed: list[tuple[int, Hunk]] = []
    for judgement in judgements:
        hunk = judgement.hunk
        if hunk.creates_file:
            return FileText.of_text("".join(line + "\n" for line in hunk.new_lines))
        if judgement.verdict is Verdict.CONFLICTS:
            continue
        at = judgement.line if judgement.line is not None else hunk.old_start
        placed.append((at + 1 if not hunk.old_lines else at, hunk))
    if file is None:
        return None
    lines = dict(file.lines)
    for at, hunk in sorted(placed, key=lambda item: item[0], reverse=True):
        old, new = len(hunk.old_lines), hunk.new_lines
        kept = {n: text for n, text in lines.items() if n < at}
        kept.update({n + len(new) - old: text for n, text in lines.items() if n >= at + old})
        kept.update({at + i: text for i, text in enumerate(new)})
        lines = kept
    return FileText(lines, file.whole)


def apply_patch(
    patch: str | Iterable[FileDiff], evidence: Mapping[str, FileText]
) -> tuple[list[Judgement], dict[str, FileText]]:
    """Judge every hunk against ``evidence`` and return the judgements with the evidence as it reads after
    the patch (see :func:`apply_hunks`), for judging the next patch of a series against it."""
    diffs = parse_patch(patch) if isinstance(patch, str) else list(patch)
    after = dict(evidence)
    judgements: list[Judgement] = []
    for diff in diffs:
        before = evidence.get(diff.old_path or diff.path)
        judged = [judge_hunk(hunk, before) for hunk in diff.hunks]
        judgements += judged
        text = apply_hunks(before, judged)
        after.pop(diff.old_path or diff.path, None)
        if text is not None and diff.new_path is not None:
            after[diff.new_path] = text
    return judgements, after
