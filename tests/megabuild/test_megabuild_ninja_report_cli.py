"""Reading .ninja_log (against real ninja), the per-pass report, and the ``python -m megabuild`` CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from megabuild import report
from megabuild.ninja_log import NinjaLogError, PassWork, is_linked, ran_between, read_log, target_of_object

REPO = Path(__file__).resolve().parents[2]


def write_log(path: Path, version: int, lines: list[str]) -> Path:
    path.write_text(f"# ninja log v{version}\n" + "".join(f"{line}\n" for line in lines))
    return path


@pytest.mark.parametrize("version", [5, 6, 7])
def test_log_versions_and_latest_entry_wins(tmp_path: Path, version: int) -> None:
    log = write_log(
        tmp_path / ".ninja_log",
        version,
        [
            "0\t10\t100\tCMakeFiles/core.dir/a.c.o\tdeadbeef",
            "0\t20\t200\tlibcore.so\tcafe",
            "5\t15\t300\tCMakeFiles/core.dir/a.c.o\tdeadbeef",
        ],
    )
    entries = read_log(log)
    assert entries["CMakeFiles/core.dir/a.c.o"].mtime == 300
    assert len(entries) == 2


def test_malformed_log_names_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(NinjaLogError, match=r"\.ninja_log:1: unsupported ninja log header '# ninja log v4'"):
        read_log(write_log(tmp_path / ".ninja_log", 4, []))
    with pytest.raises(NinjaLogError, match=r"\.ninja_log:3: malformed ninja log line"):
        read_log(write_log(tmp_path / ".ninja_log", 5, ["0\t1\t2\ta.o\th", "garbage"]))
    assert read_log(tmp_path / "absent") == {}


def test_classification() -> None:
    assert target_of_object("caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/Context.cpp.o") == "torch_cpu"
    assert target_of_object("CMakeFiles/torch_python.dir/torch/csrc/Module.cpp.o") == "torch_python"
    assert target_of_object("generated.c") is None
    assert (
        is_linked("lib/libtorch_cpu.so")
        and is_linked("lib/libfoo.so.1")
        and is_linked("bin/torch_shm_manager")
    )
    assert not is_linked("aten/src/ATen/Functions.h") and not is_linked("build.ninja")


@pytest.mark.skipif(
    not (shutil.which("cmake") and shutil.which("ninja") and shutil.which("cc")), reason="tools"
)
def test_what_ran_between_two_real_ninja_builds(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(p C)\n"
        "add_library(one SHARED one.c)\nadd_library(two SHARED two.c)\n"
    )
    (source / "one.c").write_text("int one(void) { return 1; }\n")
    (source / "two.c").write_text("int two(void) { return 2; }\n")
    build = tmp_path / "build"
    subprocess.run(
        ["cmake", "-S", str(source), "-B", str(build), "-G", "Ninja"], check=True, capture_output=True
    )
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True)
    first = read_log(build / ".ninja_log")
    (source / "two.c").write_text("int two(void) { return 22; }\n")
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True)
    work = PassWork.from_entries(ran_between(first, read_log(build / ".ninja_log")))
    assert work.objects == ["CMakeFiles/two.dir/two.c.o"]
    assert work.linked == ["libtwo.so"]
    assert work.objects_by_target() == {"two": ["CMakeFiles/two.dir/two.c.o"]}
    # a compacted log (ninja -t recompact) keeps the latest entries: nothing ran since
    subprocess.run(["ninja", "-C", str(build), "-t", "recompact"], check=True, capture_output=True)
    after = read_log(build / ".ninja_log")
    assert ran_between(after, read_log(build / ".ninja_log")) == []


def test_report_is_appended_and_tabulated(tmp_path: Path) -> None:
    first = report.PassRecord("1 libtorch-split", "libtorch-split", 12.5, ["lib/libc10.so"], ["a.o", "b.o"])
    report.append(tmp_path, first, fresh=True)
    python = report.PassRecord("4 pytorch (py3.12)", "pytorch", 2.0, [], ["c.o"], objects_from_cache=["d.o"])
    records = report.append(tmp_path, python)
    assert [r.pass_name for r in report.load(tmp_path)] == ["1 libtorch-split", "4 pytorch (py3.12)"]
    assert report.load(tmp_path)[1].objects_from_cache == ["d.o"]
    lines = report.table(records).splitlines()
    header = ["pass", "targets", "rebuilt", "objects", "compiled", "from", "cache", "seconds"]
    assert lines[0].split() == header
    assert lines[2].split() == ["1", "libtorch-split", "1", "2", "0", "12.5"]
    assert lines[3].split() == ["4", "pytorch", "(py3.12)", "0", "1", "1", "2.0"]
    assert lines[-1].split() == ["total", "1", "3", "1", "14.5"]
    # pass 1 starts a new report
    assert len(report.append(tmp_path, first, fresh=True)) == 1


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(REPO / "recipe"), **(env or {})}
    for name in ("PKG_NAME", "PREFIX", "SRC_DIR"):
        full_env.pop(name, None)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "megabuild", *args], capture_output=True, text=True, env=full_env, check=False
    )


def test_help_explains_the_passes() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    for word in (
        "libtorch-split",
        "libtorch-cuda-linalg",
        "magma_variant",
        "DEBUG=1",
        "megabuild-report.json",
    ):
        assert word in result.stdout


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    result = run_cli()
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "megabuild error: environment variable PKG_NAME is not set: run recipe/build.sh through conda-build "
        "(or the rehearsal harness), which sets it"
    ]
    result = run_cli("report", str(tmp_path))
    assert result.returncode == 1 and "no megabuild-report.json in" in result.stderr


def test_cli_stage_command(tmp_path: Path) -> None:
    install = tmp_path / "src" / "torch"
    (install / "lib").mkdir(parents=True)
    (install / "lib" / "libc10.so").write_text("c10")
    result = run_cli(
        "stage", "libtorch", "--install-tree", str(install), "--prefix", str(tmp_path / "prefix")
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "prefix" / "lib" / "libc10.so").read_text() == "c10"
    (install / "lib" / "libunknown.so").write_text("?")
    result = run_cli("stage", "libtorch", "--install-tree", str(install), "--prefix", str(tmp_path / "other"))
    assert result.returncode == 1 and "libunknown.so" in result.stderr
    assert not (tmp_path / "other").exists() or not any((tmp_path / "other").iterdir())
