"""``torch`` of the upstream stand-in: a TEST DOUBLE, not PyTorch.

Like upstream it preloads libtorch_global_deps with RTLD_GLOBAL, then imports the ``torch._C``
extension, whose functions are implemented in C++ (libtorch_python calling libtorch_cpu).
"""

import ctypes
import os
import platform
import sys
import sysconfig

_lib_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib")
if sysconfig.get_platform().startswith("win"):
    # Windows (simulated by the rehearsal): 2.13.0's _load_dll_libraries adds torch/lib and
    # sys.exec_prefix/Library/bin with os.add_dll_directory (the win_amd64 wheel's torch/__init__.py,
    # lines 175-242) and has no global deps to preload. The ELF counterpart of adding a directory to the
    # DLL search: load what torch._C needs from there before importing it.
    for _directory in (_lib_dir, os.path.join(sys.exec_prefix, "Library", "bin")):
        _path = os.path.join(_directory, "torch_python.dll")
        if os.path.exists(_path):
            ctypes.CDLL(_path)
            break
else:
    # the library's name as 2.13.0's _load_global_deps spells it (the wheel's torch/__init__.py, line 374)
    _lib_ext = ".dylib" if platform.system() == "Darwin" else ".so"
    ctypes.CDLL(os.path.join(_lib_dir, f"libtorch_global_deps{_lib_ext}"), mode=ctypes.RTLD_GLOBAL)

from torch import _C  # noqa: E402
from torch.version import __version__  # noqa: E402


def add(a: float, b: float, alpha: float = 1.0) -> float:
    """a + alpha * b, computed by libtorch_cpu."""
    return _C._add(a, b, alpha)


class cuda:  # mirrors the torch.cuda namespace
    @staticmethod
    def is_compiled() -> bool:
        return _C._cuda_compiled()

    @staticmethod
    def has_magma() -> bool:
        """Answered at run time by the lazily loaded libtorch_cuda_linalg."""
        return _C._has_magma()


def has_mkl() -> bool:
    """Whether torch._C was compiled against MKL (the BLAS of the build)."""
    return _C._has_mkl()


__all__ = ["__version__", "add", "cuda", "has_mkl"]
