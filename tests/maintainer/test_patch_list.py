"""``patches``: adding a patch is dropping its file into recipe/patches/ and running the command, which lists
it in meta.yaml, cuts its hunks' pre-image lines from the source tree it was made in and converts recipe-v1/
again; dropping one is deleting the file and running it again (docs/guides/add-a-patch.md)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from bump_fixtures import copy_feedstock

from feedstock_tools.__main__ import main
from feedstock_tools.conda import recipe_v1
from feedstock_tools.maintainer import patch_list
from feedstock_tools.maintainer.check import check_patches, listed_patches
from feedstock_tools.maintainer.patch_check import BLOB_DIGITS, check_patch_series
from feedstock_tools.maintainer.patch_hunks import Verdict

REPO = Path(__file__).resolve().parents[2]
# a file of the scratch "release tree" no patch of the recipe touches
UPSTREAM_FILE = "tools/scratch_module.py"
SUBJECT = "tools: the scratch module says hello on Windows"


def release_tree(path: Path) -> Path:
    """A git tree standing for the release's source: one file of 40 lines, committed."""
    (path / "tools").mkdir(parents=True)
    (path / UPSTREAM_FILE).write_text("".join(f"value_{n} = {n}\n" for n in range(1, 41)))
    git(path, "init", "-q")
    git(path, "add", ".")
    git(path, "commit", "-qm", "the release")
    return path


def git(tree: Path, *args: str) -> str:
    command = ["git", "-C", str(tree), "-c", "user.name=Maintainer", "-c", "user.email=m@example.org", *args]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def make_patch(tree: Path, patches: Path, number: int) -> Path:
    """The guide's commands: edit, commit with the header's paragraphs, git format-patch as documented."""
    text = (tree / UPSTREAM_FILE).read_text().replace("value_20 = 20\n", "value_20 = 'hello'\n")
    (tree / UPSTREAM_FILE).write_text(text)
    message = (
        f"{SUBJECT}\n\nWhy: the test needs a new patch.\n\nUpstream status: not submitted (test data).\n\n"
        "Context verified against: the scratch tree's file.\n\nSelector: [win]\n"
    )
    git(tree, "commit", "-qam", message)
    made = git(
        tree, "format-patch", "-1", "--zero-commit", f"--abbrev={BLOB_DIGITS}", "--start-number", str(number),
        "-o", str(patches),
    )  # fmt: skip
    return Path(made.strip())


@pytest.fixture
def feedstock(tmp_path: Path) -> Path:
    return copy_feedstock(
        tmp_path / "feedstock", REPO, ("recipe", "recipe-v1", ".ci_support", "tests/patch_fixtures")
    )


def test_a_patch_dropped_in_is_listed_with_its_evidence_by_one_command(
    feedstock: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = feedstock / "recipe"
    tree = release_tree(tmp_path / "pytorch")
    numbers = [int(p.name[:4]) for p in (recipe / "patches").glob("*.patch")]
    patch = make_patch(tree, recipe / "patches", max(numbers) + 1)
    entry = f"patches/{patch.name}"
    # before the command: check names the file and the command
    (unlisted,) = [f for f in check_patches(recipe) if f.rule == "patch-unlisted"]
    assert unlisted.where == f"recipe/{entry}" and patch_list.COMMAND in unlisted.message

    assert main(["patches", "--root", str(feedstock), "--source", str(tree)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "wrote recipe/meta.yaml's patch list"
    assert out[1].startswith("wrote 1 segment(s) to tests/patch_fixtures/pytorch-")
    assert "wrote recipe-v1/recipe.yaml" in out
    meta = (recipe / "meta.yaml").read_text()
    assert listed_patches(meta)[-1] == entry
    assert f"    # {SUBJECT}\n    - {entry}  # [win]\n" in meta
    assert patch_list.differences(recipe) == [] and recipe_v1.stale(feedstock) == []
    # the new hunk is judged on the lines the command cut, at its own line, with check's rules met
    version = patch_list.recipe_version(feedstock)
    fixtures = feedstock / "tests" / "patch_fixtures"
    report = check_patch_series(recipe, version, {"all": tuple(listed_patches(meta))}, fixtures)
    (row,) = [r for r in report.rows if r.patch == entry]
    assert (row.verdict, row.detail) == (Verdict.APPLIES, "at line 17")
    assert report.problems == ()
    # a second run changes nothing
    assert main(["patches", "--root", str(feedstock), "--source", str(tree)]) == 0
    assert capsys.readouterr().out == "nothing to change\n"
    assert main(["patches", "--root", str(feedstock), "--check"]) == 0

    # dropping it: delete the file, run the command
    patch.unlink()
    assert main(["patches", "--root", str(feedstock), "--check"]) == 1
    assert f"recipe/{entry}: listed in meta.yaml but the file is missing" in capsys.readouterr().out
    assert main(["patches", "--root", str(feedstock)]) == 0
    assert (recipe / "meta.yaml").read_text() == (REPO / "recipe" / "meta.yaml").read_text()
    assert recipe_v1.stale(feedstock) == []


def test_a_patch_made_in_another_tree_is_one_line_naming_the_hunk(
    feedstock: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = release_tree(tmp_path / "pytorch")
    patch = make_patch(tree, feedstock / "recipe" / "patches", 99)
    # a plain copy of another text (no git objects to take the pre-image blob from): its file is read
    other = tmp_path / "other"
    (other / "tools").mkdir(parents=True)
    (other / UPSTREAM_FILE).write_text(
        "# one more line on top\n" + git(tree, "show", f"HEAD~1:{UPSTREAM_FILE}")
    )
    meta_before = (feedstock / "recipe" / "meta.yaml").read_text()
    assert main(["patches", "--root", str(feedstock), "--source", str(other)]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: {patch.name}: {UPSTREAM_FILE}@17 does not stand at its line in {other}/")
    assert "(offset +1 lines)" in line
    # the list was written before the evidence was asked for; the evidence file is untouched
    assert (feedstock / "recipe" / "meta.yaml").read_text() != meta_before
    fixture = next((feedstock / "tests" / "patch_fixtures").glob("pytorch-*-preimage.txt"))
    assert fixture.read_text() == (REPO / "tests" / "patch_fixtures" / fixture.name).read_text()
