"""A bump survives a kill: the transaction's journal (feedstock_tools/common/tree_journal.py) is written
before the first write, and the next ``bump`` or ``check`` puts the tree back from it, byte for byte, in one
line. Each test SIGKILLs a real process running the real transaction on a scratch copy of the feedstock,
at the moment named, found by polling (no bump's minutes: the writes are the bump's own writer's)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from bump_fixtures import PINNING, TEST_ONLY_SHA256, copy_feedstock, git_status, git_tracked, next_release

from feedstock_tools.__main__ import main
from feedstock_tools.common import tree_journal
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.release import transaction

# A process that runs the bump's transaction on the tree argv[1] with the bump's writer, and stops where
# argv[2] says, until it is killed: "writes" after its writes (the recipe rewritten, a CI file added);
# "journal" while writing the journal itself (nothing of the tree written yet); "finished" once the writes
# are done and recorded, before the journal is removed.
STOPPED_BUMP = """\
import sys
from pathlib import Path
from feedstock_tools.common import tree_journal
from feedstock_tools.release import transaction

root, where = Path(sys.argv[1]), sys.argv[2]
from megabuild import atomic_file

def stop():
    print("stopped", flush=True)
    sys.stdin.read()

if where == "journal":
    def half_a_journal(snapshot, handle, what):
        handle.write(b"PK half a journal")
        handle.flush()
        stop()
    tree_journal.Snapshot.write_zip = half_a_journal
if where == "finished":
    tree_journal.Journal.drop = lambda journal: stop()

def writes():
    for name in ("recipe/meta.yaml", "recipe/conda_build_config.yaml"):
        atomic_file.write_text(root / name, (root / name).read_text() + "# bumped\\n")
    atomic_file.write_text(root / ".ci_support" / "added_by_the_bump.yaml", "target_platform: [linux-64]\\n")
    if where == "writes":
        stop()

transaction.all_or_nothing(root, writes, "the bump of the test")
"""


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    return git_tracked(copy_feedstock(tmp_path / "feedstock"))


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the work tree (not .git), its bytes and permission bits."""
    return {
        path.relative_to(root).as_posix(): (path.read_bytes(), path.stat().st_mode & 0o7777)
        for path in root.rglob("*")
        if path.is_file() and ".git" not in path.relative_to(root).parts
    }


def killed_at(
    root: Path, where: str, until: Callable[[], bool], preexec: Callable[[], None] | None = None
) -> None:
    """Run STOPPED_BUMP on ``root`` until it says it stopped and ``until()`` holds, then SIGKILL it."""
    bump = subprocess.Popen(
        [sys.executable, "-c", STOPPED_BUMP, str(root), where],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert bump.stdout is not None
    assert bump.stdout.readline() == "stopped\n", f"the bump ended ({bump.wait()}) before {where}"
    deadline = time.monotonic() + 30
    while not until():
        assert time.monotonic() < deadline, f"stopped at {where}, but what the test waits for is not there"
        time.sleep(0.01)
    bump.send_signal(signal.SIGKILL)
    assert bump.wait(timeout=30) == -signal.SIGKILL


def half_bumped(root: Path) -> bool:
    return (root / "recipe" / "conda_build_config.yaml").read_text().endswith("# bumped\n")


def _empty(path: Path) -> Path:
    path.mkdir()
    return path


@pytest.mark.parametrize("command", ["bump", "check"])
def test_a_bump_killed_after_its_first_writes_is_put_back_by_the_next_run(
    scratch: Path, tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """SIGKILL after the recipe and a CI file were written: the tree is half-bumped, with the journal. The
    next bump (or check) puts every file back byte for byte and removes what was added, and says so in one
    line before it goes on (the bump then stops at its empty --wheels, the check at its empty --pinning:
    one line each, nothing expensive run)."""
    before = tree(scratch)
    killed_at(scratch, "writes", lambda: half_bumped(scratch))
    journal = tree_journal.journal_dir(scratch)
    assert tree(scratch) != before and (journal / tree_journal.SNAPSHOT).is_file()
    nowhere = _empty(tmp_path / "nothing")
    arguments = {
        "bump": [next_release(), "--sha256", TEST_ONLY_SHA256, "--wheels", str(nowhere),
                 "--pinning", str(PINNING)],
        "check": ["--pinning", str(nowhere)],
    }[command]  # fmt: skip
    assert main([command, *arguments, "--root", str(scratch)]) == 1
    recovered, error = capsys.readouterr().err.splitlines()
    assert recovered.startswith("the bump of the test (pid ")
    files = len(tree_journal.Snapshot.take(scratch, transaction.WRITTEN).files)
    assert recovered.endswith(
        f"was stopped after it began writing: {scratch} is put back as it was before it ({files} files, from "
        "its journal); run it again"
    )
    assert error.startswith("error: ") and "journal" not in error
    assert tree(scratch) == before and git_status(scratch) == []
    assert not (journal / tree_journal.SNAPSHOT).exists()


def test_a_journal_killed_while_being_written_is_removed_and_the_tree_untouched(scratch: Path) -> None:
    before = tree(scratch)
    journal = tree_journal.journal_dir(scratch)
    killed_at(scratch, "journal", lambda: any(journal.glob(f".{tree_journal.SNAPSHOT}.*.tmp")))
    assert tree_journal.recover(scratch) is None
    assert sorted(p.name for p in journal.iterdir()) == [tree_journal.LOCK]
    assert tree(scratch) == before


def test_a_bump_killed_after_it_finished_keeps_its_tree_and_drops_its_journal(scratch: Path) -> None:
    journal = tree_journal.journal_dir(scratch)
    killed_at(scratch, "finished", (journal / tree_journal.FINISHED).is_file)
    bumped = tree(scratch)
    assert half_bumped(scratch) and (journal / tree_journal.SNAPSHOT).is_file()
    line = tree_journal.recover(scratch)
    assert line == (
        f"{scratch}: a run had finished its writes when it was stopped; its journal ({journal}) is dropped "
        "and the tree kept as it left it"
    )
    assert tree(scratch) == bumped
    assert sorted(p.name for p in journal.iterdir()) == [tree_journal.LOCK]


# A run of check whose files may not grow past argv[2] bytes: a write of a bigger file fails (EFBIG),
# as a write to a full disk does, while smaller ones succeed.
LIMITED_CHECK = """\
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing the process
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
from feedstock_tools.__main__ import main
sys.exit(main(["check", "--root", sys.argv[1], "--pinning", sys.argv[3]]))
"""


def test_a_restore_goes_on_past_a_failed_write_and_names_what_it_could_not_put_back(
    scratch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The journal's restore under a file-size limit smaller than meta.yaml: meta.yaml cannot be written
    back, the smaller files and the added one are still put right, and one line names meta.yaml and the
    journal kept; the next run, without the limit, finishes the restore."""
    before = tree(scratch)
    killed_at(scratch, "writes", lambda: half_bumped(scratch))
    meta, config = scratch / "recipe" / "meta.yaml", scratch / "recipe" / "conda_build_config.yaml"
    limit = len(before["recipe/meta.yaml"][0]) - 1  # the recipe as it was does not fit
    assert config.stat().st_size < limit
    nowhere = _empty(tmp_path / "nothing")
    limited = subprocess.run(
        [sys.executable, "-c", LIMITED_CHECK, str(scratch), str(limit), str(nowhere)],
        cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert limited.returncode == 1 and len(limited.stderr.splitlines()) == 1, limited.stderr
    assert limited.stderr.startswith("error: the bump of the test (pid ")
    assert "1 could not be put back: recipe/meta.yaml (File too large); the journal " in limited.stderr
    assert config.read_bytes() == before["recipe/conda_build_config.yaml"][0]
    assert not (scratch / ".ci_support" / "added_by_the_bump.yaml").exists()
    assert meta.read_text().endswith("# bumped\n")
    assert main(["check", "--root", str(scratch), "--pinning", str(nowhere)]) == 1
    assert "is put back as it was before it" in capsys.readouterr().err
    assert tree(scratch) == before


def test_the_journal_lives_in_the_trees_own_git_directory(tmp_path: Path) -> None:
    """A clone's .git; a worktree's own git directory, which its .git file names (never the main one's,
    shared by every worktree); a tree without git, .bump-journal at its root."""
    clone, worktree, plain = tmp_path / "clone", tmp_path / "worktree", tmp_path / "plain"
    (clone / ".git").mkdir(parents=True)
    own = clone / ".git" / "worktrees" / "worktree"
    own.mkdir(parents=True)
    worktree.mkdir()
    (worktree / ".git").write_text("gitdir: ../clone/.git/worktrees/worktree\n")
    plain.mkdir()
    assert tree_journal.journal_dir(clone) == clone / ".git" / "pytorch-feedstock" / "bump-journal"
    assert tree_journal.journal_dir(worktree) == own.resolve() / "pytorch-feedstock" / "bump-journal"
    assert tree_journal.journal_dir(plain) == plain / ".bump-journal"
