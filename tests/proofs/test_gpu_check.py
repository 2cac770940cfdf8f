"""gpu-check without a GPU (the one-line answer and its exit status) and its layout logic.

The GPU checks themselves ran on a lent H100 (docs/records/2026-11-22-gpu-check-h100.md records their output);
here a small installed-torch tree (a test double: real file names of the 2.13.0 CUDA wheel, tiny contents)
goes through the real layout, staging and merging, and the verdicts are computed from probe answers of the
form the GPU run printed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from feedstock_tools.common.errors import ToolError
from feedstock_tools.proofs import gpu_check
from feedstock_tools.proofs.wheels.wheel_layout import WheelTag

REPO = Path(__file__).resolve().parents[2]
TAG = WheelTag("2.13.0", "3.12", "x86_64")
# what the H100 run printed for env-without-linalg (docs/records/2026-11-22-gpu-check-h100.md)
MISSING_LINALG = (
    "RuntimeError: Error in dlopen: libtorch_cuda_linalg.so: cannot open shared object file: "
    "No such file or directory"
)


def run_cli(arguments: list[str], path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "feedstock_tools", "gpu-check", *arguments],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PATH": path},
        check=False,
    )


def test_without_nvidia_smi_it_says_so_in_one_line(tmp_path: Path) -> None:
    work = tmp_path / "work"
    result = run_cli(["--installed", "--work", str(work)], path=str(tmp_path))
    assert result.returncode == gpu_check.EXIT_NO_GPU == 3
    assert result.stderr == "gpu-check: no NVIDIA GPU present (no working nvidia-smi -L): nothing checked\n"
    assert not work.exists()


@pytest.mark.parametrize(
    ("script", "found"),
    [
        (
            "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'; exit 9",
            None,
        ),
        ("echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)'", "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)"),
    ],
    ids=["driver-missing", "gpu-listed"],
)
def test_gpu_detection_reads_nvidia_smi(tmp_path: Path, monkeypatch, script: str, found: str | None) -> None:
    nvidia_smi = tmp_path / "nvidia-smi"  # test double of the driver's tool
    nvidia_smi.write_text(f"#!/bin/sh\n{script}\n")
    nvidia_smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpu_check.find_gpu() == found


def test_a_failing_driver_is_no_gpu_for_the_cli(tmp_path: Path) -> None:
    (tmp_path / "nvidia-smi").write_text("#!/bin/sh\nexit 9\n")
    (tmp_path / "nvidia-smi").chmod(0o755)
    result = run_cli(["--installed", "--work", str(tmp_path / "work")], path=f"{tmp_path}:/usr/bin:/bin")
    assert result.returncode == 3 and len(result.stderr.splitlines()) == 1


def installed_torch(site_packages: Path, extra: tuple[str, ...] = ()) -> Path:
    """Test double of a pip-installed CUDA torch: a few real paths of the 2.13.0 CUDA wheel."""
    paths = (
        "torch/__init__.py",
        "torch/__pycache__/__init__.cpython-312.pyc",
        "torch/lib/libc10.so",
        "torch/lib/libtorch_cuda.so",
        "torch/lib/libtorch_cuda_linalg.so",
        "torch/lib/libtorch_python.so",
        "torch/include/THC/THCAtomics.cuh",
        "torch/share/cmake/Torch/TorchConfig.cmake",
        "torchgen/__init__.py",
        "functorch/__init__.py",
        "torch-2.13.0.dist-info/METADATA",
        *extra,
    )
    for path in paths:
        (site_packages / path).parent.mkdir(parents=True, exist_ok=True)
        (site_packages / path).write_text(path)
    return site_packages


def test_installed_torch_is_laid_out_like_a_build_without_pycache(tmp_path: Path) -> None:
    site = installed_torch(tmp_path / "site-packages")
    trees = gpu_check.wheel_layout.lay_out_installed_torch(site, TAG, tmp_path / "src")
    assert (trees.install / "lib" / "libtorch_cuda_linalg.so").is_file()
    assert (trees.setuptools / "torch" / "__init__.py").is_file()
    assert (trees.metadata / "torch-2.13.0.dist-info" / "METADATA").is_file()
    assert not list(trees.setuptools.rglob("__pycache__"))
    assert trees.setuptools.name == "lib.linux-x86_64-cpython-312"


def test_unplaced_files_stop_unless_allowed_then_are_listed(tmp_path: Path) -> None:
    site = installed_torch(tmp_path / "site-packages", extra=("torch/include/xnnpack.h",))
    trees = gpu_check.wheel_layout.lay_out_installed_torch(site, TAG, tmp_path / "src")
    assert gpu_check.drop_unplaced_files(trees, allowed=False) == []
    assert (trees.install / "include" / "xnnpack.h").exists()  # staging will stop with its name
    assert gpu_check.drop_unplaced_files(trees, allowed=True) == [
        str(trees.install / "include" / "xnnpack.h")
    ]
    assert not (trees.install / "include" / "xnnpack.h").exists()


def test_environments_with_and_without_the_linalg_package(tmp_path: Path, capsys) -> None:
    site = installed_torch(tmp_path / "site-packages")
    cuda_lib = site / "nvidia" / "cu13" / "lib"
    cuda_lib.mkdir(parents=True)
    (cuda_lib / "libcublas.so.13").write_text("cublas")
    pybind11 = tmp_path / "pybind11-include"
    (pybind11 / "pybind11").mkdir(parents=True)
    interpreter = gpu_check.Interpreter(
        Path(sys.executable), "3.12", site, site / "torch", "2.13.0", pybind11
    )
    work = tmp_path / "work"
    trees = gpu_check.wheel_layout.lay_out_installed_torch(site, TAG, work / "src")
    envs = gpu_check.build_environments(trees, TAG, interpreter, work)
    assert (envs["env"] / "lib" / "libtorch_cuda_linalg.so").is_file()
    assert not (envs["env-without-linalg"] / "lib" / "libtorch_cuda_linalg.so").exists()
    for env in envs.values():
        assert (env / "lib" / "libcublas.so.13").resolve() == cuda_lib / "libcublas.so.13"
        assert (env / "include" / "pybind11").resolve() == pybind11 / "pybind11"
        assert (env / TAG.site_packages / "torch" / "include").readlink() == Path("../../../../include")
    assert "| libtorch-cuda-linalg | 1 | 0 |" in capsys.readouterr().out


def test_a_cpu_torch_is_refused(tmp_path: Path) -> None:
    site = installed_torch(tmp_path / "site-packages")
    (site / "torch" / "lib" / "libtorch_cuda_linalg.so").unlink()
    interpreter = gpu_check.Interpreter(Path(sys.executable), "3.12", site, site / "torch", "2.13.0", None)
    trees = gpu_check.wheel_layout.lay_out_installed_torch(site, TAG, tmp_path / "work" / "src")
    with pytest.raises(ToolError, match="gpu-check needs a CUDA build of torch"):
        gpu_check.build_environments(trees, TAG, interpreter, tmp_path / "work")


def probe(env: Path, **changes) -> dict:
    """An answer of TORCH_PROBE as the H100 run gave it for env."""
    answer = {
        "torch_file": str(env / TAG.site_packages / "torch" / "__init__.py"),
        "version": "2.11.0+cu130",
        "cuda": "13.0",
        "available": True,
        "device": "NVIDIA H100 80GB HBM3",
        "matmul_error": 0.0,
        "linalg_before": [],
        "linalg_after": [str(env / "lib" / "libtorch_cuda_linalg.so")],
        "inv_error": 2.9e-15,
        "cholesky_error": 4.5e-13,
        "has_magma": True,
    }
    return {**answer, **changes}


def verdicts(results: list[gpu_check.CheckResult]) -> dict[str, bool]:
    return {result.name: result.ok for result in results}


def test_verdicts_on_torch_in_env(tmp_path: Path) -> None:
    env = tmp_path / "env"
    assert all(verdicts(gpu_check.check_torch(env, probe(env), TAG)).values())
    eager = probe(env, linalg_before=[str(env / "lib" / "libtorch_cuda_linalg.so")])
    assert not verdicts(gpu_check.check_torch(env, eager, TAG))["linalg-lazy"]
    elsewhere = probe(env, linalg_after=["/opt/torch/lib/libtorch_cuda_linalg.so"])
    assert not verdicts(gpu_check.check_torch(env, elsewhere, TAG))["linalg-lazy"]
    wrong_torch = probe(env, torch_file="/opt/venv/lib/python3.12/site-packages/torch/__init__.py")
    assert not verdicts(gpu_check.check_torch(env, wrong_torch, TAG))["import"]
    assert verdicts(gpu_check.check_torch(env, probe(env, available=False), TAG)) == {"import": False}


def test_verdict_without_the_linalg_package() -> None:
    missing = gpu_check.check_without_linalg({"linalg_error": MISSING_LINALG, "has_magma": True})
    assert missing.ok and MISSING_LINALG in missing.detail
    assert not gpu_check.check_without_linalg({"has_magma": True}).ok  # linear algebra must not work


def test_results_table() -> None:
    table = gpu_check.format_results([gpu_check.CheckResult("import", True, "torch 2.13.0")])
    assert table.splitlines() == [
        "| check | result | detail |",
        "|---|---|---|",
        "| import | PASS | torch 2.13.0 |",
    ]


# --- the probes and the CMake consumer run through the one runner ------------------------------------------


def test_a_probe_answers_through_the_runner_and_its_log_keeps_what_it_said(tmp_path: Path) -> None:
    """run_probe reads the probe's JSON line from the log the runner wrote; a failed probe's error names the
    compiler's first error line and the last lines, stdout and stderr alike."""
    log = tmp_path / "probe.log"
    answer = gpu_check.run_probe(
        "print('{\"correct\": true}')", dict(os.environ), Path(sys.executable), 60, log
    )
    assert answer == {"correct": True}
    assert log.read_text() == '{"correct": true}\n'
    failing = (
        "import sys; print('x.cu:3:7: error: no such member', flush=True); "
        "print('ninja: build stopped', file=sys.stderr); sys.exit(2)"
    )
    answer = gpu_check.run_probe(failing, dict(os.environ), Path(sys.executable), 60, log)
    assert answer == {
        "probe_error": "exit 2: x.cu:3:7: error: no such member | x.cu:3:7: error: no such member | "
        "ninja: build stopped"
    }


def test_a_probe_past_its_deadline_is_stopped_with_its_group(tmp_path: Path) -> None:
    """A probe still running at its deadline is stopped, the grandchild it started with it (its process
    group), and the check reads 'no answer'."""
    pid_file = tmp_path / "grandchild.pid"
    hang = (
        "import subprocess, sys, time; "
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
        f"open({str(pid_file)!r}, 'w').write(str(child.pid)); time.sleep(120)"
    )
    answer = gpu_check.run_probe(hang, dict(os.environ), Path(sys.executable), 1, tmp_path / "probe.log")
    assert answer == {"probe_error": "no answer within 1s"}
    stat = Path(f"/proc/{int(pid_file.read_text())}/stat")
    deadline = time.monotonic() + 10
    while stat.exists() and stat.read_text().split(") ")[-1][0] not in "ZX" and time.monotonic() < deadline:
        time.sleep(0.05)  # polled: the stopped grandchild is gone, or a zombie its new parent reaps
    assert not stat.exists() or stat.read_text().split(") ")[-1][0] in "ZX"
