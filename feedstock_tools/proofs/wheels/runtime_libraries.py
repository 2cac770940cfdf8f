"""Who provides a library a package loads: the data the linkage check (:mod:`.linkage`) resolves against.

Three tables, each row with its evidence:

* :data:`PROVIDERS`: conda-forge packages that ship shared libraries PyTorch's binaries load, the library
  names as a loader looks them up, and which requirement of the recipe makes the package a run requirement
  (its ``run_exports``), so the check can tell a missing run requirement from a missing library.
* :data:`SYSTEM`: what each platform's loader finds outside any conda package, taken from conda-build's
  own rules (conda-build 26.7.1, ``conda_build/post.py`` at tag 26.7.1, commit 6a71602):
  linux: the files of the sysroot package (``sysroot_linux-*``: glibc), the ``"The linux case"`` branch of
  ``check_overlinking_impl``; macOS: ``DEFAULT_MAC_ALLOWLIST`` (post.py lines 783-829) plus the macOS SDK
  given as ``CONDA_BUILD_SYSROOT`` (lines 1443-1449), whose ``.tbd`` stubs count by their install names
  (lines 1485-1512): the SDK's ``/usr/lib`` and ``/System/Library/Frameworks``; Windows:
  ``DEFAULT_WIN_ALLOWLIST`` (lines 831-853), "the System32/SysWOW64 DLLs present on a clean installation".
* :data:`WHEEL_ONLY`: libraries the official wheels load from other pip wheels that the conda build does
  not use at all (the libraries the wheels *bundle* have their decision in the staging table instead,
  ``recipe/megabuild/package_files.py``).

Names are ``fnmatch`` patterns of file names (``libcudart.so.*``): a package's SONAME version is part of
its ABI, the pattern names the library, the run requirement's pin the version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Platform = Literal["linux", "osx", "win"]
# conda-build's SHLIB_EXT (conda_build/utils.py get_shlib_ext): the staging table's {shlib} of each platform
SHLIB_EXT: dict[Platform, str] = {"linux": ".so", "osx": ".dylib", "win": ".dll"}


@dataclass(frozen=True)
class Provider:
    package: str  # the run requirement, a conda-forge package name
    libraries: tuple[str, ...]  # file-name patterns of what it ships
    platforms: tuple[Platform, ...]
    # requirements (build or host, fnmatch patterns of names) whose run_exports add ``package`` to the run
    # requirements; empty: only an explicit run requirement brings it
    exported_by: tuple[str, ...]
    evidence: str


@dataclass(frozen=True)
class WheelOnly:
    libraries: tuple[str, ...]
    what: str
    evidence: str


_LINUX: tuple[Platform, ...] = ("linux",)
_OSX: tuple[Platform, ...] = ("osx",)
_UNIX: tuple[Platform, ...] = ("linux", "osx")
_WIN: tuple[Platform, ...] = ("win",)
_ALL: tuple[Platform, ...] = ("linux", "osx", "win")
_CTNG = "ctng-compilers-feedstock b9e501a recipe/meta.yaml"
# conda-forge's CUDA component packages come in pairs: <name>-dev run_exports <name> (libcublas-feedstock
# e6c0206 recipe/meta.yaml: libcublas-dev run_exports pin_subpackage("libcublas", max_pin="x"), and its
# libcublas output ships lib/lib*blas*.so.*); the other component feedstocks follow the same split.
_CUDA_SPLIT = "CUDA component split as libcublas-feedstock e6c0206 (the -dev package run_exports the runtime)"
_BLAS_SPLIT = "blas-feedstock 5505ad3 recipe/meta.yaml: each interface output run_exports itself, x-pinned"
# conda-forge's MSVC activation package vs<year>_win-64 (the compiler('c')/compiler('cxx') of win-64) has
# strong run_exports vc14_runtime and, for VS 2017 update 10 and later, ucrt
_VC = "vc-feedstock afcf954 recipe/meta.yaml"

# fmt: off
PROVIDERS: tuple[Provider, ...] = (
    # ---- compiler runtimes (strong run_exports of the compiler packages) ---------------------------------
    Provider("libgcc", ("libgcc_s.so.1",), _LINUX, ("gcc_*",),
             f"{_CTNG}: gcc_impl strong run_exports libgcc"),
    Provider("libstdcxx", ("libstdc++.so.6",), _LINUX, ("gxx_*",),
             f"{_CTNG}: gxx_impl strong run_exports libstdcxx"),
    Provider("_openmp_mutex", ("libgomp.so.1",), _LINUX, (),
             f"{_CTNG} and recipe/install-openmp_impl.sh: _openmp_mutex installs lib/libgomp.so.1 (a link "
             "to libgomp's file); a run dependency of libgcc, so only an explicit run requirement names it"),
    Provider("libcxx", ("libc++.1.dylib",), _OSX, ("clangxx_*",),
             "clang-compiler-activation-feedstock 9fc6346 recipe/meta.yaml: clangxx_<platform> strong "
             "run_exports libcxx"),
    Provider("llvm-openmp", ("libomp.dylib",), _OSX, ("llvm-openmp",),
             "openmp-feedstock 7776098 recipe/meta.yaml: llvm-openmp strong run_exports itself; its test "
             "checks lib/libomp.dylib"),
    Provider("llvm-openmp", ("libomp.dll", "libiomp5md.dll"), _WIN, ("llvm-openmp",),
             "openmp-feedstock 7776098 recipe/meta.yaml: llvm-openmp strong run_exports itself; on win its "
             "test checks Library/bin/libomp.dll and Library/bin/libiomp5md.dll (a forwarder to libomp)"),
    Provider("vc14_runtime", ("msvcp140*.dll", "vcruntime140*.dll", "concrt140.dll", "vccorlib140.dll",
                              "vcamp140.dll"), _WIN, ("vs20*_win-64",),
             f"{_VC}: vs<year>_win-64 strong run_exports vc14_runtime; vc14_runtime's test checks these DLLs "
             "in %PREFIX% and Library/bin"),
    Provider("vcomp14", ("vcomp140.dll",), _WIN, (),
             f"{_VC}: the vcomp14 output ships vcomp140.dll (its test); a run dependency of vc14_runtime, so "
             "only an explicit run requirement names it (patch 0024 keeps PyTorch off it)"),
    Provider("ucrt", ("api-ms-win-crt-*.dll", "api-ms-win-core-*.dll", "ucrtbase.dll"), _WIN,
             ("vs20*_win-64",),
             f"{_VC}: vs<year>_win-64 strong run_exports ucrt >=10.0.20348.0 for VS 2017 update 10 and "
             "later; ucrt-feedstock 4ca9b7e recipe/bld.bat copies the Windows SDK's ucrt redistributable "
             "DLLs (ucrtbase.dll and the api-ms-win-* forwarders) into %PREFIX% and Library/bin"),
    # ---- the interpreter --------------------------------------------------------------------------------
    Provider("python", ("python3*.dll",), _WIN, (),
             "python-feedstock df31527a recipe/build_base.bat copies python<XY>.dll into %PREFIX%; python "
             "run_exports only python_abi (its meta.yaml), so pytorch's explicit run requirement names it"),
    # ---- BLAS / LAPACK interface packages ----------------------------------------------------------------
    Provider("libblas", ("libblas.so.3", "libblas.3.dylib"), _UNIX, ("libblas",), _BLAS_SPLIT),
    Provider("libcblas", ("libcblas.so.3", "libcblas.3.dylib"), _UNIX, ("libcblas",), _BLAS_SPLIT),
    Provider("liblapack", ("liblapack.so.3", "liblapack.3.dylib"), _UNIX, ("liblapack",), _BLAS_SPLIT),
    Provider("mkl", ("libmkl_*.so.*", "libmkl_*.dylib", "mkl_*.dll"), _ALL, ("mkl-devel",),
             "mkl-devel run_exports mkl (intel_repack-feedstock, not checked here); on win the mkl output's "
             "test checks Library/bin/mkl_core.3.dll (intel_repack-feedstock 54d37f9 recipe/meta.yaml)"),
    # ---- C++ dependencies of the recipe's host ----------------------------------------------------------
    Provider("libprotobuf", ("libprotobuf.so.*", "libprotobuf.*.dylib"), _UNIX, ("libprotobuf",),
             "libprotobuf run_exports itself (conda-forge pinning pins it as a shared library)"),
    Provider("libabseil", ("libabsl_*.so.*", "libabsl_*.dylib"), _UNIX, ("libabseil",),
             "libabseil run_exports itself (conda-forge pinning pins it as a shared library)"),
    Provider("sleef", ("libsleef.so.*", "libsleef.*.dylib"), _UNIX, ("sleef",),
             "sleef run_exports itself"),
    Provider("libuv", ("libuv.so.*", "libuv.*.dylib", "uv.dll"), _ALL, ("libuv",),
             "libuv-feedstock 13188ba recipe/meta.yaml: run_exports pin_subpackage('libuv', max_pin='x'); "
             "its win test checks Library/bin/uv.dll"),
    # ---- CUDA (linux) ---------------------------------------------------------------------------------
    Provider("cuda-cudart", ("libcudart.so.*",), _LINUX, ("cuda-cudart-dev",), _CUDA_SPLIT),
    Provider("cuda-cupti", ("libcupti.so.*",), _LINUX, ("cuda-cupti-dev",), _CUDA_SPLIT),
    Provider("cuda-nvrtc", ("libnvrtc.so.*", "libnvrtc-builtins.so.*"), _LINUX, ("cuda-nvrtc-dev",),
             _CUDA_SPLIT),
    Provider("libcublas", ("libcublas.so.*", "libcublasLt.so.*"), _LINUX, ("libcublas-dev",),
             "libcublas-feedstock e6c0206 recipe/meta.yaml"),
    Provider("libcufft", ("libcufft.so.*",), _LINUX, ("libcufft-dev",), _CUDA_SPLIT),
    Provider("libcurand", ("libcurand.so.*",), _LINUX, ("libcurand-dev",), _CUDA_SPLIT),
    Provider("libcusolver", ("libcusolver.so.*",), _LINUX, ("libcusolver-dev",), _CUDA_SPLIT),
    Provider("libcusparse", ("libcusparse.so.*",), _LINUX, ("libcusparse-dev",), _CUDA_SPLIT),
    Provider("libcusparselt", ("libcusparseLt.so.*",), _LINUX, ("libcusparselt-dev",), _CUDA_SPLIT),
    Provider("libcufile", ("libcufile.so.*",), _LINUX, ("libcufile-dev",), _CUDA_SPLIT),
    Provider("libcudss", ("libcudss.so.*",), _LINUX, ("libcudss-dev",), _CUDA_SPLIT),
    Provider("libcudnn", ("libcudnn.so.*", "libcudnn_*.so.*"), _LINUX, ("libcudnn-dev",), _CUDA_SPLIT),
    Provider("nccl", ("libnccl.so.*",), _LINUX, ("nccl",), "nccl run_exports itself"),
    Provider("libmagma", ("libmagma.so", "libmagma.so.*", "libmagma_sparse.so*"), _LINUX,
             ("libmagma-devel",), "libmagma-devel run_exports libmagma (the recipe's MAGMA pass uses it)"),
)
# fmt: on

# glibc's shared libraries: the names of Debian 12's libc6 2.36 (`dpkg -L libc6`, run here), the loader
# of aarch64 (ld-linux-aarch64.so.1), and libcrypt.so.1, which the glibc 2.17/2.28 sysroots still ship.
_GLIBC = (
    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "libBrokenLocale.so.1", "libanl.so.1", "libc.so.6",
    "libc_malloc_debug.so.0", "libcrypt.so.1", "libdl.so.2", "libm.so.6", "libmvec.so.1", "libnsl.so.1",
    "libnss_*.so.2", "libpthread.so.0", "libresolv.so.2", "librt.so.1", "libthread_db.so.1", "libutil.so.1",
)  # fmt: skip
# DEFAULT_MAC_ALLOWLIST's frameworks (one multi-line string item there), its dylibs, and the SDK's
_MAC_FRAMEWORKS = (
    "Accelerate", "AGL", "AppKit", "ApplicationServices", "AudioToolbox", "AudioUnit", "AVFoundation",
    "CFNetwork", "Carbon", "Cocoa", "CoreAudio", "CoreFoundation", "CoreGraphics", "CoreMedia",
    "CoreBluetooth", "CoreMIDI", "CoreServices", "CoreText", "CoreVideo", "CoreWLAN", "DiskArbitration",
    "Foundation", "GameController", "GLKit", "ImageIO", "IOBluetooth", "IOKit", "IOSurface", "OpenAL",
    "OpenGL", "Quartz", "QuartzCore", "Security", "StoreKit", "SystemConfiguration", "WebKit",
)  # fmt: skip
_MAC = (
    "/opt/X11/*", "/usr/lib/libSystem.B.dylib", "/usr/lib/libcrypto.0.9.8.dylib", "/usr/lib/libobjc.A.dylib",
    *(f"/System/Library/Frameworks/{name}.framework/*" for name in _MAC_FRAMEWORKS),
    # CONDA_BUILD_SYSROOT, the macOS SDK (14.5 for conda-forge's PyTorch: Metal and MPS frameworks): its
    # usr/lib and System/Library/Frameworks stubs, by install name
    "/usr/lib/*.dylib", "/System/Library/Frameworks/*.framework/*",
)  # fmt: skip
_WINDOWS = (
    "ADVAPI32.dll", "bcrypt.dll", "COMCTL32.dll", "COMDLG32.dll", "CRYPT32.dll", "dbghelp.dll", "GDI32.dll",
    "IMM32.dll", "KERNEL32.dll", "NETAPI32.dll", "ole32.dll", "OLEAUT32.dll", "PSAPI.DLL", "RPCRT4.dll",
    "SHELL32.dll", "USER32.dll", "USERENV.dll", "WINHTTP.dll", "WS2_32.dll", "ntdll.dll", "msvcrt.dll",
)  # fmt: skip

# linux and Windows: file names (a loader searches for them); macOS: install names (absolute paths)
SYSTEM: dict[Platform, tuple[str, ...]] = {"linux": _GLIBC, "osx": _MAC, "win": _WINDOWS}

WHEEL_ONLY: tuple[WheelOnly, ...] = (
    WheelOnly(
        ("libnvshmem_host.so.*",),
        "NVSHMEM host library (CUDA wheels: libtorch_nvshmem loads it from the nvidia-nvshmem wheel)",
        "the recipe's host has no NVSHMEM, as pytorch-cpu-feedstock 74dd3d46's has none, so the conda build "
        "has no libtorch_nvshmem and nothing loads it",
    ),
)
