"""``check``: the real recipe passes; a deliberately broken copy yields one finding per break."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from bump_fixtures import copy_feedstock
from recipe_matrix import RECIPE_VERSION as VERSION
from recipe_matrix import ci_config

from feedstock_tools.__main__ import main
from feedstock_tools.common.configuration import read_configuration
from feedstock_tools.conda.recipe_render import render_recipe
from feedstock_tools.maintainer.check import (
    Finding,
    check_anchor_parity,
    check_ci_support,
    check_recipe_v1,
    current_renders,
    listed_patches,
    patch_header_problem,
    print_patch_report,
    run_checks,
)
from feedstock_tools.maintainer.patch_check import PatchReport
from feedstock_tools.maintainer.patch_hunks import Hunk, parse_patch

REPO = Path(__file__).resolve().parents[2]
# This project's copy of conda-forge's pinning, named explicitly (the tools look elsewhere by default).
DEFAULT_PINNING = REPO.parent / "shared" / "data" / "conda-forge-pinning"
# What a rerender and the check read: the recipe, CI files, conda-smithy's settings and the patch evidence.
FEEDSTOCK_PATHS = ("recipe", ".ci_support", "conda-forge.yml", ".github", "tests/patch_fixtures")

GOOD_PATCH = """\
From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: Someone <someone@example.org>
Date: Sat, 21 Nov 2026 12:00:00 +0000
Subject: [PATCH] example: a well-formed patch

Why: the test needs a patch with a proper header.

Upstream status: not submitted (test data).

Context verified against: nothing (test data).
---
 a.txt | 1 +
 1 file changed, 1 insertion(+)

diff --git a/a.txt b/a.txt
"""


@pytest.fixture(scope="module")
def real_findings() -> list[Finding]:
    return run_checks(REPO, DEFAULT_PINNING)


def test_real_recipe_is_consistent(real_findings: list[Finding]) -> None:
    assert [finding.line() for finding in real_findings] == []


def _replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{path.name} no longer contains {old!r}: update this test's break"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


@dataclass
class BrokenCopy:
    findings: set[Finding]  # the findings the breaks added
    patch_report: PatchReport
    corrupted: tuple[str, Hunk]  # the listed patch whose first hunk's context was changed, and that hunk


@pytest.fixture(scope="module")
def broken_copy(tmp_path_factory: pytest.TempPathFactory, real_findings: list[Finding]) -> BrokenCopy:
    """A copy of the feedstock with one deliberate break per rule."""
    root = copy_feedstock(tmp_path_factory.mktemp("broken") / "feedstock", REPO, FEEDSTOCK_PATHS)
    recipe = root / "recipe"
    meta = recipe / "meta.yaml"
    listed = listed_patches(meta.read_text(encoding="utf-8"))
    (recipe / "patches").mkdir(exist_ok=True)
    # patch-unlisted: a patch file nobody lists.
    (recipe / "patches" / "0099-unlisted.patch").write_text(GOOD_PATCH)
    # patch-missing: a listed patch that does not exist.
    _replace_once(meta, "  patches:\n", "  patches:\n    - patches/0098-not-there.patch\n")
    # patch-header: the first listed patch as a bare diff.
    (recipe / listed[0]).write_text("diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n")
    # patch-conflict: the second listed patch's first hunk expects a context line the evidence does not have.
    corrupted = recipe / listed[1]
    lines = corrupted.read_text().split("\n")
    hunk = parse_patch(corrupted.read_text())[0].hunks[0]
    first_hunk_line = next(i for i, line in enumerate(lines) if line.startswith("@@")) + 1
    context = next(i for i, line in enumerate(hunk.lines) if line.startswith(" ") and line.strip())
    lines[first_hunk_line + context] += " # changed"
    corrupted.write_text("\n".join(lines))
    # patch-offset: the first hunk of 0011 renumbered 16 lines up (its text still found 16 lines below, where
    # git apply would take it)
    offset = next(recipe / path for path in listed if Path(path).name.startswith("0011-"))
    offset_hunk = parse_patch(offset.read_text())[0].hunks[0]
    at = f"@@ -{offset_hunk.old_start},{offset_hunk.old_count} +{offset_hunk.new_start},"
    moved = f"@@ -{offset_hunk.old_start - 16},{offset_hunk.old_count} +{offset_hunk.new_start - 16},"
    _replace_once(offset, at, moved)
    # patch-blob: git format-patch's default abbreviation in a small clone (7 digits) on a whole file's diff
    short = next(recipe / path for path in listed if Path(path).name.startswith("0015-"))
    (pre, post) = re.search(r"^index ([0-9a-f]+)\.\.([0-9a-f]+)", short.read_text(), re.M).groups()
    _replace_once(short, f"index {pre}..{post}", f"index {pre[:7]}..{post[:7]}")
    # patch-unverified: a declared unknown hunk of 0004 no longer declared
    undeclared = next(recipe / path for path in listed if Path(path).name.startswith("0004-"))
    entry = next(line for line in undeclared.read_text().splitlines() if line.endswith("(same)"))
    _replace_once(undeclared, entry + "\n", "")
    # cuda-arch-list: one list mistyped (two entries swapped)
    arch_line = re.search(r'^\{% set cuda_arch_list = "(\d+\.\d);(\d+\.\d);', meta.read_text(), re.M)
    swapped = arch_line[0].replace(f"{arch_line[1]};{arch_line[2]}", f"{arch_line[2]};{arch_line[1]}")
    _replace_once(meta, arch_line[0], swapped)
    # check reads the evidence named by the recipe's version; the one fixture holds the text the patches
    # were made against, which is what this copy's patches are judged against whatever the version says.
    fixtures = root / "tests" / "patch_fixtures"
    (evidence,) = fixtures.glob("pytorch-*-preimage.txt")
    if evidence.name != f"pytorch-{VERSION}-preimage.txt":
        shutil.copy(evidence, fixtures / f"pytorch-{VERSION}-preimage.txt")
    # host-drift: pytorch's host gains a package pass 1 never saw.
    _replace_once(meta, "      host:\n        - python\n", "      host:\n        - python\n        - make\n")
    # no-test: the metapackage loses its test.
    _replace_once(meta, "    test:\n      imports:\n        - torch\n\nabout:", "\nabout:")
    # build-number: CUDA builds +150 instead of +200.
    _replace_once(
        meta,
        "{% set number = number + 200 + (cuda_digits | int) %}",
        "{% set number = number + 150 + (cuda_digits | int) %}",
    )
    # build-string: libtorch's string loses its BLAS part.
    _replace_once(
        meta,
        "string: {{ flavour }}_{{ blas_impl }}_h{{ PKG_HASH }}_{{ number }}\n      force_use_keys",
        "string: {{ flavour }}_h{{ PKG_HASH }}_{{ number }}\n      force_use_keys",
    )
    # recipe-v1: a v1 recipe beside meta.yaml (conda-smithy's lint R-051).
    (recipe / "recipe.yaml").write_text("# a v1 recipe in the conda-build recipe's directory\n")
    # ci-support: one file deleted (one no anchor-parity family reads), one edited.
    (root / ".ci_support" / ci_config("win-64", "13.0").path.name).unlink()
    edited = root / ".ci_support" / ci_config("linux-64", "cpu").path.name
    edited.write_text(edited.read_text() + "extra_key:\n- 1\n")
    reports: list[PatchReport] = []
    findings = set(run_checks(root, DEFAULT_PINNING, reports.append)) - set(real_findings)
    return BrokenCopy(findings, reports[0], (listed[1], hunk))


@pytest.fixture(scope="module")
def broken_findings(broken_copy: BrokenCopy) -> set[Finding]:
    return broken_copy.findings


@pytest.mark.parametrize(
    ("rule", "where_part", "message_part"),
    [
        ("patch-unlisted", "0099-unlisted.patch", "not listed"),
        ("patch-missing", "0098-not-there.patch", "missing"),
        ("patch-header", "recipe/patches/", "not a git format-patch file"),
        ("host-drift", f"pytorch-{VERSION}-", "host adds make"),
        ("no-test", f"pytorch-cpu-{VERSION}-", "no test"),
        ("no-test", f"pytorch-gpu-{VERSION}-", "no test"),
        ("build-number", "meta.yaml", "base build number differs"),
        ("build-string", f"libtorch-{VERSION}-cuda", "does not match"),
        ("build-string", f"libtorch-{VERSION}-cpu", "does not match"),
        ("ci-support", ".ci_support/", "missing"),
        ("ci-support", ".ci_support/", "out of date"),
        ("recipe-v1", "recipe/", "R-051"),
        ("patch-offset", "0011-", "(+16 lines), not at the line its @@ names"),
        ("patch-blob", "0015-", "abbreviates the pre-image blob to 7 digits"),
        ("patch-unverified", "0004-", "the header does not declare it"),
        ("cuda-arch-list", "recipe/meta.yaml:", "not ordered oldest first"),
    ],
)
def test_each_break_is_found(
    broken_findings: set[Finding], rule: str, where_part: str, message_part: str
) -> None:
    matching = [
        f for f in broken_findings if f.rule == rule and where_part in f.where and message_part in f.message
    ]
    assert matching, f"no {rule} finding about {where_part!r}; got:\n" + "\n".join(
        sorted(f.line() for f in broken_findings)
    )


def test_only_the_broken_outputs_are_reported(broken_findings: set[Finding]) -> None:
    # The string break touched libtorch only; the metapackage keeps an identical, valid string line.
    strings = {
        f.where.split(": ", 1)[1].split(f"-{VERSION}-")[0]
        for f in broken_findings
        if f.rule == "build-string"
    }
    assert strings == {"libtorch"}
    drift = {
        f.where.split(": ", 1)[1].split(f"-{VERSION}-")[0] for f in broken_findings if f.rule == "host-drift"
    }
    assert drift == {"pytorch"}


def test_each_drift_finding_says_its_path_and_problem_once(tmp_path: Path) -> None:
    """A stale recipe-v1 (and every CI file a rerender would not write) is one finding each, its path the
    finding's place and its problem the message, neither said twice (the whole line once followed the
    path). No CI file is expected, so every committed one is extra: drift's lines without the renders."""
    root = copy_feedstock(tmp_path / "feedstock", REPO, (*FEEDSTOCK_PATHS, "recipe-v1"))
    v1 = root / "recipe-v1" / "recipe.yaml"
    v1.write_text(v1.read_text() + "# edited by hand\n")
    findings = check_ci_support(root, DEFAULT_PINNING, expected={})
    (stale,) = [f for f in findings if f.where == "recipe-v1/recipe.yaml"]
    assert (
        stale.message
        == "out of date, not what meta.yaml converts to (run: python -m feedstock_tools convert-v1)"
    )
    extra = [f for f in findings if f.where.startswith(".ci_support/")]
    assert extra and all(f.message == "extra (no configuration of the recipe produces it)" for f in extra)
    for finding in findings:
        line = finding.line()
        assert line.count(finding.where) == 1 and line.count(finding.message) == 1, line


def test_cli_lists_findings_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--root", str(tmp_path), "--pinning", str(DEFAULT_PINNING)]) == 1
    assert "meta.yaml not found" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (GOOD_PATCH, None),
        ("diff --git a/x b/x\n", "not a git format-patch file"),
        (GOOD_PATCH.replace("Subject: [PATCH] example: a well-formed patch\n", ""), "no Subject: line"),
        (GOOD_PATCH.replace("Upstream status: not submitted (test data).\n", ""), "'Upstream status:'"),
        (GOOD_PATCH.replace("Why: the test", "The test"), "no 'Why:' paragraph"),
        (GOOD_PATCH.replace("Context verified against: nothing", "Nothing"), "'Context verified against:'"),
        (GOOD_PATCH.replace("---\n", ""), "no '---' line"),
    ],
)
def test_patch_header_rules(text: str, problem: str | None) -> None:
    found = patch_header_problem(text)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_a_patch_that_does_not_apply_fails_check_with_its_hunk_in_the_table(
    broken_copy: BrokenCopy, capsys: pytest.CaptureFixture[str]
) -> None:
    patch, hunk = broken_copy.corrupted
    conflicts = [f for f in broken_copy.findings if f.rule == "patch-conflict"]
    assert [(f.where, f.message.split(": ", 1)[0]) for f in conflicts] == [(f"recipe/{patch}", hunk.name())]
    assert "the hunk expects" in conflicts[0].message and " # changed" in conflicts[0].message
    print_patch_report(broken_copy.patch_report)
    table = capsys.readouterr().out.splitlines()
    number = Path(patch).name.split("-", 1)[0]
    (row,) = [line for line in table if line.startswith(f"{number} ") and f" {hunk.name()} " in line]
    assert " conflicts " in row
    assert ", 1 conflict, " in table[-1]


def test_a_driver_change_the_parity_table_does_not_say_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """The noexecstack flag gone from the driver: check names the anchor-parity row once, with the families
    it shows in and the file to edit (the same table `anchor-parity` checks)."""
    from megabuild import environment

    monkeypatch.setattr(environment, "LINUX_LDFLAGS_ADDED", ())
    (finding,) = [f for f in check_anchor_parity(REPO) if "noexecstack" in f.where]
    assert finding.rule == "anchor-parity"
    assert finding.where.startswith(
        "feedstock_tools/maintainer/anchor_parity.yaml: -Wl,-z,noexecstack [linux-64"
    )
    assert "this feedstock has False" in finding.message and "\n" not in finding.line()


@pytest.fixture
def v1_copy(tmp_path: Path) -> Path:
    """The two recipes and their configurations."""
    for name in ("recipe", "recipe-v1", ".ci_support"):
        shutil.copytree(REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_a_run_requirement_missing_from_recipe_v1_is_one_line(v1_copy: Path) -> None:
    """One requirement added to meta.yaml's pytorch run only: one finding naming the item, both recipes and
    the configurations it shows in, not one per configuration and field."""
    meta = v1_copy / "recipe" / "meta.yaml"
    _replace_once(meta, "        - filelock\n", "        - filelock\n        - optree >=0.13.0\n")
    # two configurations (each real render takes seconds): a CPU and a CUDA one
    configs = [v1_copy / ".ci_support" / ci_config("linux-64", cuda).path.name for cuda in ("cpu", "13.0")]
    (finding,) = check_recipe_v1(v1_copy, configs)
    assert finding.where == "recipe-v1/recipe.yaml"
    assert finding.line() == (
        "[recipe-v1] recipe-v1/recipe.yaml: pytorch run: 'optree >=0.13.0' is in meta.yaml, missing from "
        f"recipe-v1/recipe.yaml (2 configurations, e.g. {configs[0].stem})"
    )


def test_check_compares_recipe_v1_with_its_own_render_of_a_current_configuration(v1_copy: Path) -> None:
    """check renders each configuration once: the recipe-v1 comparison takes check's render of a
    configuration whose committed file is what a rerender writes, and renders any other itself."""
    meta = v1_copy / "recipe" / "meta.yaml"
    original = meta.read_text()
    config = v1_copy / ".ci_support" / ci_config("linux-64", "cpu").path.name
    _replace_once(meta, "        - filelock\n", "        - filelock\n        - optree >=0.13.0\n")
    edited = render_recipe(v1_copy / "recipe", read_configuration(config))
    meta.write_text(original)
    # handed the render of the edited recipe, the comparison reads it, not meta.yaml as it is now
    (finding,) = check_recipe_v1(v1_copy, [config], renders={config.stem: edited})
    assert "'optree >=0.13.0' is in meta.yaml, missing from recipe-v1/recipe.yaml" in finding.line()
    assert check_recipe_v1(v1_copy, [config]) == []
    # only the renders of configurations whose committed file is current are handed on
    stale = v1_copy / ".ci_support" / "stale.yaml"
    stale.write_text("committed: before\n")
    expected = {
        config.relative_to(v1_copy): config.read_text(),
        stale.relative_to(v1_copy): "rerendered: now\n",
    }
    handed = current_renders(v1_copy, expected, {config.stem: edited, stale.stem: edited, "gone": edited})
    assert handed == {config.stem: edited}


def test_a_recipe_v1_that_does_not_parse_is_one_finding(v1_copy: Path) -> None:
    recipe = v1_copy / "recipe-v1" / "recipe.yaml"
    recipe.write_text(recipe.read_text().replace("context:\n", "context:\n  - [unclosed\n", 1))
    (finding,) = check_recipe_v1(v1_copy)
    assert finding.where == "recipe-v1/recipe.yaml" and "not YAML at line" in finding.message
