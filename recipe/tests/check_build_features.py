"""Package test of pytorch: is what the build promises built in, and does BLAS get complex dots right?

* complex ``torch.dot`` / ``torch.vdot`` against an elementwise sum, in complex64 and complex128: the
  Fortran ``cdotu_``/``zdotu_`` return convention differs between BLAS implementations, and a wrong one gives
  garbage or crashes (what patch 0005 fixes for generic BLAS; conda-forge checks the same with
  ``torch.dot`` of complex128);
* each feature named with ``--require``: ``onednn`` (``torch.backends.mkldnn``), ``distributed``
  (``torch.distributed`` with Gloo), ``cudnn`` and ``nccl`` (compiled in, and their libraries loadable:
  both work without a GPU), ``mps`` (the Metal backend compiled in; where the machine has a Metal device, a
  matrix product on it equals the CPU's: virtual macOS runners may have none, so only the build is required).

    python check_build_features.py --require onednn distributed cudnn nccl
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

FEATURES = ("onednn", "distributed", "cudnn", "nccl", "mps")


def complex_dot_problems(torch) -> list[str]:
    found = []
    generator = torch.Generator().manual_seed(0)
    for dtype in (torch.complex64, torch.complex128):
        # 257 elements: long enough that every implementation takes its BLAS path
        a = torch.randn(257, dtype=dtype, generator=generator)
        b = torch.randn(257, dtype=dtype, generator=generator)
        tolerance = 1e-3 if dtype == torch.complex64 else 1e-10
        for name, got, expected in (
            ("dot", torch.dot(a, b), (a * b).sum()),
            ("vdot", torch.vdot(a, b), (a.conj() * b).sum()),
        ):
            if abs(complex(got) - complex(expected)) > tolerance * max(1.0, abs(complex(expected))):
                found.append(
                    f"torch.{name} of {dtype} gives {complex(got)}, the elementwise sum {complex(expected)}"
                )
    # the case conda-forge's package test asserts, exactly
    x = torch.tensor([2], dtype=torch.complex128)
    if torch.dot(x, x).real != 4.0:
        found.append(f"torch.dot([2+0j], [2+0j]) is {torch.dot(x, x)}, not 4")
    return found


def _onednn(torch) -> str | None:
    return None if torch.backends.mkldnn.is_available() else "oneDNN (torch.backends.mkldnn) is not built in"


def _distributed(torch) -> str | None:
    if not torch.distributed.is_available():
        return "torch.distributed is not built in"
    return None if torch.distributed.is_gloo_available() else "torch.distributed has no Gloo backend"


def _cudnn(torch) -> str | None:
    if not torch.backends.cudnn.is_available():
        return "cuDNN is not built in (torch.backends.cudnn.is_available() is False)"
    return None if torch.backends.cudnn.version() else "cuDNN is built in but its library does not load"


def _nccl(torch) -> str | None:
    if not torch.distributed.is_nccl_available():
        return "NCCL is not built in (torch.distributed.is_nccl_available() is False)"
    return None if torch.cuda.nccl.version() else "NCCL is built in but its library does not load"


def _mps(torch) -> str | None:
    if not torch.backends.mps.is_built():
        return "MPS is not built in (torch.backends.mps.is_built() is False)"
    if not torch.backends.mps.is_available():
        print("note: MPS is built in; this machine has no Metal device to run it on")
        return None
    a = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    on_device = (a.to("mps") @ a.T.to("mps")).cpu()
    return None if torch.equal(on_device, a @ a.T) else f"a matrix product on MPS differs: {on_device}"


CHECKS: dict[str, Callable] = {
    "onednn": _onednn,
    "distributed": _distributed,
    "cudnn": _cudnn,
    "nccl": _nccl,
    "mps": _mps,
}


def feature_problems(torch, required: list[str]) -> list[str]:
    return [problem for name in required if (problem := CHECKS[name](torch))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--require", nargs="*", choices=FEATURES, default=[], help="features that must work")
    args = parser.parse_args(argv)
    import torch

    found = complex_dot_problems(torch) + feature_problems(torch, args.require)
    for problem in found:
        print(f"FAIL: {problem}", file=sys.stderr)
    if not found:
        print(f"OK: complex dot; built in: {', '.join(args.require) or 'nothing required'}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
