"""``megabuild_real_graph.py --blas-switch`` without Debian's source: its accounting and model on small
fixtures (benchmarks/real_graph_blas.py), and its stand-in compiler and timing launcher with the real ccache
and the real preprocessor on two tiny sources shaped like the BLAS switch.

The measurement itself is docs/records/2026-12-07-real-graph-blas.md.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from megabuild import compiler_cache

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import megabuild_real_graph as bench  # noqa: E402
import real_graph_blas as blas  # noqa: E402

CPU = "caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/"
PY = "caffe2/torch/CMakeFiles/torch_python.dir/csrc/"


def mkl_and_openblas() -> tuple[blas.BlasBuild, blas.BlasBuild]:
    """Two builds as the real run makes them: MKL's graph has one object more; the second BLAS took two
    objects from the cache and compiled one object of torch_cpu and one of torch_python."""
    common = [f"{CPU}Context.cpp.o", f"{CPU}native/CPUBlas.cpp.o", f"{CPU}Tensor.cpp.o", f"{PY}Module.cpp.o"]
    mkl_only = f"{CPU}mkl/SparseBlas.cpp.o"
    first = blas.BlasBuild(
        blas="MKL", objects_in_graph=[*common, mkl_only], objects_ran=sorted([*common, mkl_only]), served=[],
        linked=["lib/libtorch_cpu.so", "lib/libtorch_python.so"], generator_outputs=14117,
        config_h_mkl_enabled="1", configure_seconds=100.0, settle_reconfigures=2, build_wall_seconds=600.0,
        build_cpu_seconds=1100.0, cpu_seconds={obj: 1.0 for obj in [*common, mkl_only]},
    )  # fmt: skip
    second = blas.BlasBuild(
        blas="OpenBLAS", objects_in_graph=common, objects_ran=sorted(common),
        served=[f"{CPU}Context.cpp.o", f"{CPU}Tensor.cpp.o"], linked=["lib/libtorch_cpu.so"],
        generator_outputs=14117, config_h_mkl_enabled="0", configure_seconds=80.0, settle_reconfigures=2,
        build_wall_seconds=500.0, build_cpu_seconds=900.0,
        cpu_seconds={
            f"{CPU}Context.cpp.o": 0.5, f"{CPU}Tensor.cpp.o": 0.7, f"{CPU}native/CPUBlas.cpp.o": 1.5,
        },
    )  # fmt: skip
    return first, second


def test_the_second_blas_compiles_what_ccache_missed_and_says_why() -> None:
    first, second = mkl_and_openblas()
    assert second.compiled == [f"{CPU}native/CPUBlas.cpp.o", f"{PY}Module.cpp.o"]
    figures = blas.switch_figures(first, second)
    assert figures == {
        "objects_only_first": [f"{CPU}mkl/SparseBlas.cpp.o"],
        "objects_only_second": [],
        "second_compiled": [f"{CPU}native/CPUBlas.cpp.o", f"{PY}Module.cpp.o"],
        "second_compiled_in_both_graphs": [f"{CPU}native/CPUBlas.cpp.o", f"{PY}Module.cpp.o"],
        "second_compiled_by_target": {"torch_cpu": 1, "torch_python": 1},
        "second_served": 2,
        "second_linked": ["lib/libtorch_cpu.so"],
        "hit_share": 0.5,
    }
    counted = blas.build_figures(second)
    assert (counted["objects_compiled"], counted["objects_from_cache"], counted["objects_timed"]) == (2, 2, 3)
    # Module.cpp.o has no timing line (a launcher killed mid-write): the miss mean is CPUBlas's alone
    assert (counted["cpu_seconds_per_miss"], counted["cpu_seconds_per_hit"]) == (1.5, 0.6)
    assert blas.build_figures(first)["cpu_seconds_per_hit"] is None  # nothing served: no figure, not 0


def test_the_timing_log_keeps_each_objects_last_figure_and_skips_torn_lines() -> None:
    lines = ["a.o\t1.25\n", "b.o\t0.5\n", "a.o\t2.0\n", "c.o\t0.", "\t3.0\n", "d.o\tnot-a-number\n", "e.o"]
    assert blas.read_timing_log(lines) == {"a.o": 2.0, "b.o": 0.5, "c.o": 0.0}


def test_ccache_outcomes_count_each_compilation_once_by_its_result() -> None:
    log = """# /src/a.cpp
cache_miss
direct_cache_miss
local_storage_miss
preprocessed_cache_miss
# /src/b.cpp
direct_cache_miss
local_storage_hit
preprocessed_cache_hit
# /src/c.cpp
direct_cache_hit
local_storage_hit
# /src/d.cpp
direct_cache_miss
local_storage_read_miss
preprocessor_error
""".splitlines()
    assert blas.ccache_outcomes(log) == {
        "cache_miss": 1, "direct_cache_hit": 1, "preprocessed_cache_hit": 1, "preprocessor_error": 1,
    }  # fmt: skip
    assert blas.ccache_outcomes([]) == {}


def test_a_difference_is_an_empty_stub_only_when_nothing_else_differs() -> None:
    mkl = ["namespace at {", "namespace native {", "}", "}", "int blas() { return 1; }", ""]
    stubs = [*mkl, "namespace at {", "namespace native {", "}", "}"]  # one more empty stub (pragma once)
    assert blas.classify_difference(mkl, list(reversed(mkl))) == ("same lines", [])
    assert blas.classify_difference(mkl, stubs) == ("pragma once", [])
    openblas = [line.replace("return 1", "return 0") for line in stubs]
    assert blas.classify_difference(mkl, openblas) == (
        "content",
        ["- int blas() { return 1; }", "+ int blas() { return 0; }"],
    )


def test_a_compile_command_becomes_the_real_preprocessors(tmp_path: Path) -> None:
    command = (
        "/w/bin/timed-ccache /usr/bin/c++ -DMKL_HAS_SBGEMM -I/w/src -isystem /w/mkl/include -O2 "
        "-MD -MT a/b.cpp.o -MF a/b.cpp.o.d -o a/b.cpp.o -c '/w/src/b c.cpp'"
    )
    assert bench.preprocess_command(command, "/w/bin/timed-ccache", tmp_path / "b.i") == [
        "/usr/bin/c++", "-DMKL_HAS_SBGEMM", "-I/w/src", "-isystem", "/w/mkl/include", "-O2",
        "-o", str(tmp_path / "b.i"), "-E", "-P", "/w/src/b c.cpp",
    ]  # fmt: skip


def test_the_model_adds_up_each_term_it_names() -> None:
    first, second = mkl_and_openblas()
    given = blas.Assumptions(
        cores=2, compile_cpu_seconds=10.0, later_pythons=3, python_linked_objects=4,
        link_seconds=50.0, test_seconds=1000.0,
    )  # fmt: skip
    assert blas.python_objects_compiled(blas.switch_figures(first, second), ["torch_python", "_C"]) == 1
    result = blas.model(blas.build_figures(first), blas.build_figures(second), 1, given)
    per_compile = 10.0 + 1.0  # the yardstick + ccache's measured miss overhead (the first build's misses)
    pythons = 3 * 4 * per_compile
    first_cpu = 5 * per_compile + pythons
    separate = 4 * per_compile + pythons
    merged = 2 * per_compile + 2 * 0.6 + 3 * (1 * per_compile + 3 * 0.6)
    first_job = 100.0 + first_cpu / 2 + 50.0 + 1000.0
    assert result["compile_cpu_seconds"] == {
        "first_blas": round(first_cpu),
        "second_blas_separate_job": round(separate),
        "second_blas_in_merged_job": round(merged),
    }
    assert result["wall_seconds"] == {
        "separate_jobs": round(max(first_job, 80.0 + separate / 2 + 1050.0)),
        "merged_job": round(first_job + 80.0 + merged / 2 + 1050.0),
    }
    assert result["runner_seconds"]["separate_jobs"] == round(first_job + 80.0 + separate / 2 + 1050.0)
    assert result["second_blas_compile_share"] == round(merged / separate, 4)
    assert result["assumptions"]["test_seconds"] == 1000.0


def test_remodel_needs_a_whole_graph_report_and_rewrites_only_its_model(tmp_path: Path) -> None:
    first, second = mkl_and_openblas()
    report = tmp_path / "megabuild-real-graph-blas.json"
    remodel = [
        sys.executable,
        str(BENCHMARKS / "megabuild_real_graph.py"),
        "--work",
        str(tmp_path),
        "--remodel",
    ]
    missing = subprocess.run(remodel, capture_output=True, text=True, check=False)
    assert missing.returncode == 1 and missing.stderr.startswith(
        f"megabuild_real_graph: --remodel: cannot read {report}"
    )
    assert len(missing.stderr.splitlines()) == 1 and not report.exists()
    payload = {
        "builds": [blas.build_figures(first), blas.build_figures(second)],
        "switch": blas.switch_figures(first, second), "sample": None, "model": [],
    }  # fmt: skip
    report.write_text(json.dumps(payload))
    done = subprocess.run(
        [*remodel, "--test-seconds", "0", "9000"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    rewritten = json.loads(report.read_text())
    assert [m["assumptions"]["test_seconds"] for m in rewritten.pop("model")] == [0.0, 9000.0]
    assert rewritten == {k: v for k, v in payload.items() if k != "model"}
    assert "model, tests 9000 s per BLAS: merged job" in done.stdout


@pytest.mark.skipif(shutil.which("ccache") is None, reason="needs ccache (run-tests.py installs it)")
def test_the_standin_gives_ccache_the_real_preprocessor_and_a_result_to_keep(tmp_path: Path) -> None:
    """Two sources include a generated Config.h; one tests its macro. Under MKL's flags and Config.h=1,
    then without the flags and Config.h=0 at the same paths, through the timing launcher: ccache stores
    the stand-in's results and serves the untouched source under the other BLAS, as with the real build."""
    real_cxx = Path(shutil.which("c++") or "c++").resolve()
    standin = tmp_path / "standin-c++"
    script = bench.STANDIN_PREPROCESSING.replace("ORIGINAL", str(real_cxx))
    standin.write_text(script.replace("REAL", str(real_cxx)))
    standin.chmod(0o755)
    launcher = tmp_path / "timed-ccache"
    launcher.write_text(
        bench.TIMING_LAUNCHER.format(python=sys.executable, variable=bench.TIMING_LOG_VARIABLE)
    )
    launcher.chmod(0o755)
    (tmp_path / "plain.cpp").write_text('#include "Config.h"\nint plain() { return 1; }\n')
    (tmp_path / "blas.cpp").write_text('#include "Config.h"\nint blas() { return AT_MKL_ENABLED(); }\n')
    cache = compiler_cache.CompilerCache("ccache", "x", tmp_path / "cache")
    env = {**os.environ, **bench.ccache_settings(cache, launcher)}

    def build(name: str, mkl: str, flags: list[str]) -> list[tuple[str, bool]]:
        (tmp_path / "Config.h").write_text(f"#define AT_MKL_ENABLED() {mkl}\n")
        env.update(CCACHE_STATSLOG=str(tmp_path / f"{name}.log"))
        env[bench.TIMING_LOG_VARIABLE] = str(tmp_path / f"{name}-cpu.log")
        for source in ("plain", "blas"):
            obj = f"{source}.o"
            command = [str(standin), *flags, "-O2", "-MD", "-MT", obj, "-MF", f"{obj}.d", "-o", obj]
            subprocess.run([str(launcher), *command, "-c", str(tmp_path / f"{source}.cpp")], cwd=tmp_path,
                           env=env, check=True)  # fmt: skip
        return compiler_cache.read_stats_log(tmp_path / f"{name}.log")

    mkl_flags = ["-DMKL_HAS_SBGEMM", "-DMKL_HAS_SHGEMM", "-isystem", str(tmp_path / "mkl" / "include")]
    assert build("mkl", "1", mkl_flags) == [
        (str(tmp_path / "plain.cpp"), False),
        (str(tmp_path / "blas.cpp"), False),
    ]
    assert (tmp_path / "plain.o").read_text() == "stand-in object\n"
    assert (tmp_path / "plain.o.d").read_text() == "plain.o:\n"
    for name in ("plain", "blas"):
        (tmp_path / f"{name}.o").unlink()
    assert build("openblas", "0", []) == [
        (str(tmp_path / "plain.cpp"), True),
        (str(tmp_path / "blas.cpp"), False),
    ]
    assert (tmp_path / "plain.o").read_text() == "stand-in object\n"  # restored from the cache
    timed = blas.read_timing_log((tmp_path / "openblas-cpu.log").read_text().splitlines())
    assert sorted(timed) == ["blas.o", "plain.o"] and all(seconds > 0 for seconds in timed.values())


FAKE_PREPROCESSOR = """#!/bin/sh
# -E -P of a fixture: the source's text; hangs on the MKL tree's source while $HANG_FLAG exists
output=""
for arg in "$@"; do
  if [ "$previous" = "-o" ]; then output="$arg"; fi
  previous="$arg"
done
if [ -e "$HANG_FLAG" ] && grep -q MKL "$arg"; then : > "$STARTED_FLAG"; sleep 60; fi
cat "$arg" > "$output"
"""


def fixture_tree(root: Path, text: str, compiler: Path) -> None:
    """A tree as --blas-switch leaves one: a source and a ninja build of it (what ``ninja -t compdb``
    reads)."""
    (root / "build").mkdir(parents=True)
    (root / "a.cpp").write_text(text)
    (root / "build" / "build.ninja").write_text(
        f"rule cc\n  command = {compiler} -O2 -MD -MT $out -MF $out.d -o $out -c $in\n"
        "build obj/a.cpp.o: cc ../a.cpp\n"
    )


def test_explain_misses_killed_with_the_trees_swapped_puts_them_back(tmp_path: Path) -> None:
    """SIGKILL while the first BLAS's tree stands at the path: the next run puts both trees back where
    --blas-switch left them, then explains."""
    work = tmp_path / "work"
    compiler = tmp_path / "fake-preprocessor"
    compiler.write_text(FAKE_PREPROCESSOR)
    compiler.chmod(0o755)
    fixture_tree(work / "src", "int openblas = 0;\n", compiler)
    fixture_tree(work / "src_moved_MKL", "// MKL\nint mkl = 1;\n", compiler)
    report = work / "megabuild-real-graph-blas.json"
    report.write_text(json.dumps({
        "builds": [{"blas": "MKL"}, {"blas": "OpenBLAS"}],
        "switch": {"second_compiled_in_both_graphs": ["obj/a.cpp.o"]},
    }))  # fmt: skip
    hang, started = tmp_path / "hang", tmp_path / "started"
    hang.touch()
    env = {**os.environ, "HANG_FLAG": str(hang), "STARTED_FLAG": str(started)}
    command = [
        sys.executable,
        str(BENCHMARKS / "megabuild_real_graph.py"),
        "--work",
        str(work),
        "--explain-misses",
    ]
    child = subprocess.Popen(command, env=env, start_new_session=True, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not started.exists():
            assert child.poll() is None and time.monotonic() < deadline, "never reached the MKL tree's turn"
            time.sleep(0.02)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    # killed mid-way: the MKL tree at the path, the second BLAS's aside
    assert (work / "src" / "a.cpp").read_text().startswith("// MKL")
    assert (work / "src_OpenBLAS" / "a.cpp").exists() and not (work / "src_moved_MKL").exists()
    hang.unlink()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert (work / "src" / "a.cpp").read_text() == "int openblas = 0;\n"
    assert (work / "src_moved_MKL" / "a.cpp").read_text().startswith("// MKL")
    assert not (work / "src_OpenBLAS").exists()
    explained = json.loads(report.read_text())["explained"]
    assert explained == {
        "obj/a.cpp.o": {"why": "content", "lines": ["- // MKL", "- int mkl = 1;", "+ int openblas = 0;"]}
    }
