"""The one writer (recipe/megabuild/atomic_file.py): whole files, no temporary file left, also when two
tools write at the same moment in one checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from feedstock_tools.common.recipe_imports import REPO_ROOT, import_megabuild

atomic_file = import_megabuild("atomic_file")
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
        "from feedstock_tools.proofs.rehearsal.target import _atomic_file\n"
        "def write(path, text): _atomic_file.write_text(path, text)"
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
