"""Fault injection: interrupted, failed and hostile runs of the driver and the maintainer tools (issue 13).

Every case asserts what docs/reference/failure-modes.md promises: a one-line error naming the fix, a non-zero
exit, nothing outside the tool's directory touched, nothing half-staged, and that running the same command
again (after the fault is gone) succeeds. Signals are real: SIGTERM is sent to the real driver when a named
step's log line appears; where a step is too short to hit that way, the driver's test seam
(``MEGABUILD_TEST_SIGNAL_AT``, megabuild/interrupt.py) makes it signal itself at a named checkpoint. Full and
read-only file systems are real tmpfs mounts (skipped where this user cannot mount).

One pass 1 of the upstream stand-in (CPU, generic BLAS) is built per module; each driver test starts from
a copy of that work directory restored at the same path (CMake's cache names its own directory).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from recipe_matrix import ci_config
from test_megabuild_driver import RECIPE, CondaBuildDouble, check

from feedstock_tools.common import user_cache
from feedstock_tools.common.configuration import read_configuration
from feedstock_tools.common.run_lock import LockBusy
from feedstock_tools.proofs.rehearsal.harness import DEFAULT_WORK_ROOT, Rehearsal
from feedstock_tools.proofs.rehearsal.plan import work_name
from megabuild.cmake_cache import CMakeCache
from megabuild.staging import tree_files

if TYPE_CHECKING:
    from conftest import HostPython

REPO = Path(__file__).resolve().parents[2]
PASS1, OTHER, THIRD = "3.10", "3.11", "3.12"
# a value of a reconfigure input (TORCH_*): pass1.json and error messages must never show it
SECRET = "s3cr3t-token-value"

pytestmark = pytest.mark.rehearsal


# ---- the driver ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pass1_build(
    tmp_path_factory: pytest.TempPathFactory, host_pythons: dict[str, HostPython]
) -> Iterator[CondaBuildDouble]:
    build = CondaBuildDouble(
        tmp_path_factory.mktemp("faults"),
        host_pythons,
        {"cuda_compiler_version": "None", "blas_impl": "generic", "TORCH_FAULT_TEST_TOKEN": SECRET},
    )
    check(build.run("libtorch-split", PASS1))
    shutil.copytree(build.src_dir, build.root / "pristine", symlinks=True)
    yield build


@pytest.fixture
def build(pass1_build: CondaBuildDouble) -> CondaBuildDouble:
    """The module's build with the work directory as pass 1 left it (at the same path)."""
    shutil.rmtree(pass1_build.src_dir)
    shutil.copytree(pass1_build.root / "pristine", pass1_build.src_dir, symlinks=True)
    for leftover in pass1_build.root.glob(".megabuild-stage-*"):
        shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
    return pass1_build


def driver(build: CondaBuildDouble, pkg_name: str, python: str | None, **extra: str) -> subprocess.Popen[str]:
    """recipe/build.sh started as conda-build would, without re-provisioning PREFIX (build.provision)."""
    return subprocess.Popen(
        ["bash", str(RECIPE / "build.sh")],
        cwd=build.src_dir,
        env=build.env(pkg_name, python, **extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the test's own process group stays out of the driver's signals
    )


def finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=300)
    return process.returncode, out, err


def one_line_error(stderr: str, *parts: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines, "no error printed"
    last = lines[-1]
    assert last.startswith("megabuild error: "), stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-2000:]
    for part in parts:
        assert part in last, last
    # shown with -s: the table of docs/reference/failure-modes.md is made from these
    print(f"FAULT-LINE {last}")
    return last


def beside_prefix(build: CondaBuildDouble) -> list[str]:
    """What a staging left next to PREFIX (assembly directories, journals)."""
    return sorted(p.name for p in build.root.iterdir() if p.name.startswith(".megabuild-stage"))


def prefix_files(build: CondaBuildDouble) -> set[str]:
    return set(tree_files("metadata", build.prefix))


def live_members(group: int) -> list[str]:
    """Processes of a process group that are not zombies (a zombie waiting for init to reap it is gone)."""
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        state, pgrp = fields[0], int(fields[2])
        if pgrp == group and state != "Z":
            found.append(f"{stat_file.parent.name} ({state})")
    return found


def records(build: CondaBuildDouble) -> list[str]:
    return [r["pass_name"] for r in build.report()]


# A signal to the driver only (not its group), as `kill PID`, `timeout` or a CI job's cancel send it.
SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_signal_during_the_pytorch_rebuild_stops_its_process_group_and_a_rerun_resumes(
    build: CondaBuildDouble, signum: signal.Signals
) -> None:
    build.provision(OTHER)
    before = prefix_files(build)
    process = driver(build, "pytorch", OTHER)
    assert process.stdout is not None
    group = None
    for line in process.stdout:
        if "(process group " in line:
            group = int(line.rsplit("(process group ", 1)[1].rstrip(")\n"))
            break  # the reconfigure + torch_python rebuild has started: seconds of work ahead
    assert group is not None
    os.kill(process.pid, signum)
    returncode, _, err = finish(process)
    assert returncode == 128 + signum
    one_line_error(
        err,
        f"PKG_NAME=pytorch was interrupted by {signum.name}",
        f"(process group {group}) was stopped",
        "run the same build again",
    )
    assert live_members(group) == []  # the build it started is gone, not orphaned
    assert prefix_files(build) == before and beside_prefix(build) == []
    if signum != signal.SIGTERM:
        return  # what a re-run finds does not depend on the signal: checked once (a rebuild costs seconds)
    # the cache edit may have been written with CMake's re-detection still to come: the re-run copes
    check(build.run("pytorch", OTHER))
    assert records(build) == ["1 libtorch-split", f"4 pytorch (py{OTHER})"]


def test_interrupted_after_the_cache_edit_resumes_for_any_python(build: CondaBuildDouble) -> None:
    result = build.run("pytorch", OTHER, MEGABUILD_TEST_SIGNAL_AT="cache-written")
    assert result.returncode == 128 + signal.SIGTERM, result.stderr
    one_line_error(result.stderr, "interrupted by SIGTERM")
    cache = CMakeCache.load(build.src_dir / "build" / "CMakeCache.txt")
    assert cache.get("_Python_INTERPRETER_PROPERTIES") is None  # FindPython's entries dropped, not redone
    # formerly: "rebuild from pass 1 (PKG_NAME=libtorch-split)" -- hours on real PyTorch
    check(build.run("pytorch", THIRD))
    record = build.report()[-1]
    assert record["pass_name"] == f"4 pytorch (py{THIRD})"
    assert set(record["objects_by_target"]) <= {"torch_python", "_C", "nnapi_backend"}


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_signal_while_assembling_stages_nothing(build: CondaBuildDouble, signum: signal.Signals) -> None:
    result = build.run(
        "libtorch", None, MEGABUILD_TEST_SIGNAL_AT="staging-assembled", MEGABUILD_TEST_SIGNAL=signum.name[3:]
    )
    assert result.returncode == 128 + signum
    one_line_error(result.stderr, f"interrupted by {signum.name}", "nothing of this pass was staged")
    assert result.added == [] and beside_prefix(build) == []  # type: ignore[attr-defined]
    check(build.run("libtorch", None))
    assert "lib/libc10.so" in build.packages["libtorch"]


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_signal_in_the_middle_of_the_move_takes_the_package_back(
    build: CondaBuildDouble, signum: signal.Signals
) -> None:
    result = build.run(
        "libtorch", None, MEGABUILD_TEST_SIGNAL_AT="staging-half-moved", MEGABUILD_TEST_SIGNAL=signum.name[3:]
    )
    assert result.returncode == 128 + signum
    one_line_error(result.stderr, f"interrupted by {signum.name}", "nothing of this pass was staged")
    assert result.added == [] and beside_prefix(build) == []  # type: ignore[attr-defined]
    assert "took back" in result.stdout


def test_sigkill_in_the_middle_of_the_move_is_taken_back_by_the_next_run(build: CondaBuildDouble) -> None:
    build.provision(None)
    returncode, _, _ = finish(driver(build, "libtorch", None, MEGABUILD_TEST_SIGNAL_AT="staging-half-moved",
                                     MEGABUILD_TEST_SIGNAL="KILL"))  # fmt: skip
    assert returncode == -signal.SIGKILL
    half = prefix_files(build)
    assert half, "the kill came before any file was moved"
    assert ".megabuild-stage-host_env_placehold.journal" in beside_prefix(build)
    # the same PREFIX again (formerly: "... already exists in PREFIX ... another package")
    returncode, out, err = finish(driver(build, "libtorch", None))
    assert returncode == 0, err
    assert "took back" in out
    assert beside_prefix(build) == []
    staged = prefix_files(build)
    assert half < staged and "lib/libtorch_cpu.so" in staged


def test_corrupt_report_is_one_line_and_stages_nothing(build: CondaBuildDouble) -> None:
    report = build.src_dir / "build" / "megabuild-report.json"
    report.write_bytes(b'{"format": 1, "passes": [\xff')
    result = build.run("libtorch", None)
    one_line_error(result.stderr, "megabuild-report.json is corrupt", "delete it")
    assert result.returncode == 1 and result.added == []  # type: ignore[attr-defined]
    assert not list(report.parent.glob(".megabuild-report.*"))  # no leaked temporary file
    report.unlink()
    check(build.run("libtorch", None))


def test_unreadable_ninja_log_stops_before_the_cache_is_edited(build: CondaBuildDouble) -> None:
    log = build.src_dir / "build" / ".ninja_log"
    cache = build.src_dir / "build" / "CMakeCache.txt"
    original, cache_before = log.read_text(), cache.read_bytes()
    log.write_text(original.replace("# ninja log v5", "# ninja log v99", 1))
    result = build.run("pytorch", OTHER)
    one_line_error(result.stderr, "unsupported ninja log header", "use ninja 1.10 to 1.13")
    assert cache.read_bytes() == cache_before and result.added == []  # type: ignore[attr-defined]
    log.write_text(original)
    check(build.run("pytorch", OTHER))


def test_pass_1_refuses_a_ninja_whose_log_it_cannot_read_before_compiling(
    build: CondaBuildDouble, tmp_path: Path
) -> None:
    fake = tmp_path / "bin" / "ninja"  # test double of a future ninja: only its log header differs
    fake.parent.mkdir()
    fake.write_text(
        f"#!{sys.executable}\nimport sys, pathlib\n"
        "d = pathlib.Path(sys.argv[sys.argv.index('-C') + 1])\n"
        "(d / 'probe').touch(); (d / '.ninja_log').write_text('# ninja log v8\\n')\n"
    )
    fake.chmod(0o755)
    shutil.rmtree(build.src_dir / "build")
    path = f"{fake.parent}{os.pathsep}{os.environ['PATH']}"
    result = build.run("libtorch-split", PASS1, PATH=path)
    one_line_error(result.stderr, "unsupported ninja log header '# ninja log v8'")
    assert not (build.src_dir / "build" / "CMakeCache.txt").exists()  # stopped before the configure


def test_empty_rules_ninja_left_by_a_full_disk_is_regenerated(build: CondaBuildDouble) -> None:
    (build.src_dir / "build" / "CMakeFiles" / "rules.ninja").write_text("")
    result = build.run("pytorch", OTHER)
    check(result)
    assert "regenerating the build files" in result.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"CMAKE_ARGS": "-DFOO='unbalanced"}, "CMAKE_ARGS cannot be split into words"),
        ({"MAX_JOBS": "abc"}, "MAX_JOBS='abc' is not a positive number"),
        ({"SRC_DIR": "/nonexistent/work"}, "SRC_DIR=/nonexistent/work is not a directory"),
        ({"PYTHON": "NOT_EXECUTABLE"}, "is not an executable file"),
    ],
)
def test_bad_input_is_one_line_and_touches_nothing(
    build: CondaBuildDouble, tmp_path: Path, extra: dict[str, str], message: str
) -> None:
    if extra.get("PYTHON") == "NOT_EXECUTABLE":
        plain = tmp_path / "python"
        plain.write_text("not a program\n")
        extra = {"PYTHON": str(plain)}
    cache_before = (build.src_dir / "build" / "CMakeCache.txt").read_bytes()
    result = build.run("pytorch", OTHER, **extra)
    one_line_error(result.stderr, message)
    assert result.returncode == 1 and result.added == []  # type: ignore[attr-defined]
    assert (build.src_dir / "build" / "CMakeCache.txt").read_bytes() == cache_before


def test_environment_values_are_neither_saved_nor_echoed(build: CondaBuildDouble) -> None:
    state = (build.src_dir / "build" / "megabuild" / "pass1.json").read_text()
    assert SECRET not in state and "TORCH_FAULT_TEST_TOKEN" in json.loads(state)["reconfigure_inputs"]
    result = build.run("pytorch", OTHER, TORCH_FAULT_TEST_TOKEN="other-secret")
    last = one_line_error(result.stderr, "TORCH_FAULT_TEST_TOKEN differs from pass 1")
    assert "secret" not in last


@pytest.fixture
def small_mount(tmp_path: Path) -> Iterator[callable]:
    """Mount tmpfs file systems of a given size/options (root only); unmounted afterwards."""
    mounted: list[Path] = []

    def mount(path: Path, options: str) -> None:
        path.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, check=False
        )
        if result.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()!r}")
        mounted.append(path)

    yield mount
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.mark.parametrize(
    ("options", "message"),
    [("size=24k", "No space left on device"), ("ro,size=1m", "Read-only file system")],
)
def test_full_or_read_only_prefix_on_another_device(
    build: CondaBuildDouble, small_mount, options: str, message: str
) -> None:
    build.provision(None)
    shutil.rmtree(build.prefix)
    small_mount(build.prefix, options)
    returncode, _, err = finish(driver(build, "libtorch", None))
    one_line_error(err, message)
    assert returncode == 1 and beside_prefix(build) == []
    assert not any(p.name.startswith(".megabuild") for p in build.prefix.iterdir())
    subprocess.run(["umount", "-l", str(build.prefix)], check=True)
    small_mount(build.prefix, "size=64m")  # room now, still another device than its parent
    returncode, _, err = finish(driver(build, "libtorch", None))
    assert returncode == 0, err
    assert "lib/libc10.so" in prefix_files(build)
    assert not any(p.name.startswith(".megabuild") for p in build.prefix.iterdir())


# ---- the maintainer tools ----------------------------------------------------------------------------------


def tool(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "feedstock_tools", *args], cwd=cwd, capture_output=True, text=True, check=False
    )


def tool_error(result: subprocess.CompletedProcess[str], *parts: str) -> None:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for part in parts:
        assert part in lines[0], lines[0]
    print(f"FAULT-LINE {lines[0]}")


WHEEL_NAME = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"


def crafted_wheel(path: Path, extra: dict[str, int]) -> Path:
    """A zip named like a torch wheel with torch's markers and ``extra`` members (name -> mode)."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, mode in {
            "torch/__init__.py": 0o644,
            "torch-2.13.0.dist-info/METADATA": 0o644,
            **extra,
        }.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | mode) << 16
            archive.writestr(info, "x")
    return path


@pytest.mark.parametrize("member", ["../../victim", "ABSOLUTE"])
def test_wheel_layout_refuses_members_outside_its_work_directory(tmp_path: Path, member: str) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    victim.chmod(0o600)
    name = str(victim) if member == "ABSOLUTE" else member
    wheel = crafted_wheel(tmp_path / WHEEL_NAME, {name: 0o6777})
    result = tool("wheel-layout", str(wheel), "--work", str(tmp_path / "work"))
    tool_error(result, "points outside")
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600 and victim.read_text() == "keep me"
    assert not (tmp_path / "work" / "src" / "build").exists() or not any(
        (tmp_path / "work" / "src" / "build").rglob("*")
    )


@pytest.mark.parametrize("content", ["not a zip", "zip without torch"])
def test_wheel_layout_of_something_else_is_one_line(tmp_path: Path, content: str) -> None:
    wheel = tmp_path / WHEEL_NAME
    if content == "not a zip":
        wheel.write_text("not a zip")
    else:
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr("hello.txt", "x")
    tool_error(tool("wheel-layout", str(wheel), "--work", str(tmp_path / "work")))


def test_rehearsal_work_directory_name_cannot_leave_the_work_root(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("keep me")
    source = next((REPO / ".ci_support").glob("linux_64_*cuda_compiler_version12.9*.yaml"))
    crafted = tmp_path / "crafted.yaml"
    crafted.write_text(source.read_text().replace("- '12.9'", "- '12.9/../../../victim'").replace(
        "- 12.9", "- 12.9/../../../victim"))  # fmt: skip
    work = tmp_path / "a" / "b" / "c"
    result = tool("rehearse", str(crafted), "--work-dir", str(work))
    tool_error(result)
    assert (victim / "keep").read_text() == "keep me"


CPU_CONFIG = ci_config("linux-64", "cpu").path


@pytest.mark.parametrize(
    ("signum", "via_build_locally"),
    [(signal.SIGINT, False), (signal.SIGHUP, False), (signal.SIGTERM, True)],
    ids=["SIGINT-rehearse", "SIGHUP-rehearse", "SIGTERM-build-locally--rehearse"],
)
def test_a_signal_to_the_rehearsal_alone_stops_every_process_it_started(
    tmp_path: Path, signum: signal.Signals, via_build_locally: bool
) -> None:
    """`kill PID` / `timeout` on the top process only, while pass 1's build runs three levels down
    (rehearse -> build.sh = the driver -> setup.py's process group); formerly a traceback (SIGINT) or a
    silent death (SIGTERM, SIGHUP) with the build orphaned."""
    work = tmp_path / "work"
    cache = user_cache.rehearsal_cache()  # the venv templates every rehearsal test shares
    rehearse = ["rehearse", CPU_CONFIG.stem, "--verbose", "--work-dir", str(work), "--cache-dir", str(cache)]
    if via_build_locally:  # build-locally.py has no --work-dir: it runs `rehearse` as a user would
        command = [sys.executable, "build-locally.py", "--rehearse", CPU_CONFIG.stem, "--verbose"]
        work = DEFAULT_WORK_ROOT
    else:
        command = [sys.executable, "-m", "feedstock_tools", *rehearse]
    process = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    assert process.stdout is not None
    group = None
    for line in process.stdout:
        if "[megabuild]   (process group " in line:  # pass 1's setup.py build has started
            group = int(line.rsplit("(process group ", 1)[1].rstrip(")\n"))
            break
    assert group is not None
    os.kill(process.pid, signum)
    err = process.communicate(timeout=120)[1]
    assert process.returncode == 128 + signum, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"error: python -m feedstock_tools rehearse was interrupted by {signum.name}")
    assert "run the same command again" in lines[0]
    assert live_members(group) == []  # the driver's build, two levels down, is gone too
    logs = work / work_name(read_configuration(CPU_CONFIG)) / "logs"
    driver_log = next(logs.glob("01-*.log")).read_text()
    assert f"the pass for PKG_NAME=libtorch-split was interrupted by {signum.name}" in driver_log
    assert f"(process group {group}) was stopped" in driver_log


def test_two_rehearsals_cannot_share_a_work_directory(tmp_path: Path) -> None:
    config = next((REPO / ".ci_support").glob("linux_64_*cuda_compiler_version12.9*.yaml"))
    running = Rehearsal(config, work_root=tmp_path)
    running.lock.acquire()  # what running.prepare() does first
    (running.dir / "work").mkdir(parents=True)  # the tree a run in progress builds in
    second = Rehearsal(config, work_root=tmp_path)
    with pytest.raises(LockBusy, match=f"in use by another run \\(pid {os.getpid()}"):
        second.prepare()
    assert (running.dir / "work").is_dir()  # formerly deleted under the first run's feet
    running.lock.release()


def test_cache_with_non_utf8_bytes_round_trips(tmp_path: Path) -> None:
    """CMake stores paths as bytes: a Latin-1 directory name must neither crash the driver nor change."""
    path = tmp_path / "CMakeCache.txt"
    text = b"//Install path\nCMAKE_INSTALL_PREFIX:PATH=/opt/caf\xe9\nUSE_MAGMA:BOOL=OFF\n"
    path.write_bytes(text)
    cache = CMakeCache.load(path)
    cache.set("USE_MAGMA", "ON")
    cache.write()
    assert path.read_bytes() == text.replace(b"USE_MAGMA:BOOL=OFF", b"USE_MAGMA:BOOL=ON")


def test_graph_name_cannot_leave_the_output_directory(tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    result = tool("graph", str(build), "--name", "../escaped", "--formats", "dot")
    tool_error(result)
    assert not (tmp_path / "escaped.dot").exists()


def test_truncated_tarball_in_deps_is_one_line(tmp_path: Path) -> None:
    tree = tmp_path / "pytorch-v2.13.0"
    tree.mkdir()
    (tree / "version.txt").write_text("2.13.0\n")
    (tree / "blob").write_bytes(os.urandom(200_000))
    full = tmp_path / "pytorch-v2.13.0.tar.gz"
    subprocess.run(["tar", "czf", str(full), "-C", str(tmp_path), tree.name], check=True)
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(full.read_bytes()[:5000])
    tool_error(tool("deps", "--upstream", str(cut)), "truncated or corrupt", "download it again")
