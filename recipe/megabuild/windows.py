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
        # kineto's CUPTI lookup (environment.cuda_toolkit_cache_args): cupti.lib in Library/lib
        f"-DCUDA_TOOLKIT_ROOT_DIR={library}",
    ]


def cuda_include_flags(build: CondaBuild) -> list[str]:
    """win-64: ``-I`` the host's and the build's ``Library/include`` for the C and C++ compilers.
    cuda-nvcc's Windows activation sets no CUDA_CFLAGS, and without the build prefix's include directory
    MSVC does not find nvcc's ``crt/host_config.h`` (cuda-nvcc-feedstock#47; conda-forge's 2.13.0 bld.bat
    lines 164-172, since 6017ca6e "fix: host_config.h not found", for every Windows build). Empty
    elsewhere."""
    if not build.windows:
        return []
    return [
        f"-I{PureWindowsPath(build.prefix, 'Library', 'include').as_posix()}",
        f"-I{PureWindowsPath(build.build_prefix, 'Library', 'include').as_posix()}",
    ]


def settings(build: CondaBuild) -> list[tuple[str, str | None, str]]:
    """(name, value, why) of the settings only a win-64 build needs (None: remove the variable); each from
    conda-forge's bld.bat."""
    library = str(library_prefix(build))
    out: list[tuple[str, str | None, str]] = [
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
        (
            "USE_LITE_PROTO",
            "ON",
            "the lite protobuf runtime, as conda-forge's 2.13.0 win-64 build links conda-forge's libprotobuf "
            "(bld.bat:73-74; both came with 46d7b46a 'protobuf on windows', whose earlier comment blamed "
            "link errors on symbols conflicting with caffe2_protos.lib); kept so it links as that one",
        ),
        (
            "CMAKE_GENERATOR_PLATFORM",
            None,
            "conda's vs2022 activation may set it (vc-feedstock afcf954 activate.bat:148-152) for Visual "
            "Studio generators; CMake reads it from the environment and refuses a platform with Ninja "
            "(conda-forge's 2.13.0 bld.bat:146-147 clears both)",
        ),
        ("CMAKE_GENERATOR_TOOLSET", None, "as CMAKE_GENERATOR_PLATFORM: Ninja takes no toolset"),
    ]
    if build.cuda_version:
        out += [
            ("USE_NCCL", "0", "conda-forge has no nccl for win-64 (its bld.bat: 'NCCL is not available')"),
            # (no CUDA_TOOLKIT_ROOT_DIR here: 2.13.0 never forwards that environment variable to CMake and
            # FindCUDA reads only the CMake variable; it is a cache argument, cuda_toolkit_cache_args)
            (
                "CUDAToolkit_ROOT",
                library,
                "FindCUDAToolkit's root hint (find_package reads <Package>_ROOT from the environment), for "
                "the lookups outside cuda.cmake",
            ),
        ]
    return out
