"""Every patch hunk judged against the release's text where its wheels carry the file verbatim, and that text
written down as the patch evidence ``check`` reads for the release (one evidence, one verdict per hunk).

A wheel carries the installed headers, Caffe2's CMake modules and the Python sources byte for byte (the
2.13.0 wheel's share/cmake/Caffe2/{FindCUDAToolkit.cmake, public/cuda.cmake, public/utils.cmake} hash to the
pre-image blobs of conda-forge's 2.13.0 patches: shared/docs/pytorch-build-facts.md, "Corrections"), except
that the build wraps every header under torch/include in one guard line on top and three below
(tests/recipe/test_recipe_patches.py checks it on the 2.13.0 wheel): a header's line N + 1 is the source's
line N.

The evidence goes to ``tests/patch_fixtures/pytorch-<version>-from-wheels.txt`` in the format of
:mod:`feedstock_tools.maintainer.patch_evidence`: the lines around each hunk at their source line numbers,
each segment naming the wheel and member it was read from.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from feedstock_tools.maintainer import patch_evidence, patch_hunks
from feedstock_tools.release.release_metadata import Release
from feedstock_tools.release.rows import PERSON, SAME, Row

# Where a source file of a patch is in a wheel, when the wheel carries its text (.in templates are
# configured, not copied).
_WHEEL_PATHS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^cmake/Modules/(FindCUDAToolkit\.cmake)$"), r"torch/share/cmake/Caffe2/\1"),
    (re.compile(r"^cmake/public/(.+\.cmake)$"), r"torch/share/cmake/Caffe2/public/\1"),
    (re.compile(r"^aten/src/(ATen/.+\.(?:h|cuh))$"), r"torch/include/\1"),
    (re.compile(r"^(c10/.+\.h)$"), r"torch/include/\1"),
    (re.compile(r"^(torch/csrc/.+\.(?:h|hpp))$"), r"torch/include/\1"),
    (re.compile(r"^(torch/(?!csrc/).+\.py)$"), r"\1"),
)
HEADERS = "torch/include/"
HEADER_GUARD = "#if !defined(TORCH_STABLE_ONLY) && !defined(TORCH_TARGET_VERSION)"
HEADER_GUARD_END = 3  # "#else", "#error ...", "#endif ..." after the header's text and a newline
CONTEXT = 3  # lines kept around each hunk's lines


def wheel_member(source_path: str) -> str | None:
    for pattern, replacement in _WHEEL_PATHS:
        if pattern.match(source_path):
            return pattern.sub(replacement, source_path)
    return None


def patch_paths(root: Path) -> list[Path]:
    return sorted((root / "recipe" / "patches").glob("*.patch"))


@dataclass(frozen=True)
class SourceFile:
    """A patched source file as a release wheel carries it, at the source's line numbers."""

    path: str
    member: str
    wheel: str  # the wheel (or fixture set) it was read from
    text: patch_hunks.FileText
    blob: str | None  # git's blob id of the whole source file, where the whole file is known


def _unwrapped(member: str, text: patch_hunks.FileText) -> patch_hunks.FileText:
    """A wheel member's lines at the source's line numbers (headers lose the build's guard lines)."""
    if not member.startswith(HEADERS):
        return text
    first = text.lines.get(1)
    if first is not None and first != HEADER_GUARD:
        return text  # a header the build did not wrap
    last = max(text.lines) - HEADER_GUARD_END if text.whole else None
    if last is not None and text.lines.get(last) == "":
        last -= 1  # the newline the build puts before "#else" after the header's own last newline
    lines = {n - 1: line for n, line in text.lines.items() if n > 1 and (last is None or n <= last)}
    return patch_hunks.FileText(lines, text.whole)


def _blob(text: patch_hunks.FileText) -> str:
    data = "".join(text.lines[n] + "\n" for n in sorted(text.lines)).encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def release_sources(root: Path, release: Release) -> dict[str, SourceFile]:
    """Every file a listed patch changes that a wheel of the release carries, by source path."""
    found: dict[str, SourceFile] = {}
    for patch in patch_paths(root):
        for diff in patch_hunks.parse_patch(patch.read_text()):
            path = diff.old_path or diff.path
            member = wheel_member(path)
            read = release.file_text(member) if member and path not in found else None
            if read is None or member is None:
                continue
            subdir, text = read
            source = _unwrapped(member, text)
            blob = _blob(source) if source.whole else None
            found[path] = SourceFile(path, member, release.wheels[subdir].name, source, blob)
    return found


def evidence_lines(root: Path, sources: dict[str, SourceFile]) -> dict[str, list[int]]:
    """The lines of each source file the evidence keeps: each hunk's lines where it applies (or where it
    expected them, when it conflicts), with CONTEXT lines around them."""
    keep: dict[str, set[int]] = {}
    for patch in patch_paths(root):
        for diff in patch_hunks.parse_patch(patch.read_text()):
            source = sources.get(diff.old_path or diff.path)
            if source is None:
                continue
            lines = keep.setdefault(source.path, set())
            for hunk in diff.hunks:
                start = patch_hunks.judge_hunk(hunk, source.text).line or hunk.old_start
                lines.update(range(max(1, start - CONTEXT), start + len(hunk.old_lines) + CONTEXT))
    return {
        path: sorted(n for n in numbers if n in sources[path].text.lines) for path, numbers in keep.items()
    }


def evidence_text(version: str, root: Path, sources: dict[str, SourceFile]) -> str:
    """The patch evidence of ``version`` from its wheels, in patch_evidence's format."""
    out = [
        f"# Lines of PyTorch {version} that the recipe's patches touch, read from the release's wheels by",
        f"# python -m feedstock_tools bump {version} (feedstock_tools/release/patch_rows.py): `check` judges",
        "# the patches against them for this release, as the bump did. Headers under torch/include are",
        "# read without the build's guard lines, so every line number is the source tree's.",
        "# Format (feedstock_tools/maintainer/patch_evidence.py): '@@ <path> <first line> <source>',",
        "# then the lines; '@@ <path> whole <wheel member> (blob X)' names a file the wheel ships whole.",
        "# Hunks on files no wheel carries are unknown until `git apply --check` on the tarball",
        "# (docs/guides/bump-a-release.md).",
    ]
    for path, source in sorted(sources.items()):
        if source.blob:
            out.append(f"@@ {path} whole {source.member} (blob {source.blob[:11]})")
    for path, numbers in sorted(evidence_lines(root, sources).items()):
        source = sources[path]
        segments: list[list[int]] = []
        for number in numbers:
            if segments and number == segments[-1][-1] + 1:
                segments[-1].append(number)
            else:
                segments.append([number])
        for segment in segments:
            first, last = segment[0], segment[-1]
            out.append(f"@@ {path} {first} wheel {source.wheel}:{source.member} lines {first}-{last}")
            out += [source.text.lines[n] for n in segment]
    return "\n".join(out) + "\n"


def evidence_path(root: Path, version: str) -> Path:
    return patch_evidence.wheels_fixture(version, root / "tests" / "patch_fixtures")


@dataclass(frozen=True)
class ReleaseEvidence:
    """What the bump read of the patched files from the release's wheels: the evidence file's text, and its
    segments as ``check`` reads them back."""

    text: str
    segments: Mapping[str, patch_hunks.FileText]
    sources: Mapping[str, SourceFile]


def release_evidence(root: Path, release: Release) -> ReleaseEvidence:
    sources = release_sources(root, release)
    text = evidence_text(release.version, root, sources)
    segments = patch_evidence.parse_segments(text, evidence_path(root, release.version))
    return ReleaseEvidence(text, segments, sources)


def patch_rows(root: Path, evidence: ReleaseEvidence) -> list[Row]:
    """Every hunk of every patch judged alone against the evidence the bump writes for the release, which
    ``check`` reads back: both judge each hunk on the same lines."""
    rows = []
    unknown = 0
    for patch in patch_paths(root):
        diffs = patch_hunks.parse_patch(patch.read_text())
        for judgement in patch_hunks.judge_patch(diffs, evidence.segments):
            verdict = judgement.verdict
            if verdict is patch_hunks.Verdict.UNKNOWN:
                unknown += 1
                continue
            source = evidence.sources.get(judgement.hunk.path)
            where = f" ({source.wheel}'s {source.member})" if source else ""
            status = SAME if verdict is patch_hunks.Verdict.APPLIES else PERSON
            rows.append(
                Row(
                    "patch",
                    f"{patch.name[:4]} {judgement.hunk.name()}",
                    verdict.value,
                    judgement.detail + where,
                    status,
                    ""
                    if status == SAME
                    else "refresh the hunk on the release's text (docs/guides/add-a-patch.md, 'Refresh or "
                    "drop one'), or drop the patch",
                )
            )
    if unknown:
        rows.append(
            Row(
                "patch",
                f"{unknown} hunks",
                "unknown",
                "their files are not in any wheel",
                PERSON,
                "on a machine with the tarball: tar xf pytorch-vVERSION.tar.gz, then git apply --check -v "
                "each recipe/patches/*.patch in it; refresh a patch that fails (docs/reference/patches.md, "
                "'What only the real source tree finishes')",
            )
        )
    return rows
