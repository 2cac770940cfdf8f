"""Package test of CUDA pytorch: the GPU code of the build is what the build and the recipe say it is.

Three statements about one build must agree, and a GPU, where there is one, must be covered:

* the build's list: ``CF_TORCH_CUDA_ARCH_LIST``, which libtorch's activation script exports (the driver's
  ``TORCH_CUDA_ARCH_LIST``: meta.yaml's ``cuda_arch_list``, through script_env), e.g. ``7.5;8.0;12.0+PTX``;
* torch's own: ``torch.cuda.get_arch_list()``, the arch flags compiled into torch_python. 2.13.0 returns
  them without a GPU (torch/cuda/__init__.py: ``get_arch_list`` needs only ``_is_compiled()``), in the
  form of FindCUDA's ``nvcc_archs_readable`` (PyTorch's select_compute_arch.cmake: ``sm_XY`` for each
  architecture, ``compute_XY`` for each ``+PTX`` one): so exactly ``sm_75 sm_80 sm_120 compute_120``;
* the recipe's ``__cuda_arch`` bound (``--cuda-arch-min``, meta.yaml's ``cuda_arch_min``): the oldest
  architecture of the list, below which the build has no code.

With a GPU, each device's compute capability must be covered by the list (code for the same major
version and an equal or lower minor, except the integrated Tegra GPUs, which run only their own: PyTorch's
``DEVICE_REQUIREMENT`` table in torch/cuda/__init__.py; or PTX of an equal or lower version, which the
driver compiles), be at least the bound, and run a kernel of libtorch_cuda. Without a GPU the script says
so and checks the three statements (``--require-gpu`` makes a missing GPU a failure). One JSON line of what
it found; exit status 1 on any failure.

    python check_cuda_arch_list.py --cuda-arch-min 7.5 [--require-gpu]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

VARIABLE = "CF_TORCH_CUDA_ARCH_LIST"
_ARCH = re.compile(r"([0-9]+)\.([0-9])(\+PTX)?")
# integrated (Tegra) GPUs: code of another minor version of their major does not run on them (PyTorch
# 2.13.0 DEVICE_REQUIREMENT: 5.0 excludes 5.3, 6.0 excludes 6.2, 7.0 excludes 7.2, 8.0 and 8.6 exclude 8.7)
INTEGRATED = {(5, 3), (6, 2), (7, 2), (8, 7)}

Capability = tuple[int, int]


def parse_arch_list(text: str) -> tuple[list[Capability], list[Capability]]:
    """(architectures with code, architectures with PTX) of a TORCH_CUDA_ARCH_LIST such as ``7.5;12.0+PTX``;
    ValueError on anything else."""
    sass, ptx = [], []
    for entry in filter(None, re.split(r"[;\s]+", text.strip())):
        match = _ARCH.fullmatch(entry)
        if match is None:
            raise ValueError(f"{entry!r} in {VARIABLE}={text!r} is not an architecture (X.Y or X.Y+PTX)")
        capability = (int(match[1]), int(match[2]))
        sass.append(capability)
        if match[3]:
            ptx.append(capability)
    if not sass:
        raise ValueError(f"{VARIABLE} is empty")
    return sass, ptx


def torch_names(sass: list[Capability], ptx: list[Capability]) -> list[str]:
    """The names ``torch.cuda.get_arch_list()`` gives that list: sm_XY for each, then compute_XY for PTX."""
    return [f"sm_{major}{minor}" for major, minor in sass] + [
        f"compute_{major}{minor}" for major, minor in ptx
    ]


def covers(device: Capability, sass: list[Capability], ptx: list[Capability]) -> bool:
    """Whether a GPU of compute capability ``device`` runs code built for this list."""
    if device in INTEGRATED:
        return device in sass or any(arch <= device for arch in ptx)
    same_major = any(major == device[0] and minor <= device[1] for major, minor in sass)
    return same_major or any(arch <= device for arch in ptx)


def problems(
    arch_list: str | None, torch_arch_list: list[str], cuda_arch_min: str, devices: list[Capability]
) -> list[str]:
    """What is wrong (empty when the build, torch, the recipe and the devices agree)."""
    if not arch_list:
        return [f"{VARIABLE} is not set: libtorch's activation script (etc/conda/activate.d) did not run"]
    try:
        sass, ptx = parse_arch_list(arch_list)
    except ValueError as exc:
        return [str(exc)]
    found = []
    expected = torch_names(sass, ptx)
    if sorted(torch_arch_list) != sorted(expected):
        found.append(f"torch.cuda.get_arch_list() is {torch_arch_list}, {VARIABLE} says {expected}")
    oldest = "{}.{}".format(*min(sass))
    if cuda_arch_min != oldest:
        found.append(
            f"the recipe constrains __cuda_arch >={cuda_arch_min}, the oldest architecture of the build is "
            f"{oldest}: the recipe must take its bound from the list it builds with (cuda_arch_list)"
        )
    minimum = tuple(int(part) for part in cuda_arch_min.split("."))
    for index, device in enumerate(devices):
        name = "{}.{}".format(*device)
        if device < minimum:
            found.append(
                f"GPU {index} ({name}) is below __cuda_arch >={cuda_arch_min}: the solver would refuse it"
            )
        elif not covers(device, sass, ptx):
            found.append(f"GPU {index} ({name}) is not covered by {arch_list}")
    return found


def run_kernels(count: int) -> list[str]:
    """An elementwise kernel of libtorch_cuda on each device ("no kernel image is available" otherwise)."""
    import torch

    failed = []
    for index in range(count):
        try:
            value = (torch.ones(256, device=f"cuda:{index}") * 2).sum().item()
        except RuntimeError as exc:
            failed.append(f"GPU {index}: {str(exc).splitlines()[0]}")
            continue
        if value != 512.0:
            failed.append(f"GPU {index}: ones(256) * 2 summed to {value}, not 512")
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cuda-arch-min", required=True, help="the recipe's __cuda_arch lower bound, X.Y")
    parser.add_argument("--require-gpu", action="store_true", help="fail when no GPU is present")
    args = parser.parse_args(argv)

    import torch

    gpu = torch.cuda.is_available()
    devices = (
        [tuple(torch.cuda.get_device_capability(i)) for i in range(torch.cuda.device_count())] if gpu else []
    )
    found = problems(os.environ.get(VARIABLE), torch.cuda.get_arch_list(), args.cuda_arch_min, devices)
    if gpu and not found:
        found = run_kernels(len(devices))
    if not gpu and args.require_gpu:
        found.append("no GPU (torch.cuda.is_available() is False) and --require-gpu was given")
    report = {
        VARIABLE: os.environ.get(VARIABLE),
        "torch.cuda.get_arch_list": torch.cuda.get_arch_list(),
        "cuda_arch_min": args.cuda_arch_min,
        "devices": ["{}.{}".format(*d) for d in devices],
        "gpu": gpu if gpu else "none: the build's lists are checked, no device",
        "problems": found,
    }
    print(json.dumps(report))
    for problem in found:
        print(f"check_cuda_arch_list: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
