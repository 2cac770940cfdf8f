"""benchmarks/megabuild_real_graph.py without Debian's source: its arithmetic and its refusals.

The measurement itself needs Debian's pytorch 2.6.0 source and an hour
(docs/records/2026-11-25-real-graph.md); its findings are tested on fixtures cut from it in
test_megabuild_ninja_graph.py.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "megabuild_real_graph.py"


def load_benchmark():
    if str(BENCHMARK.parent) not in sys.path:  # its sibling real_graph_blas.py, as a script run finds it
        sys.path.insert(0, str(BENCHMARK.parent))
    spec = importlib.util.spec_from_file_location("megabuild_real_graph", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["megabuild_real_graph"] = module
    spec.loader.exec_module(module)
    return module


def real_compile_cli(work: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCHMARK), "--work", str(work), "--real-compile", "3.12"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_ratio_counts_later_passes_against_pass_one_plus_python_linked_objects() -> None:
    bench = load_benchmark()
    first = bench.PassResult("1 libtorch-split", "3.10", objects={"python": 0, "other": 1349})
    clean = bench.PassResult("4 pytorch (py3.11)", "3.11", objects={"python": 154, "other": 0})
    relinking = bench.PassResult(
        "4 pytorch (py3.12)", "3.12", objects={"python": 154, "other": 1},
        linked={"python": ["lib/libtorch_python.so"], "other": ["lib/libtorch.so"]},
    )  # fmt: skip
    totals = bench.summary([first, clean, clean], 154, 1374)
    assert (totals["objects_compiled"], totals["limit"], totals["compile_work_ratio"]) == (1657, 1657, 1.0)
    assert totals["non_python_edges_rerun"] == 0
    totals = bench.summary([first, clean, relinking], 154, 1374)
    assert totals["compile_work_ratio"] == round(1658 / 1657, 4)
    assert totals["non_python_edges_rerun"] == 2  # one object and one library outside the Python targets


def test_real_compile_needs_an_earlier_run_and_writes_nothing(tmp_path: Path) -> None:
    run = real_compile_cli(tmp_path)
    assert run.returncode == 1
    assert run.stderr.splitlines() == [
        f"megabuild_real_graph: --real-compile: no report {tmp_path / 'megabuild-real-graph.json'}; "
        "run without --real-compile first"
    ]
    assert list(tmp_path.iterdir()) == []


def test_real_compile_refuses_a_report_without_its_build_tree(tmp_path: Path) -> None:
    report = tmp_path / "megabuild-real-graph.json"
    report.write_text(json.dumps({"passes": []}))
    run = real_compile_cli(tmp_path)
    assert run.returncode == 1
    assert "has no build.ninja; run without --real-compile first" in run.stderr
    assert json.loads(report.read_text()) == {"passes": []}  # the report is left as it was
