"""The in-process torch workloads of benchmarks/emulated_aarch64.py, run inside the measured interpreter.

Each workload is a fixed piece of CPU work of the kind the recipe's upstream selections
(recipe/tests/run_upstream_tests.py) spend their time on: many small tensor operations, float64 LAPACK
calls on small matrices, autograd, nn kernels and dtype promotion. Each runs twice in one process: the
first ("cold") run pays one-time costs (lazy initialisation and, under QEMU, translating the code it
touches), the second ("warm") run is the steady state. A test suite touches most of its code once, so the
cold figure is the nearer one for package tests.

    python emulation_workloads.py --threads 1 tensor-ops linalg-float64

prints one JSON object: the interpreter's machine, torch's version and the seconds of each run.
Needs torch (and nothing else); standard library otherwise.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable


def tensor_ops(torch) -> None:
    """Creation, arithmetic, reductions, sorting, indexing and concatenation of small tensors."""
    for step in range(2000):
        a = torch.arange(1000, dtype=torch.float32).reshape(10, 100) + step
        b = a * 2 + 1
        order = torch.argsort(b.sum(1), descending=True)
        joined = torch.cat([a[order], b])[:, ::2].contiguous()
        picked = torch.where(joined > 50, joined, -joined)
        picked.max(), picked.mean(), picked.cumsum(0)
        torch.nn.functional.softmax(a, dim=1).topk(3, dim=1)


def linalg_float64(torch) -> None:
    """inv, solve, cholesky, svd and det of small float64 matrices (test_linalg's selection)."""
    generator = torch.Generator().manual_seed(0)
    for size in (4, 16, 64):
        for _ in range(100):
            m = torch.randn(size, size, dtype=torch.float64, generator=generator)
            spd = m @ m.T + size * torch.eye(size, dtype=torch.float64)
            rhs = torch.randn(size, 3, dtype=torch.float64, generator=generator)
            torch.linalg.inv(spd)
            torch.linalg.solve(spd, rhs)
            torch.linalg.cholesky(spd)
            torch.linalg.svd(m)
            torch.linalg.det(m)


def autograd_mlp(torch) -> None:
    """Forward, backward and a plain gradient step of a small MLP (test_autograd's engine work)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.Tanh(), torch.nn.Linear(128, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10),
    )  # fmt: skip
    inputs, targets = torch.randn(32, 64), torch.randint(0, 10, (32,))
    for _ in range(300):
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(inputs), targets).backward()
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.sub_(0.01 * parameter.grad)


def nn_conv_linear(torch) -> None:
    """Conv2d, pooling and Linear forward and backward (test_nn's kernels)."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 8, 3, padding=1)
    linear = torch.nn.Linear(8 * 16 * 16, 10)
    images = torch.randn(4, 3, 32, 32)
    for _ in range(100):
        features = torch.nn.functional.max_pool2d(torch.relu(conv(images)), 2)
        linear(features.flatten(1)).square().mean().backward()


def type_promotion(torch) -> None:
    """Elementwise add/mul/comparison over every pair of common dtypes (test_type_promotion)."""
    dtypes = (
        torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
        torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
    )  # fmt: skip
    values = {dtype: torch.ones(16, dtype=dtype) for dtype in dtypes}
    for left in dtypes * 100:
        for right in dtypes:
            result = values[left] + values[right]
            assert result.dtype == torch.result_type(values[left], values[right])
            values[left] * values[right], values[left] == values[right]


WORKLOADS: dict[str, Callable] = {
    "tensor-ops": tensor_ops,
    "linalg-float64": linalg_float64,
    "autograd-mlp": autograd_mlp,
    "nn-conv-linear": nn_conv_linear,
    "type-promotion": type_promotion,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="+", choices=list(WORKLOADS), help="which workloads to run")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    seconds: dict[str, dict[str, float]] = {}
    for name in args.workloads:
        runs = {}
        for run in ("cold", "warm"):
            start = time.perf_counter()
            WORKLOADS[name](torch)
            runs[run] = time.perf_counter() - start
        seconds[name] = runs
    print(json.dumps({"machine": platform.machine(), "torch": torch.__version__, "seconds": seconds}))


if __name__ == "__main__":
    main()
