"""Package test of CUDA pytorch: a C++/CUDA extension as downstream packages write one, built and run.

torch.utils.cpp_extension compiles a small CUDA kernel with nvcc against the installed torch (its headers
through site-packages/torch/include, the CUDA toolkit's under $PREFIX/targets/<arch> by patch 0015) and
loads it. On a machine with a GPU the kernel runs and must compute x + 1; without one the build and the
import are the test (``--require-gpu`` makes a missing GPU a failure, as gpu-check does).
Prints one JSON line with what it found; exit status 1 on any failure.

    python check_cuda_extension.py [--build-dir DIR] [--require-gpu]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

CPP_SOURCE = "torch::Tensor add_one(torch::Tensor x);"
CUDA_SOURCE = r"""
#include <c10/cuda/CUDAException.h>

__global__ void add_one_kernel(const float* x, float* y, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}

torch::Tensor add_one(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "add_one takes a float CUDA tensor");
  const auto input = x.contiguous();
  auto output = torch::empty_like(input);
  const int64_t n = input.numel();
  add_one_kernel<<<(n + 255) / 256, 256>>>(input.data_ptr<float>(), output.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return output;
}
"""


def build_and_run(build_dir: str) -> dict:
    import torch
    from torch.utils import cpp_extension

    module = cpp_extension.load_inline(
        "check_cuda_extension_add_one",
        cpp_sources=CPP_SOURCE,
        cuda_sources=CUDA_SOURCE,
        functions=["add_one"],
        build_directory=build_dir,
        with_cuda=True,
    )
    found = {
        "module": module.__file__,
        "cuda_home": cpp_extension.CUDA_HOME,
        "include_paths": [os.path.realpath(path) for path in cpp_extension.include_paths("cuda")],
        "gpu": torch.cuda.is_available(),
    }
    if found["gpu"]:
        x = torch.arange(4096, dtype=torch.float32, device="cuda")
        found["correct"] = torch.equal(module.add_one(x).cpu(), x.cpu() + 1)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", help="where to build (default: a new temporary directory)")
    parser.add_argument("--require-gpu", action="store_true", help="fail when no GPU can run the kernel")
    args = parser.parse_args(argv)
    build_dir = args.build_dir or tempfile.mkdtemp(prefix="check_cuda_extension-")
    os.makedirs(build_dir, exist_ok=True)
    found = build_and_run(build_dir)
    print(json.dumps(found))
    if found["gpu"] and not found["correct"]:
        print("FAIL: the extension's kernel computed wrong numbers", file=sys.stderr)
        return 1
    if not found["gpu"] and args.require_gpu:
        print("FAIL: no GPU to run the extension's kernel on (--require-gpu)", file=sys.stderr)
        return 1
    print("OK: CUDA extension built" + (" and ran" if found["gpu"] else " (no GPU here, not run)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
