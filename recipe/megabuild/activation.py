"""The GPU architecture list of a CUDA build, for downstream builds: libtorch's activation scripts.

Downstream CUDA extensions (torchvision, torchaudio, pytorch_scatter, ...) should compile for the GPU
architectures this libtorch was compiled for. conda-forge's pytorch exports that list as
``CF_TORCH_CUDA_ARCH_LIST`` when the environment is activated (pytorch-cpu-feedstock 74dd3d46,
``recipe/activate.sh`` and ``build.sh`` lines 316-324, which install it with the libtorch output); downstream
recipes read it, e.g. ``export TORCH_CUDA_ARCH_LIST="${CF_TORCH_CUDA_ARCH_LIST}"``. This module writes the
same interface with its own scripts: set it unless the user already did, and on deactivation remove only a
value activation set.
"""

from __future__ import annotations

import os
from pathlib import Path

from megabuild.atomic_file import write_text
from megabuild.errors import MegabuildError

VARIABLE = "CF_TORCH_CUDA_ARCH_LIST"
# set by activation only when it exported VARIABLE, so deactivation leaves a user's own value alone
MARKER = "_CF_TORCH_CUDA_ARCH_LIST_FROM_LIBTORCH"
ACTIVATE = "etc/conda/activate.d/libtorch_cuda_arch_list.sh"
DEACTIVATE = "etc/conda/deactivate.d/libtorch_cuda_arch_list.sh"
# Windows: conda's cmd.exe activation calls activate.d/*.bat (conda-forge's 2.13.0 libtorch ships
# libtorch_activate.bat, pytorch-cpu-feedstock 74dd3d46 recipe/activate.bat); the .sh scripts stay for
# conda's bash activation there (Git Bash, MSYS2)
ACTIVATE_BAT = "etc/conda/activate.d/libtorch_cuda_arch_list.bat"
DEACTIVATE_BAT = "etc/conda/deactivate.d/libtorch_cuda_arch_list.bat"

_ACTIVATE_TEXT = """\
# libtorch (CUDA build): the GPU architectures it was compiled for, for downstream CUDA extensions, e.g.
#   export TORCH_CUDA_ARCH_LIST="${{{variable}}}"
# A value set before activation wins. Written by the pytorch feedstock (recipe/megabuild/activation.py).
if [ -z "${{{variable}+set}}" ]; then
    export {variable}="{arch_list}"
    export {marker}=1
fi
"""
_DEACTIVATE_TEXT = """\
# libtorch (CUDA build): remove {variable} if activation set it (see activate.d).
if [ "${{{marker}:-}}" = "1" ]; then
    unset {variable} {marker}
fi
"""
_ACTIVATE_BAT = """\
@REM libtorch (CUDA build): the GPU architectures it was compiled for, for downstream CUDA extensions, e.g.
@REM   set "TORCH_CUDA_ARCH_LIST=%{variable}%"
@REM A value set before activation wins. Written by the pytorch feedstock (recipe/megabuild/activation.py).
@if not defined {variable} (
    set "{variable}={arch_list}"
    set "{marker}=1"
)
"""
_DEACTIVATE_BAT = """\
@REM libtorch (CUDA build): remove {variable} if activation set it (see activate.d).
@if "%{marker}%" == "1" (
    set "{variable}="
    set "{marker}="
)
"""


def scripts(arch_list: str, windows: bool = False) -> dict[str, str]:
    """The activation and deactivation scripts (POSIX sh, as conda sources them; on Windows also the
    cmd.exe ones, LF line ends as conda-forge's activate.bat has them) for ``arch_list``."""
    if not arch_list or any(char in arch_list for char in "\"'$`\\\n%!^&|<>"):
        raise MegabuildError(
            f"TORCH_CUDA_ARCH_LIST {arch_list!r} cannot go into the activation script: it must be a plain "
            "list such as '7.5;8.0;12.0+PTX' (recipe/megabuild/environment.py sets it)"
        )
    values = {"variable": VARIABLE, "marker": MARKER, "arch_list": arch_list}
    out = {ACTIVATE: _ACTIVATE_TEXT.format(**values), DEACTIVATE: _DEACTIVATE_TEXT.format(**values)}
    if windows:
        out[ACTIVATE_BAT] = _ACTIVATE_BAT.format(**values)
        out[DEACTIVATE_BAT] = _DEACTIVATE_BAT.format(**values)
    return out


def write_activation_scripts(prefix: Path, arch_list: str, windows: bool = False) -> list[str]:
    """Add the scripts to ``prefix`` (libtorch's assembled package); all or nothing, never overwriting.
    Returns their paths relative to ``prefix``."""
    written: list[Path] = []
    try:
        for relative, text in scripts(arch_list, windows).items():
            target = prefix / relative
            if os.path.lexists(target):
                raise MegabuildError(
                    f"{target} exists already: another package of the host environment ships it; remove it "
                    "from the host requirements"
                )
            target.parent.mkdir(parents=True, exist_ok=True)
            # newline="": the bytes as given, also when the driver runs on Windows
            written.append(write_text(target, text, mode=0o644, newline=""))
    except BaseException:
        for target in written:
            target.unlink()
        raise
    return [str(path.relative_to(prefix)) for path in written]
