"""Package test of pytorch: a curated part of PyTorch's own test suite, within a time budget.

Runs each selection with pytest from the source tree's test/ directory (the recipe's test/source_files),
one after the other, until the budget is used up. A failing selection fails the package test; a selection
that runs past the remaining budget counts as a failure too (a hang); selections not started because the
budget ran out are listed, not failed, so slow CI machines still test the most important part first.

    python run_upstream_tests.py --budget-seconds=1800 [--device=cuda]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Selection:
    """One pytest run: a test file of PyTorch's suite and a -k expression (None: the whole file)."""

    path: str
    keyword: str | None
    why: str


# Most important first: what a packaging mistake breaks (linking, BLAS/LAPACK, autograd, serialization).
CPU_SELECTIONS: tuple[Selection, ...] = (
    Selection("test/test_torch.py", "TestTorch and not cuda", "tensor basics, serialization, dtypes"),
    Selection("test/test_linalg.py", "cpu and (inv or solve or cholesky or svd or det or dot) and float64",
              "BLAS/LAPACK through the packaged BLAS"),
    Selection("test/test_autograd.py", "TestAutograd and not cuda", "autograd engine"),
    Selection("test/test_type_promotion.py", None, "dtype rules of the generated operators"),
    Selection("test/test_nn.py", "TestNN and not cuda", "nn modules through the C++ kernels"),
)  # fmt: skip
CUDA_SELECTIONS: tuple[Selection, ...] = (
    Selection("test/test_linalg.py", "cuda and (cholesky or svd or lstsq or inv) and float32",
              "libtorch_cuda_linalg: cuSOLVER, and MAGMA when installed"),
    Selection("test/test_torch.py", "TestTorchDeviceTypeCUDA and (copy or index)", "CUDA kernels"),
)  # fmt: skip


def selections_for(device: str) -> tuple[Selection, ...]:
    return CPU_SELECTIONS + (CUDA_SELECTIONS if device == "cuda" else ())


def pytest_command(selection: Selection) -> list[str]:
    command = [sys.executable, "-m", "pytest", selection.path, "-q", "-p", "no:cacheprovider", "-rf"]
    if selection.keyword:
        command += ["-k", selection.keyword]
    return command


def run(selections: tuple[Selection, ...], source_dir: Path, budget: float) -> int:
    missing = [s.path for s in selections if not (source_dir / s.path).is_file()]
    if missing:
        print(
            f"FAIL: {', '.join(missing)} missing under {source_dir}: add test/ to test/source_files",
            file=sys.stderr,
        )
        return 1
    environment = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "4")}
    deadline = time.monotonic() + budget
    failed: list[str] = []
    for index, selection in enumerate(selections):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            skipped = ", ".join(s.path for s in selections[index:])
            print(f"budget of {budget:.0f}s used up; not run: {skipped}")
            break
        label = f"{selection.path} -k {selection.keyword!r}" if selection.keyword else selection.path
        print(f"== {label} ({selection.why}); {remaining:.0f}s left", flush=True)
        try:
            result = subprocess.run(
                pytest_command(selection), check=False, cwd=source_dir, env=environment, timeout=remaining
            )
        except subprocess.TimeoutExpired:
            failed.append(f"{label} (still running when the budget ran out)")
            break
        if result.returncode != 0:
            failed.append(f"{label} (pytest exit status {result.returncode})")
    for failure in failed:
        print(f"FAIL: {failure}", file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-seconds", type=float, default=1800, help="time for all selections")
    parser.add_argument("--source-dir", type=Path, default=Path.cwd(), help="directory holding test/ (cwd)")
    parser.add_argument(
        "--device", choices=("auto", "cpu", "cuda"), default="auto", help="cuda adds GPU selections"
    )
    args = parser.parse_args(argv)
    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    return run(selections_for(device), args.source_dir, args.budget_seconds)


if __name__ == "__main__":
    sys.exit(main())
