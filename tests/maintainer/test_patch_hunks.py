"""feedstock_tools.maintainer.patch_hunks: the parse agrees with git's, and each verdict with git apply."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from feedstock_tools.common.errors import ToolError
from feedstock_tools.maintainer.patch_check import check_patch_series
from feedstock_tools.maintainer.patch_evidence import read_segments
from feedstock_tools.maintainer.patch_hunks import (
    FileText,
    PatchFormatError,
    Verdict,
    judge_patch,
    parse_patch,
)

PATCHES = sorted((Path(__file__).resolve().parents[2] / "recipe" / "patches").glob("*.patch"))
ORIGINAL = "".join(f"line {n}\n" for n in range(1, 21))


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.name[:4])
def test_parse_counts_what_git_apply_numstat_counts(patch):
    git = subprocess.run(
        ["git", "apply", "--numstat", str(patch)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    diffs = parse_patch(patch.read_text())
    ours = [
        f"{sum(line[0] == '+' for hunk in diff.hunks for line in hunk.lines)}\t"
        f"{sum(line[0] == '-' for hunk in diff.hunks for line in hunk.lines)}\t{diff.path}"
        for diff in diffs
    ]
    assert ours == git


def diff_of(tmp_path: Path, changed: str, name: str = "f.txt") -> str:
    """A real diff (git diff --no-index) of ORIGINAL against ``changed``, with git's a/ b/ names."""
    (tmp_path / "a").mkdir(exist_ok=True)
    (tmp_path / "b").mkdir(exist_ok=True)
    (tmp_path / "a" / name).write_text(ORIGINAL)
    (tmp_path / "b" / name).write_text(changed)
    out = subprocess.run(
        ["git", "diff", "--no-index", "--no-prefix", f"a/{name}", f"b/{name}"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    return out.replace(f"a/{name}", name).replace(f"b/{name}", name).replace(
        f"--- {name}", f"--- a/{name}").replace(f"+++ {name}", f"+++ b/{name}")  # fmt: skip


def git_applies(tmp_path: Path, target_text: str, patch: str) -> bool:
    tree = tmp_path / "tree"
    tree.mkdir(exist_ok=True)
    (tree / "f.txt").write_text(target_text)
    (tree / "p.patch").write_text(patch)
    return (
        subprocess.run(
            ["git", "apply", "--check", "p.patch"], cwd=tree, capture_output=True, check=False
        ).returncode
        == 0
    )


@pytest.mark.parametrize(
    ("target", "verdict", "offset"),
    [
        (ORIGINAL, Verdict.APPLIES, 0),
        ("extra\nextra\n" + ORIGINAL, Verdict.APPLIES, 2),
        (ORIGINAL.replace("line 9\n", "line nine\n"), Verdict.CONFLICTS, 0),
        (ORIGINAL.replace("line 10\n", "line ten\n"), Verdict.CONFLICTS, 0),
    ],
    ids=["exact", "offset", "context differs", "removed line differs"],
)
def test_verdict_on_a_whole_file_is_what_git_apply_says(tmp_path, target, verdict, offset):
    patch = diff_of(tmp_path, ORIGINAL.replace("line 10\n", "line 10 changed\n"))
    (judgement,) = judge_patch(patch, {"f.txt": FileText.of_text(target)})
    assert (judgement.verdict, judgement.offset) == (verdict, offset)
    assert git_applies(tmp_path, target, patch) == (verdict is Verdict.APPLIES)


def test_partial_text_judges_known_lines_and_names_the_missing_ones(tmp_path):
    patch = diff_of(tmp_path, ORIGINAL.replace("line 10\n", "line 10 changed\n"))
    known = {n: f"line {n}" for n in range(7, 14)}
    (full,) = judge_patch(patch, {"f.txt": FileText(known, whole=False)})
    assert full.verdict is Verdict.APPLIES and full.line == 7
    del known[8]
    (gap,) = judge_patch(patch, {"f.txt": FileText(known, whole=False)})
    assert (gap.verdict, gap.detail) == (Verdict.UNKNOWN, "lines 8 of f.txt not in the evidence")
    known[12] = "line twelve"
    (conflict,) = judge_patch(patch, {"f.txt": FileText(known, whole=False)})
    assert conflict.verdict is Verdict.CONFLICTS
    assert conflict.detail == "line 12 is 'line twelve', the hunk expects 'line 12'"
    (absent,) = judge_patch(patch, {})
    assert (absent.verdict, absent.detail) == (Verdict.UNKNOWN, "no text of f.txt in the evidence")


def test_a_new_file_applies_unless_the_evidence_holds_it():
    patch = (
        "diff --git a/n.txt b/n.txt\nnew file mode 100644\n--- /dev/null\n+++ b/n.txt\n"
        "@@ -0,0 +1,2 @@\n+a\n+b\n"
    )
    (created,) = judge_patch(patch, {})
    assert created.verdict is Verdict.APPLIES and created.hunk.creates_file
    (clash,) = judge_patch(patch, {"n.txt": FileText.of_text("a\n")})
    assert clash.verdict is Verdict.CONFLICTS


def test_a_hunk_shorter_than_its_header_is_a_format_error_naming_the_line():
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n line 1\n-line 2\n+line two\ndiff --git a/g b/g\n"
    with pytest.raises(PatchFormatError, match=r"^line 7: f.txt: hunk @@ -1 ends early"):
        parse_patch(patch)


PATCH_A = "--- a/f.txt\n+++ b/f.txt\n@@ -4,3 +4,3 @@\n line 4\n-line 5\n+line five\n line 6\n"
PATCH_B = "--- a/f.txt\n+++ b/f.txt\n@@ -5,3 +5,3 @@\n line 5\n-line 6\n+line six\n line 7\n"
PATCH_C = "--- a/g.txt\n+++ b/g.txt\n@@ -1,1 +1,1 @@\n-g\n+G\n"


def test_a_patch_whose_context_an_earlier_patch_of_the_series_changed_conflicts_there(tmp_path):
    """0002 applies alone, but not after 0001 (which changes its context line) in the series of the one
    configuration that takes both; 0003's file is not in the evidence."""
    recipe = tmp_path / "recipe"
    (recipe / "patches").mkdir(parents=True)
    for name, text in [("0001-a.patch", PATCH_A), ("0002-b.patch", PATCH_B), ("0003-c.patch", PATCH_C)]:
        (recipe / "patches" / name).write_text(text)
    (recipe / "meta.yaml").write_text(
        "source:\n  patches:\n    - patches/0001-a.patch  # [win]\n    - patches/0002-b.patch\n"
        "    - patches/0003-c.patch\n"
    )
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    (fixtures / "pytorch-1.0.0-preimage.txt").write_text(
        "# test evidence\n@@ f.txt 1 test\n" + "".join(f"line {n}\n" for n in range(1, 11))
    )
    all_three = ("patches/0001-a.patch", "patches/0002-b.patch", "patches/0003-c.patch")
    series = {"win": all_three, "linux": all_three[1:]}
    report = check_patch_series(recipe, "1.0.0", series, fixtures)
    rows = {(row.patch.split("/")[1][:4], row.selector, row.hunk): row for row in report.rows}
    assert list(rows) == [("0001", "[win]", "f.txt@4"), ("0002", "", "f.txt@5"), ("0003", "", "g.txt@1")]
    assert rows["0001", "[win]", "f.txt@4"].verdict is Verdict.APPLIES
    second = rows["0002", "", "f.txt@5"]
    assert second.verdict is Verdict.CONFLICTS
    assert second.detail == "line 5 is 'line five', the hunk expects 'line 5' (in win's series, after 0001)"
    assert rows["0003", "", "g.txt@1"].verdict is Verdict.UNKNOWN
    assert (
        report.summary()
        == "patches: 3 patch(es), 3 hunk(s) against 1.0.0: 1 apply, 1 conflict, 1 unknown text"
    )
    missing = check_patch_series(recipe, "9.9.9", series, fixtures)
    assert {row.verdict for row in missing.rows} == {Verdict.UNKNOWN}
    assert missing.summary().endswith("3 unknown text (no pytorch-9.9.9-preimage.txt in fixtures/)")


def test_a_broken_evidence_file_is_one_line_naming_the_file_and_line(tmp_path):
    fixture = tmp_path / "pytorch-1.0.0-preimage.txt"
    fixture.write_text("# header\n@@ f.txt 1 test\nline 1\n@@ f.txt one test\nline 2\n")
    with pytest.raises(ToolError, match=rf"^{re.escape(str(fixture))}:4: '@@ f.txt one test' is neither"):
        read_segments(fixture)
    fixture.write_text("stray line\n@@ f.txt 1 test\nline 1\n")
    with pytest.raises(ToolError, match=rf"^{re.escape(str(fixture))}:1: a line outside any '@@' segment"):
        read_segments(fixture)
    fixture.write_text("# header\n@@ f.txt 3 test\nthree\nfour\n@@ f.txt 9 test\nnine\n")
    assert read_segments(fixture)["f.txt"] == FileText({3: "three", 4: "four", 9: "nine"}, whole=False)
