"""The one writer (recipe/megabuild/atomic_file.py): whole files, no temporary file left, also when two
tools write at the same moment in one checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from feedstock_tools.common.recipe_imports import REPO_ROOT
from megabuild import atomic_file

PINNING = REPO_ROOT.parent / "shared" / "data" / "conda-forge-pinning"


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    target = atomic_file.write_text(tmp_path / "table.md", "old\n")
    with pytest.raises(OSError, match="disk full"), atomic_file.replacing(target) as handle:
        handle.write(b"half a ta")
        raise OSError("disk full")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["table.md"]


def test_permission_bits_are_the_replaced_files_else_opens(tmp_path: Path) -> None:
    script = tmp_path / "build.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    atomic_file.write_text(script, "#!/bin/sh\nexit 0\n")
    assert script.stat().st_mode & 0o7777 == 0o755  # a rewrite keeps the executable bit
    umask = os.umask(0o022)
    os.umask(umask)
    fresh = atomic_file.write_bytes(tmp_path / "new.json", b"{}")
    assert fresh.stat().st_mode & 0o7777 == 0o666 & ~umask  # as open() creates it, not mkstemp's 0600
    assert atomic_file.write_text(tmp_path / "x", "", mode=0o700).stat().st_mode & 0o7777 == 0o700


# Two processes started together write one target through a tool's own writer, each its own text many
# times; the fixed-name temporary files the tools used before (<name>.tmp, .<name>.partial) made one of them
# rename the other's half-written file, or fail to find its own.
WRITERS = {
    "deps": "from feedstock_tools.maintainer.deps import _write as write",
    "rehearsal target": (
        "from feedstock_tools.proofs.rehearsal.target import atomic_file\n"
        "def write(path, text): atomic_file.write_text(path, text)"
    ),
}
RACER = """\
import sys, time
from pathlib import Path
{import_writer}
target, start, text = Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3] * 50_000
time.sleep(max(0.0, start - time.time()))
for _ in range(200):
    write(target, text)
"""


@pytest.mark.parametrize("writer", WRITERS)
def test_two_writers_at_once_leave_a_whole_file_and_nothing_else(writer: str, tmp_path: Path) -> None:
    import time

    target = tmp_path / "out" / "table.md"
    target.parent.mkdir()
    script = RACER.format(import_writer=WRITERS[writer])
    start = str(time.time() + 1.0)  # both start writing at this moment, after their imports
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(target), start, letter],
            cwd=REPO_ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        for letter in "ab"
    ]
    errors = [racer.communicate(timeout=120)[1] for racer in racers]
    assert [racer.returncode for racer in racers] == [0, 0], errors
    assert target.read_text() in ("a" * 50_000, "b" * 50_000)
    assert [p.name for p in target.parent.iterdir()] == ["table.md"]


@pytest.mark.skipif(not (PINNING / "conda_build_config.yaml").is_file(), reason=f"no pinning at {PINNING}")
def test_two_tools_at_once_in_one_checkout_write_whole_tables(tmp_path: Path) -> None:
    """Two ``deps`` runs at once, writing the same Markdown and JSON tables: both succeed, the tables are
    whole (what one run alone writes) and no temporary file is left."""
    out = tmp_path / "out"
    out.mkdir()
    command = [
        sys.executable, "-m", "feedstock_tools", "deps", "--pinning", str(PINNING),
        "--markdown", str(out / "deps.md"), "--json", str(out / "deps.json"),
    ]  # fmt: skip
    runs = [subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    assert [run.wait(timeout=300) for run in runs] == [0, 0]
    for run in runs:
        assert run.stdout is not None
        run.stdout.close()
    together = {name: (out / name).read_text() for name in ("deps.md", "deps.json")}
    assert sorted(p.name for p in out.iterdir()) == ["deps.json", "deps.md"]
    alone = tmp_path / "alone"
    alone.mkdir()
    single = [*command[:6], "--markdown", str(alone / "deps.md"), "--json", str(alone / "deps.json")]
    subprocess.run(single, cwd=REPO_ROOT, check=True, stdout=subprocess.DEVNULL)
    assert together == {name: (alone / name).read_text() for name in ("deps.md", "deps.json")}
    assert together["deps.md"].startswith("| Package | Upstream | Recipe | Conda-forge | Source |")


def test_a_symlink_stays_a_symlink_and_its_file_gets_the_content(tmp_path: Path) -> None:
    """A target that is a link (recipe-v1/conda_build_config.yaml linked to recipe/'s, say) keeps being the
    link; the file it resolves to is replaced whole, keeping its permission bits."""
    real = tmp_path / "recipe" / "conda_build_config.yaml"
    real.parent.mkdir()
    real.write_text("old\n")
    real.chmod(0o640)
    link = tmp_path / "recipe-v1" / "conda_build_config.yaml"
    link.parent.mkdir()
    link.symlink_to(Path("..") / "recipe" / "conda_build_config.yaml")
    atomic_file.write_text(link, "new\n")
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert real.read_text() == "new\n" and real.stat().st_mode & 0o7777 == 0o640
    assert [p.name for p in link.parent.iterdir()] == [link.name]
    assert [p.name for p in real.parent.iterdir()] == [real.name]


HALF_WRITER = """\
import sys
from pathlib import Path
from megabuild import atomic_file
with atomic_file.replacing(Path(sys.argv[1])) as handle:
    handle.write(sys.argv[2].encode())
    handle.flush()
    sys.stdin.read()  # a write in progress, until the test lets it finish (or kills it)
    handle.write(b" (finished)")
"""


def _half_writer(target: Path, text: str) -> tuple[subprocess.Popen[str], Path]:
    """A real writer process holding its temporary file of ``target``, half written; and that file."""
    writer = subprocess.Popen(
        [sys.executable, "-c", HALF_WRITER, str(target), text],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "recipe")},
        stdin=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        mine = list(target.parent.glob(f".{target.name}.{writer.pid}.*.tmp"))
        if mine and mine[0].stat().st_size:
            return writer, mine[0]
        time.sleep(0.01)
    writer.kill()
    raise AssertionError(f"the writer {writer.pid} made no temporary file of {target} in 30 s")


def _age(path: Path) -> None:
    """As a file left ``STALE_SECONDS`` and a minute ago."""
    then = time.time() - atomic_file.STALE_SECONDS - 60
    os.utime(path, (then, then))


def test_a_killed_writers_temporary_file_is_removed_by_the_next_writer_and_a_live_ones_kept(
    tmp_path: Path,
) -> None:
    """SIGKILL leaves the writer's half-written temporary file beside the target; a later write of the
    target removes it once it is stale (its writer gone, unchanged for STALE_SECONDS), and never the
    temporary file of a writer still running, however old, which then finishes its write."""
    target = atomic_file.write_text(tmp_path / "meta.yaml", "old\n")
    killed, left = _half_writer(target, "killed's half")
    killed.kill()
    killed.wait(timeout=30)
    assert left.exists() and target.read_text() == "old\n"
    atomic_file.write_text(target, "fresh\n")
    assert left.exists()  # its writer is gone, but it changed a moment ago
    _age(left)
    live, kept = _half_writer(target, "live's")
    _age(kept)
    atomic_file.write_text(target, "next\n")
    assert not left.exists() and kept.exists() and target.read_text() == "next\n"
    live.communicate("", timeout=30)
    assert live.returncode == 0 and target.read_text() == "live's (finished)"
    assert [p.name for p in tmp_path.iterdir()] == ["meta.yaml"]
