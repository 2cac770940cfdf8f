"""feedstock_tools.maintainer.patch_check's rules besides the hunk verdicts: what the patch tests reject,
``check`` reports (a hand-edited hunk header or diffstat, a header's "not verified" entries naming
nothing). The offset, blob and undeclared-hunk rules on the real patches: tests/maintainer/test_check.py.
"""

from __future__ import annotations

from feedstock_tools.maintainer.patch_check import declaration_problems, diffstat_problem, numbering_problems
from feedstock_tools.maintainer.patch_hunks import parse_patch

HEADER = """\
From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
Subject: [PATCH] f: two changes

Why: a test.
{declared}
---
 f.txt | 2 ++
 1 file changed, 2 insertions(+)

"""
# two hunks of one file, each adding a line: the second hunk's new side starts one line later
DIFF = """\
diff --git a/f.txt b/f.txt
--- a/f.txt
+++ b/f.txt
@@ -2,2 +2,3 @@
 line 2
+added a
 line 3
@@ -10,2 +{second},3 @@
 line 10
+added b
 line 11
"""


def patch(second: int = 11, declared: str = "", stat: str = "2 insertions(+)") -> str:
    text = HEADER.format(declared=declared) + DIFF.format(second=second)
    return text.replace("2 insertions(+)", stat)


def test_a_well_made_patch_has_no_problem() -> None:
    text = patch()
    diffs = parse_patch(text)
    assert numbering_problems(diffs) == []
    assert diffstat_problem(text, diffs) is None
    assert declaration_problems(text, diffs, "1.2.3") == []


def test_a_hunk_renumbered_by_hand_on_its_new_side_is_named() -> None:
    (problem,) = numbering_problems(parse_patch(patch(second=10)))
    assert problem.startswith("f.txt@10: '@@ -10 +10' should say +11 after the earlier hunks of f.txt")


def test_a_diffstat_that_no_longer_counts_the_diff_is_named() -> None:
    text = patch(stat="1 insertion(+)")
    problem = diffstat_problem(text, parse_patch(text))
    assert problem is not None
    assert "says 1 file(s), 1 insertion(s), 0 deletion(s); the diff has 1, 2, 0" in problem


def test_not_verified_entries_name_hunks_under_the_releases_sentence() -> None:
    declared = "\nNot verified against 1.2.3:\nnot verified: f.txt@10 (no text)\n"
    text = patch(declared=declared)
    assert declaration_problems(text, parse_patch(text), "1.2.3") == []
    (wrong_release,) = declaration_problems(text, parse_patch(text), "1.2.4")
    assert "without a 'Not verified against 1.2.4' sentence" in wrong_release
    text = patch(declared=declared.replace("f.txt@10", "f.txt@9"))
    (no_hunk,) = declaration_problems(text, parse_patch(text), "1.2.3")
    assert (
        no_hunk
        == "the header's 'not verified: f.txt@9' names no hunk of the patch (its hunks: f.txt@10, f.txt@2)"
    )
