"""Package test of pytorch: does the installed torch report the BLAS and MAGMA it was packaged with?

torch.__config__.show() must name the BLAS of the build (BLAS_INFO=mkl or generic). In CUDA builds,
torch.cuda.has_magma and the "Magma" line of the configuration must follow the libtorch-cuda-linalg that is
installed (the recipe's patch 0004 makes that a run-time decision): MAGMA exactly when that library links
libmagma. CPU builds must report no MAGMA.

    python check_torch_config.py --blas=mkl --cuda=yes
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from check_linalg_needed import magma_libraries


def installed_linalg_library() -> Path:
    import torch

    # libtorch_cuda_linalg.so lives beside the other libraries; torch/lib links to $PREFIX/lib
    return Path(torch.__file__).resolve().parent / "lib" / "libtorch_cuda_linalg.so"


def problems(config: str, has_magma: bool, blas: str, cuda: bool, linalg: Path | None) -> list[str]:
    """What is wrong with the reported configuration (empty when it is right)."""
    found = []
    blas_info = re.search(r"BLAS_INFO=(\w+)", config)
    if not blas_info or blas_info.group(1) != blas:
        found.append(
            f"expected BLAS_INFO={blas}, configuration says {blas_info.group(0) if blas_info else 'nothing'}"
        )
    if cuda:
        if linalg is None or not linalg.is_file():
            found.append(f"CUDA build without {linalg}")
            return found
        expect_magma = bool(magma_libraries(linalg))
    else:
        expect_magma = False
    if has_magma != expect_magma:
        found.append(f"torch.cuda.has_magma is {has_magma}, the installed linalg library says {expect_magma}")
    if ("Magma" in config) != expect_magma:
        found.append(f"the configuration {'lacks' if expect_magma else 'has'} a Magma line")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blas", choices=("mkl", "generic"), required=True, help="the build's blas_impl")
    parser.add_argument("--cuda", choices=("yes", "no"), required=True, help="a CUDA build?")
    args = parser.parse_args(argv)
    import torch

    config = torch.__config__.show()
    print(config)
    cuda = args.cuda == "yes"
    found = problems(
        config, bool(torch.cuda.has_magma), args.blas, cuda, installed_linalg_library() if cuda else None
    )
    for problem in found:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
