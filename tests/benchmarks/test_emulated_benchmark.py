"""benchmarks/emulated_aarch64.py: the CLI run for real against this interpreter.

CI has no torch and no QEMU, so the run uses the workloads that need neither (interpreter start, pytest on
a generated file); the emulated figures themselves are in docs/records/2026-11-22-emulated-aarch64.md.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
CLI = BENCHMARKS / "emulated_aarch64.py"


def benchmark(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(CLI), *map(str, args)], capture_output=True, text=True, check=False
    )


def test_run_times_each_workload_and_compare_divides_medians(tmp_path: Path) -> None:
    report = tmp_path / "native.json"
    done = benchmark(
        "run", "--python", sys.executable, "--workloads", "python-startup", "pytest-generated",
        "--repeat", "2", "--pytest-tests", "5", "--json", report,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "| python-startup |" in done.stdout and "| pytest-generated |" in done.stdout
    assert "[run 2/2]" in done.stderr  # progress goes to stderr, the table to stdout
    measured = json.loads(report.read_text())
    assert measured["machine"] == platform.machine()
    assert measured["python_version"] == platform.python_version()
    for name in ("python-startup", "pytest-generated"):
        entry = measured["results"][name]
        assert entry["failure"] is None
        assert len(entry["seconds"]) == 2 and all(seconds > 0 for seconds in entry["seconds"])

    # the same report with every run ten times slower plays the emulated side
    slower = dict(measured, machine="aarch64")
    slower["results"] = {
        name: dict(entry, seconds=[seconds * 10 for seconds in entry["seconds"]])
        for name, entry in measured["results"].items()
    }
    emulated = tmp_path / "emulated.json"
    emulated.write_text(json.dumps(slower))
    done = benchmark("compare", report, emulated)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| python-startup")]
    assert len(rows) == 1 and rows[0].endswith("| 10.0x |")


def test_a_failing_workload_is_reported_and_fails_the_run() -> None:
    # check_torch_config.py rejects the argument before it imports torch, so this needs no torch
    done = benchmark(
        "run", "--python", sys.executable, "--workloads", "check_torch_config.py", "--repeat", "1",
        "--torch-config-args=--blas=none --cuda=no",
    )  # fmt: skip
    assert done.returncode == 1
    assert "| check_torch_config.py |" in done.stdout and "exit 2: " in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--python", "/nonexistent/python"], "cannot start '/nonexistent/python'"),
        (["run", "--python", f"{sys.executable} -c 'raise SystemExit(3)'"], "does not run Python"),
        (["cpuinfo", "--python", sys.executable, "--sysroot", "SYSROOT"], "needs an aarch64 interpreter"),
        (["compare", "missing.json", "missing.json"], "is not a report of `run --json`"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    args = [str(tmp_path / a) if a in ("SYSROOT", "missing.json") else a for a in args]
    done = benchmark(*args, "--json", tmp_path / "out.json") if args[0] == "run" else benchmark(*args)
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_cpuinfo_text_decodes_midr_and_hwcaps_as_qemu_prints_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from emulated_aarch64 import cpuinfo_text

    # what qemu-aarch64 7.2's default CPU reported here (docs/reference/emulated-tests.md): MIDR_EL1, HWCAP,
    # HWCAP2
    text = cpuinfo_text(0x000F0510, 0xECFFFFFB, 0x7F877FFF, processors=2)
    blocks = text.strip().split("\n\n")
    assert len(blocks) == 2 and blocks[1].startswith("processor\t: 1\n")
    fields = dict(line.split(":", 1) for line in blocks[0].splitlines())
    assert fields["CPU implementer\t"].strip() == "0x00"
    assert fields["CPU part\t"].strip() == "0x051"
    assert fields["CPU variant\t"].strip() == "0x0"
    assert fields["CPU architecture"].strip() == "8"
    features = fields["Features\t"].split()
    assert features[:3] == ["fp", "asimd", "aes"]  # bit 2, evtstrm, is clear
    assert "sve" in features and "sve2" in features and "dgh" not in features  # HWCAP2 bit 15 is clear
