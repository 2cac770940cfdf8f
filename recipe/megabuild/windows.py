"""conda's Windows layout for the driver: where a win-64 build finds its dependencies, and what differs.

On Windows a conda environment keeps C/C++ files under ``%LIBRARY_PREFIX%`` (``%PREFIX%\\Library``): DLLs
in ``Library\\bin``, import libraries in ``Library\\lib``, headers in ``Library\\include``, CMake packages in
``Library\\share\\cmake`` and ``Library\\lib\\cmake``; Python itself sits at ``%PREFIX%\\python.exe`` with
``Lib\\site-packages`` and ``libs\\python3XY.lib`` (conda-build 26.x environ.py ``windows_vars``,
utils.py ``get_stdlib_dir``). conda-forge's CUDA packages put the toolkit there too (no ``targets/<arch>``
directory as on Linux): nvcc in ``%BUILD_PREFIX%\\Library\\bin``, headers and import libraries in the host's
``Library``. Evidence for each setting: conda-forge/pytorch-cpu-feedstock 74dd3d46, ``recipe/bld.bat``,
which builds this very 2.13.0 tarball with MSVC and Ninja through setup.py.
"""

from __future__ import annotations

import shlex
from pathlib import Path, PureWindowsPath

from megabuild.conda_env import CondaBuild
from megabuild.errors import MegabuildError


def library_prefix(build: CondaBuild) -> Path:
    """``%LIBRARY_PREFIX%`` of a win-64 build (CondaBuild.from_environ already refused a missing one)."""
    if build.library_prefix is None:
        raise MegabuildError(
            f"LIBRARY_PREFIX is not set for this {build.target_platform} build: conda-build sets it to "
            "%PREFIX%\\Library on Windows; run recipe/bld.bat through conda-build"
        )
    return build.library_prefix


def dependency_root(build: CondaBuild) -> Path:
    """Where the host's C/C++ packages (mkl-devel, cuDNN, MAGMA, ...) put include/ and lib/."""
    return library_prefix(build) if build.windows else build.prefix


def lazy_cuda_linalg(target_platform: str) -> bool:
    """2.13.0 builds the CUDA linear algebra as the separate, lazily loaded torch_cuda_linalg only on
    Linux (CMakeLists.txt: ``cmake_dependent_option(BUILD_LAZY_CUDA_LINALG ... "USE_CUDA AND LINUX AND
    BUILD_PYTHON" OFF)``, pytorch-build-facts.md §3.4); elsewhere the linalg sources, and MAGMA with them,
    are part of torch_cuda (conda-forge's 74dd3d46 tests torch_cuda_linalg on linux only)."""
    return target_platform.startswith("linux-")


def split_cmake_args(value: str, windows: bool) -> list[str]:
    """The words of ``CMAKE_ARGS``. On Windows a backslash is a path separator, never an escape (cmd has
    no backslash escapes), so only quotes group words there; elsewhere the value is split like sh does."""
    try:
        if not windows:
            return shlex.split(value)
        lexer = shlex.shlex(value, posix=True, punctuation_chars=False)
        lexer.whitespace_split = True
        lexer.escape = ""
        lexer.commenters = ""
        return list(lexer)
    except ValueError as exc:  # "No closing quotation"
        raise MegabuildError(
            f"CMAKE_ARGS cannot be split into words ({exc}): balance its quotes (the variable is not shown, "
            "it may hold secrets)"
        ) from None


def cuda_toolkit_cache_args(build: CondaBuild) -> list[str]:
    """FindCUDAToolkit's cache variables for conda-forge's Windows CUDA: nvcc of the build prefix, the
    toolkit (headers, import libraries) in the host's Library (bld.bat: ``CUDAToolkit_BIN_DIR=
    %BUILD_PREFIX%/Library/bin``, ``CUDAToolkit_ROOT_DIR=%LIBRARY_PREFIX%``). Forward slashes: CMake reads
    a backslash in a -D value as an escape in some contexts."""
    library = PureWindowsPath(library_prefix(build)).as_posix()
    return [
        f"-DCUDAToolkit_BIN_DIR={PureWindowsPath(build.build_prefix, 'Library', 'bin').as_posix()}",
        f"-DCUDAToolkit_ROOT_DIR={library}",
        f"-DCUDAToolkit_TARGET_DIR={library}",
    ]


def settings(build: CondaBuild) -> list[tuple[str, str, str]]:
    """(name, value, why) of the settings only a win-64 build needs; each from conda-forge's bld.bat."""
    library = str(library_prefix(build))
    out = [
        (
            "DISTUTILS_USE_SDK",
            "1",
            "setuptools uses the MSVC environment conda's vs activation set up instead of searching for a "
            "Visual Studio of its own",
        ),
        (
            "CMAKE_PREFIX_PATH",
            library,
            "find_package() looks in %LIBRARY_PREFIX%, where conda's Windows packages keep their CMake files",
        ),
        ("CMAKE_INCLUDE_PATH", str(library_prefix(build) / "include"), "find_path(): the host's headers"),
        ("CMAKE_LIBRARY_PATH", str(library_prefix(build) / "lib"), "find_library(): its import libraries"),
        ("libuv_ROOT", library, "gloo's libuv transport: conda-forge's libuv in %LIBRARY_PREFIX%"),
    ]
    if build.cuda_version:
        out += [
            ("USE_NCCL", "0", "conda-forge has no nccl for win-64 (its bld.bat: 'NCCL is not available')"),
            ("CUDA_TOOLKIT_ROOT_DIR", library, "CUPTI's lookup (kineto) reads this one"),
            ("CUDAToolkit_ROOT", library, "FindCUDAToolkit's root hint, for the lookups outside cuda.cmake"),
        ]
    return out
