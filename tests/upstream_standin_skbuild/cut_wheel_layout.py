"""Print the layout fixture of a real PyTorch wheel: the part of its file list the stand-in's wheel is held
against (tests/proofs/rehearsal/test_rehearsal_skbuild.py). Standard library only; run it on the real wheel:

    python tests/upstream_standin_skbuild/cut_wheel_layout.py \
        /work/cache/wheels/torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl \
        | gzip -9n > tests/data/torch-2.15.0-cp312-manylinux_2_28_x86_64-wheel-layout.txt.gz

Kept: the files directly in torch/lib, torch/bin, torch/share/cmake/{Torch,Caffe2} and the dist-info; torch/'s
_C extension, __init__.py and version.py; the __init__.py of torch.nn, torch.distributed and torch._inductor
(the stand-in has them for the recipe's import test); and every directory of torch/include down to three
levels below it (the stand-in installs a few headers only, so their directories are what can be compared).
"""

from __future__ import annotations

import re
import sys
import zipfile
from pathlib import Path

FILES = re.compile(
    r"^(torch/(lib|bin)/[^/]+|torch/share/cmake/(Torch|Caffe2)/[^/]+"
    r"|torch/(_C\.[^/]+|version\.py|((nn|distributed|_inductor)/)?__init__\.py)|torch-[^/]+\.dist-info/[^/]+)$"
)
INCLUDE_DEPTHS = range(3, 6)  # torch/include/<a>/, .../<a>/<b>/, .../<a>/<b>/<c>/


def layout(wheel: str) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        names = [name for name in archive.namelist() if not name.endswith("/")]
    files = {name for name in names if FILES.match(name)}
    dirs = {
        "/".join(parts[:depth]) + "/"
        for parts in (name.split("/") for name in names if name.startswith("torch/include/"))
        for depth in INCLUDE_DEPTHS
        if len(parts) > depth
    }
    return sorted(files | dirs)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: cut_wheel_layout.py WHEEL")
    print(f"# layout cut of {Path(sys.argv[1]).name} by tests/upstream_standin_skbuild/{Path(__file__).name}")
    print("\n".join(layout(sys.argv[1])))
