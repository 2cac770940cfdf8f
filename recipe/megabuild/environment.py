"""The environment of the upstream build (``setup.py`` and the CMake runs under it), in one place.

Every setting carries its reason, and the driver prints them. The result must be identical in every pass:
editing CMakeCache.txt makes the next ``cmake --build`` re-run CMake, which reads ``TORCH_CUDA_ARCH_LIST``,
``TORCH_NVCC_FLAGS``, ``LDFLAGS``, ``MAGMA_HOME``, ``PYTORCH_BUILD_VERSION`` ... again from the environment; a
difference would drift the CUDA flags or arch list and rebuild everything. So nothing here may depend on what
differs between outputs (``PKG_NAME``, ``PKG_BUILDNUM``, ``PYTHON``, ``magma_variant``, ...), and the
driver compares :func:`reconfigure_inputs` of every pass with pass 1's.

Settings that must only reach the *first* configure go into ``CMAKE_ARGS``, which setup.py (with the
recipe's patch) passes to that configure only.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from megabuild import compiler_cache, windows
from megabuild.compiler_cache import CompilerCache
from megabuild.conda_env import CondaBuild
from megabuild.cuda_targets import ARCH_LIST_VARIABLE, cuda_arch_list, cuda_target
from megabuild.errors import MegabuildError
from megabuild.package_files import TOP_LEVEL

# Environment variables a CMake (re)configure of PyTorch reads (pytorch-build-facts.md §3.2): by prefix
# (EnvVarForwarding.cmake's USE_/BUILD_/CMAKE_) and by name (read by CMakeLists/find modules directly).
RECONFIGURE_PREFIXES = ("USE_", "BUILD_", "CMAKE_", "TORCH_", "CUDA", "NCCL_", "CUDNN_")
RECONFIGURE_NAMES = (
    "BLAS", "MAGMA_HOME", "LDFLAGS", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "CC", "CXX", "CUDAHOSTCXX",
    "PYTORCH_BUILD_VERSION", "PYTORCH_BUILD_NUMBER", "INTEL_MKL_DIR", "ATEN_AVX512_256", "NVSHMEM_HOME",
)  # fmt: skip
_FLAG_VARIABLES = frozenset(
    {"CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "DEBUG_CFLAGS", "DEBUG_CXXFLAGS", "FFLAGS", "CUDAFLAGS"}
)
# Differ between conda-build's outputs but are never read by CMake as inputs.
RECONFIGURE_EXEMPT = frozenset({"BUILD_PREFIX"})
# Memory per parallel compile job of a CUDA build: conda-forge's feedstock had to cap MAX_JOBS at 4 on its
# 8-CPU / 32 GB runner (cirun-openstack-gpu-2xlarge) because CUDA builds were OOM-killed at 8
# (pytorch-build-facts.md, corrections 9; pytorch-cpu-feedstock recipe/build.sh).
CUDA_BYTES_PER_JOB = 8 * 1024**3
# win-64: os.sysconf does not exist there, so the memory rule above cannot apply; conda-forge's 2.13.0 bld.bat
# (pytorch-cpu-feedstock 74dd3d46 lines 24-27, since 0ea5e36e "Reduce MAX_JOBS on Windows") uses 4 jobs on
# the Namespace runner this feedstock uses too (namespace-profile-16cpu-4x-on-windows-64, 16 CPUs), CPU and
# CUDA builds alike, "to avoid being OOM-killed".
WINDOWS_MAX_JOBS = 4
# macOS: conda-forge's 2.13.0 build.sh (lines 138-144) uses 8 jobs on the 12-CPU Apple-silicon runner both
# feedstocks use (namespace-profile-12cpu-on-osx-arm64), "to avoid getting OOM-killed".
MACOS_MAX_JOBS = 8


@dataclass(frozen=True)
class Setting:
    name: str
    value: str | None  # None: remove the variable
    why: str


def _strip_words(value: str, patterns: tuple[str, ...]) -> str:
    kept = [word for word in value.split() if not any(re.fullmatch(p, word) for p in patterns)]
    return " ".join(kept)


def settings(
    build: CondaBuild,
    caller: Mapping[str, str],
    verbose: bool = False,
    cache: CompilerCache | None = None,
) -> list[Setting]:
    """What the driver sets for the upstream build, each with its reason, from conda-build's environment
    (``cache``: the job's compiler cache, compiler_cache.locate)."""
    prefix = str(build.prefix)
    out: list[Setting] = []

    def put(name: str, value: str | None, why: str) -> None:
        out.append(Setting(name, value, why))

    # ---- compiler and linker flags conda-forge's activation sets ---------------------------------------
    caller = _same_debug_prefix_map(caller, build)
    out += flag_settings(build, caller)
    put(
        "CMAKE_ARGS",
        shlex.join(
            [
                *_find_root_with_source(
                    _strip_cmake_args(caller.get("CMAKE_ARGS", ""), build.windows), build.src_dir
                ),
                f"-DCMAKE_BUILD_TYPE={build_type(caller)}",
                f"-DUSE_MAGMA={pass1_magma(build)}",
                *cuda_toolkit_cache_args(build),
                *nnpack_cache_args(build),
            ]
        ),
        "read by setup.py's first configure only: conda-build's -DCMAKE_INSTALL_PREFIX=$PREFIX would "
        "install into the host prefix instead of <src>/torch, and its CMAKE_BUILD_TYPE would hide DEBUG/"
        "REL_WITH_DEB_INFO; USE_MAGMA starts OFF (pass 1), the MAGMA pass switches it in CMakeCache.txt "
        "(CUDA builds without the lazy linalg library, Windows: ON in pass 1, MAGMA is part of torch_cuda); "
        "SRC_DIR appended to every CMAKE_FIND_ROOT_PATH, or the in-tree find_path() calls are re-rooted and "
        "oneDNN is silently dropped ('MKLDNN source files not found!'; conda-forge's pytorch-cpu-feedstock "
        "47cd316d does the same); CUDA: CUDAToolkit_BIN_DIR/_ROOT_DIR/_TARGET_DIR as cache variables name "
        "nvcc of the build prefix and the toolkit of the host prefix (patch 0003 lets them win over nvcc's "
        "own toolkit location), and CUDA_TOOLKIT_ROOT_DIR the host prefix for kineto's CUPTI lookup; "
        "x86_64 unix: PYTHON_SIX_SOURCE_DIR defined, so NNPACK does not download six (nnpack_cache_args)",
    )
    put(
        "CMAKE_GENERATOR",
        "Ninja",
        "conda-build exports CMAKE_GENERATOR='Unix Makefiles', which setup.py would obey; the passes need "
        "Ninja (restat for code generators, .ninja_log for the per-pass report)",
    )
    put(
        "CMAKE_BUILD_TYPE",
        build_type(caller),
        "explicit and the same in every pass; from DEBUG=1 / REL_WITH_DEB_INFO=1 of the caller",
    )
    # ---- parallelism and verbosity ------------------------------------------------------------------------
    put(
        "MAX_JOBS",
        max_jobs(build, caller),
        "setup.py passes it as -j to cmake --build; the caller's MAX_JOBS wins; CUDA builds default to one "
        f"job per {CUDA_BYTES_PER_JOB // 1024**3} GiB of memory (at most CPU_COUNT): conda-forge's CUDA "
        f"builds were OOM-killed at 8 jobs on 8 CPUs / 32 GB and use 4; win-64: at most {WINDOWS_MAX_JOBS} "
        "(Python cannot read the memory there; conda-forge's 2.13.0 bld.bat:24-27 uses 4 on the same runner "
        f"'to avoid being OOM-killed'); macOS: at most {MACOS_MAX_JOBS}, as its build.sh:138-144 on the "
        "same 12-CPU runner",
    )
    put(
        "VERBOSE",
        "1" if verbose else None,
        "cmake --build prints full command lines for any value of VERBOSE, even 0: set only with --verbose",
    )
    put(
        "PYTHONDONTWRITEBYTECODE",
        "1",
        "no .pyc written by the build's Python runs: in the host prefix they would be files of no package, "
        "which conda-build copies into every output's host prefix (SP_DIR then names pass 1's Python) and "
        "rattler-build packages into every output (host_prefix.py)",
    )
    # ---- what to build ------------------------------------------------------------------------------------
    put("BUILD_TEST", "0", "no C++ test binaries and test libraries (upstream builds them by default)")
    put(
        "PYTORCH_BUILD_VERSION",
        build.pkg_version,
        "a plain version (no +git suffix); read on every configure, the same for every output",
    )
    put(
        "PYTORCH_BUILD_NUMBER",
        build_number(caller),
        "2.13.0's tools/generate_torch_version.py asserts it is set whenever PYTORCH_BUILD_VERSION is "
        "(setup.py runs it at import time); 0 keeps '.postN' off torch.__version__ (a number above 1 adds "
        "it; conda-forge's pytorch-cpu-feedstock issue #315)",
    )
    # ---- BLAS ---------------------------------------------------------------------------------------------
    blas = build.variant.get("blas_impl", "generic")
    if blas == "mkl":
        put("BLAS", "MKL", "blas_impl=mkl: link MKL from mkl-devel in the host prefix")
        put(
            "INTEL_MKL_DIR",
            str(windows.dependency_root(build)),
            "where FindMKL looks first: mkl-devel is in the host prefix (Windows: its Library)",
        )
    else:
        put(
            "BLAS",
            "Generic",
            "blas_impl=generic: link the reference BLAS/LAPACK interface (libblas, libcblas, liblapack) so "
            "users can switch implementation at install time",
        )
    # ---- system libraries instead of the bundled copies ---------------------------------------------------
    put("USE_SYSTEM_SLEEF", "ON", "sleef from conda-forge")
    put("BUILD_CUSTOM_PROTOBUF", "OFF", "libprotobuf from conda-forge, not the bundled protobuf")
    put("USE_SYSTEM_PYBIND11", "ON", "pybind11 from conda-forge, so pybind11-abi pins the extension ABI")
    put("USE_SYSTEM_EIGEN_INSTALL", "ON", "eigen from conda-forge")
    put("USE_NUMPY", "ON", "numpy is in every host that builds Python bindings; fixed so it cannot drift")
    out += feature_settings(build)
    # ---- CUDA ---------------------------------------------------------------------------------------------
    cuda = build.cuda_version
    put("USE_CUDA", "ON" if cuda else "OFF", f"cuda_compiler_version={cuda or 'None'}")
    if cuda:
        put(
            "TORCH_CUDA_ARCH_LIST",
            ";".join(cuda_arch_list(caller)),
            f"the recipe's GPU architectures of this configuration ({ARCH_LIST_VARIABLE}, from meta.yaml's "
            "cuda_arch_list, whose oldest entry is its __cuda_arch bound; tegra: Jetson Orin only); CMake "
            "reads this variable from the environment on every configure, shadowing the cache",
        )
        if not build.windows:  # Windows: no NCCL at all (windows.settings)
            put("USE_SYSTEM_NCCL", "ON", "nccl from conda-forge; also avoids the NCCL submodule checkout")
            put("USE_STATIC_NCCL", "OFF", "link the shared libnccl of the nccl package")
            put("NCCL_INCLUDE_DIR", f"{prefix}/include", "FindNCCL: nccl.h of the host prefix")
            put("NCCL_LIB_DIR", f"{prefix}/lib", "FindNCCL: libnccl of the host prefix")
        put("USE_SYSTEM_NVTX", "ON", "NVTX headers from cuda-nvtx-dev, not the bundled copy")
        put("USE_CUDNN", "ON", "cuDNN from libcudnn-dev")
        put("USE_STATIC_CUDNN", "OFF", "link the shared cuDNN of the host prefix")
        put("CUDNN_ROOT", str(windows.dependency_root(build)), "FindCUDNN's hint: libcudnn-dev of the host")
        put(
            "MAGMA_HOME",
            str(windows.dependency_root(build)),
            "FindMAGMA's hint; the same in every pass (only the MAGMA pass has libmagma-devel there, and "
            "only there is USE_MAGMA on)",
        )
    out.extend(macos_and_cross_settings(build, caller))
    out += size_and_speed_settings(build)
    if cache is not None:
        out += [Setting(n, v, w) for n, v, w in compiler_cache.settings(cache, cuda=bool(cuda))]
    if build.windows:
        out += [Setting(name, value, why) for name, value, why in windows.settings(build)]
    return out


def pass1_magma(build: CondaBuild) -> str:
    """USE_MAGMA of pass 1: OFF where the MAGMA pass rebuilds the lazy linalg library; ON in CUDA builds
    without that library (Windows), where MAGMA can only be part of torch_cuda, as in conda-forge's."""
    if build.cuda_version and not windows.lazy_cuda_linalg(build.target_platform):
        return "ON"
    return "OFF"


# ---- compiler and linker flags held against conda-forge's 2.13.0 recipe (issue 30) ------------------------
# pytorch-cpu-feedstock 74dd3d46 recipe/build.sh:
# - lines 37-41 strip -fvisibility-inlines-hidden from CFLAGS and CXXFLAGS: the activation adds it, upstream's
#   own builds do not use it, and with it inline functions' symbols are no longer exported from libtorch
#   (the anchor keeps them exported so programs linking them keep working);
# - line 43 adds -w to CXXFLAGS (the warnings of thousands of objects swamp the logs);
# - lines 51-57 keep the warnings the newer compilers turn into errors from failing the build: for clang
#   (macOS) deprecated declarations, unknown warning options, unused command-line arguments and
#   -Wvla-cxx-extension; for gcc (linux) deprecated declarations and -Wmaybe-uninitialized;
# - line 63 defines TARGET_OS_OSX=1 on osx-64 (since its 3539b9f4 "fix osx build"; osx-64 is built on
#   Apple silicon there as here);
# - line 68 links with -z,noexecstack on linux (its 272621ba, issue #350).
COMPILE_FLAGS_DROPPED = (r"-std=\S+", r"-fvisibility-inlines-hidden")
CLANG_WARNING_FLAGS = (
    "-Wno-deprecated-declarations", "-Wno-unknown-warning-option",
    "-Wno-error=unused-command-line-argument", "-Wno-error=vla-cxx-extension",
)  # fmt: skip
GCC_WARNING_FLAGS = ("-Wno-deprecated-declarations", "-Wno-error=maybe-uninitialized")
LINUX_LDFLAGS_ADDED = ("-Wl,-z,noexecstack",)


def compile_flags_added(build: CondaBuild, name: str) -> list[str]:
    """The words the driver appends to CFLAGS or CXXFLAGS of ``build`` (see the block comment above)."""
    if build.windows:
        return windows.cuda_include_flags(build)
    added = ["-w"] if name == "CXXFLAGS" else []
    added += CLANG_WARNING_FLAGS if build.target_platform.startswith("osx") else GCC_WARNING_FLAGS
    if build.target_platform == "osx-64":
        added.append("-DTARGET_OS_OSX=1")
    return added


def flag_settings(build: CondaBuild, caller: Mapping[str, str]) -> list[Setting]:
    """LDFLAGS, CFLAGS, CXXFLAGS and their companions, from the activation's (see the block comment above)."""
    out: list[Setting] = []

    def put(name: str, value: str, why: str) -> None:
        out.append(Setting(name, value, why))

    ldflags = caller.get("LDFLAGS", "")
    linux = build.target_platform.startswith("linux-")
    put(
        "LDFLAGS",
        " ".join(
            [
                _strip_words(
                    ldflags.replace("-Wl,-z,now", "-Wl,-z,lazy"),
                    (r"-Wl,--as-needed", *DARWIN_LDFLAGS_DROPPED),
                ),
                *(LINUX_LDFLAGS_ADDED if linux else ()),
            ]
        ).strip(),
        "lazy binding (-z,lazy instead of -z,now) so `import torch` works on machines without a GPU driver; "
        "no --as-needed, which would drop the NEEDED entries that are all libtorch.so and "
        "libtorch_global_deps.so consist of (nor its macOS twin -dead_strip_dylibs, see macos_and_cross); "
        "linux: -z,noexecstack, because oneDNN's ittptmark64.S has no .note.GNU-stack and would mark "
        "libtorch_cpu.so as needing an executable stack, which glibc >= 2.41 refuses to load "
        "(pytorch-cpu-feedstock 74dd3d46 build.sh:65-69, its 272621ba for issue #350)",
    )
    for flags in ("DEBUG_CFLAGS", "DEBUG_CXXFLAGS"):
        if flags in caller:
            put(flags, caller[flags], "debug-info source path of the top-level package (see CFLAGS)")
    if "CPPFLAGS" in caller or build.windows:
        put(
            "CPPFLAGS",
            " ".join([caller.get("CPPFLAGS", ""), *windows.cuda_include_flags(build)]).strip(),
            "debug-info source path of the top-level package (see CFLAGS); Windows: the include flags of "
            "windows.cuda_include_flags",
        )
    for flags in ("CXXFLAGS", "CFLAGS"):
        put(
            flags,
            " ".join(
                [
                    _strip_words(caller.get(flags, ""), COMPILE_FLAGS_DROPPED),
                    *compile_flags_added(build, flags),
                ]
            ).strip(),
            "the language standard is PyTorch's choice (C++20 in 2.13); the activation's -std=c++17 would "
            "override it wherever flags come last (nvcc's host compilation); debug-info source path of the "
            "top-level package in every pass (the activation's -fdebug-prefix-map names PKG_NAME); no "
            "-fvisibility-inlines-hidden and the warning flags of conda-forge's 2.13.0 build "
            "(compile_flags_added); Windows: windows.cuda_include_flags",
        )
    return out


def feature_settings(build: CondaBuild) -> list[Setting]:
    """Optional features conda-forge's 2.13.0 build turns on or off explicitly (pytorch-cpu-feedstock 74dd3d46
    build.sh:27-29, 202, 279; bld.bat:77-78), so the build does not depend on what the build machine has."""
    linux_cuda = bool(build.cuda_version) and build.target_platform.startswith("linux-")
    out = [
        Setting(
            "USE_ITT",
            "OFF",
            "no Intel VTune instrumentation (ittapi), as conda-forge's 2.13.0 on every platform; upstream's "
            "default is ON",
        ),
        Setting(
            "USE_NUMA",
            "OFF",
            "no libnuma: no host package provides it, so a build would link the build machine's if present "
            "(conda-forge's 2.13.0 turns it off everywhere)",
        ),
        Setting(
            "USE_CUFILE",
            "ON" if linux_cuda else "OFF",
            "GPUDirect Storage (cuFile) in linux CUDA builds only, whose host has libcufile-dev, else off "
            "(conda-forge's 2.13.0: 0, then 1 in its CUDA branch)",
        ),
    ]
    if linux_cuda:
        out.append(
            Setting(
                "CMAKE_CUDA_FLAGS",
                "-w -Xptxas -w",
                "no nvcc and ptxas warnings: ptxas advisories are not silenced otherwise and swamp the log "
                "(cuda-nvcc-feedstock#60; conda-forge's 2.13.0 build.sh:277-279, linux CUDA)",
            )
        )
    return out


# ---- macOS and cross-compiled targets (issue 10) ----------------------------------------------------------
# conda-forge's clang activation links with -Wl,-dead_strip_dylibs (LDFLAGS) and -dead_strip_dylibs
# (LDFLAGS_LD) (clang-compiler-activation-feedstock 9fc6346, recipe/build.sh FINAL_LDFLAGS/FINAL_LDFLAGS_LD).
# It drops every dylib no symbol is taken from at link time: MKL's sequential/core libraries on osx-64, and
# `import torch` then fails with "Symbol not found: _mkl_blas_caxpy" (pytorch-cpu-feedstock 74dd3d46,
# recipe/build.sh, which strips both). The words as they appear in LDFLAGS and in LDFLAGS_LD:
DARWIN_LDFLAGS_DROPPED = (r"-Wl,-dead_strip_dylibs",)
DARWIN_LDFLAGS_LD_DROPPED = (r"-dead_strip_dylibs",)


def is_cross(build: CondaBuild) -> bool:
    """The build machine is not the target (linux-aarch64 built on linux-64, osx-64 on osx-arm64)."""
    return build.target_platform != build.build_platform


def macos_and_cross_settings(build: CondaBuild, caller: Mapping[str, str]) -> list[Setting]:
    """The settings only macOS or cross-compiled targets need; each from conda-forge's 2.13.0 recipe
    (pytorch-cpu-feedstock 74dd3d46, recipe/build.sh) unless said otherwise."""
    out: list[Setting] = []

    def put(name: str, value: str, why: str) -> None:
        out.append(Setting(name, value, why))

    put(
        "Python_ROOT_DIR",
        str(build.prefix),
        "FindPython's root hint: the host prefix's Python (the target's; cross-python's build-machine python "
        "comes first on PATH when cross-compiling); the same path in every output",
    )
    if not build.target_platform.startswith("osx"):
        return out
    if "LDFLAGS_LD" in caller:
        put(
            "LDFLAGS_LD",
            _strip_words(caller["LDFLAGS_LD"], DARWIN_LDFLAGS_LD_DROPPED),
            "no -dead_strip_dylibs for direct linker calls either (see LDFLAGS)",
        )
    put(
        "USE_DISTRIBUTED",
        "ON",
        "torch.distributed on macOS too (upstream's default is off there; gloo's libuv comes from the host "
        "requirements); patch 0010 adds the include c10d needs under libc++",
    )
    put(
        "USE_MPS",
        "ON",
        "the Metal backend (torch.backends.mps); needs the macOS >= 12.3 SDK: MACOSX_SDK_VERSION 14.5 in "
        "recipe/conda_build_config.yaml; patch 0011 gives its Objective-C++ sources the CPU macros",
    )
    if build.target_platform == "osx-arm64":
        put(
            "USE_MKLDNN",
            "OFF",
            "oneDNN is left out on osx-arm64 as conda-forge does ('MKLDNN did not support Apple M1 at the "
            "time support Apple M1 was added')",
        )
    return out


# ---- size and speed settings (conda-forge's 2.13.0 choices) ----------------------------------------------
# Evidence: conda-forge/pytorch-cpu-feedstock at 74dd3d46, recipe/build.sh lines 190-261 (its CUDA branch).
# Their own block, so that platform and packaging changes elsewhere in this module merge cleanly.


def size_and_speed_settings(build: CondaBuild) -> list[Setting]:
    """Settings that change how large or fast the binaries are, not what they contain."""
    out: list[Setting] = []
    linux = build.target_platform.startswith("linux-")
    if linux:
        out.append(
            Setting(
                "USE_MKLDNN",
                "ON",
                "oneDNN (the bundled ideep/oneDNN) for CPU kernels on every Linux build: PyTorch's "
                "CMakeLists.txt defaults USE_MKLDNN to CPU_INTEL (optional on AArch64), so linux-aarch64 "
                "would lose it; CUDA builds keep it for machines without a GPU (conda-forge's build.sh "
                "exports USE_MKLDNN=1 on Linux, CPU and CUDA)",
            )
        )
    cuda = build.cuda_version
    if not cuda:
        return out
    nvcc_flags = ["-Xfatbin", "-compress-all"]
    why = "compressed fatbins keep libtorch_cuda smaller"
    if int(cuda.split(".")[0]) >= 13:
        nvcc_flags.append("-compress-mode=size")
        why += (
            "; CUDA 13's nvcc can trade decompression speed for size (-compress-mode=size, as pytorch PR "
            "161316 and conda-forge's build.sh do for CUDA 13): the CUDA packages are the largest by far"
        )
    out.append(Setting("TORCH_NVCC_FLAGS", " ".join(nvcc_flags), why))
    if build.target_platform == "linux-aarch64":
        out.append(
            Setting(
                "USE_PRIORITIZED_TEXT_FOR_LD",
                "1",
                "aarch64 CUDA: libtorch_cuda's .text outgrows the reach of aarch64 branch instructions; "
                "upstream's linker script puts the hot code first (pytorch PR 121975, conda-forge "
                "pytorch-cpu-feedstock issue 264)",
            )
        )
    return out


def _same_debug_prefix_map(caller: Mapping[str, str], build: CondaBuild) -> dict[str, str]:
    """conda-forge's compiler activations map SRC_DIR to /usr/local/src/conda/<PKG_NAME>-<PKG_VERSION> in the
    flags (-fdebug-prefix-map=$SRC_DIR=...); PKG_NAME differs between outputs, the flags must not. Whatever
    a builder wrote there, every pass maps SRC_DIR to the top-level package's path: nothing is taken from
    TOP_PKG_NAME, which conda-build 26.7.1 sets to the output's own name (conda_build/build.py 1747-1778:
    the output's environ.get_dict, then TOP_PKG_NAME = its PKG_NAME; measured: TOP_PKG_NAME=libtorch) and
    rattler-build does not set at all."""
    same = f"/usr/local/src/conda/{TOP_LEVEL}-{build.pkg_version}"
    source_map = re.compile(rf"(-f(?:debug|file|macro)-prefix-map={re.escape(str(build.src_dir))}=)\S*")
    return {
        name: source_map.sub(lambda match: match[1] + same, value) if name in _FLAG_VARIABLES else value
        for name, value in caller.items()
    }


def build_type(caller: Mapping[str, str]) -> str:
    """setup.py's rule (tools/setup_helpers/env.py): DEBUG wins over REL_WITH_DEB_INFO, default Release."""
    if _truthy(caller.get("DEBUG")):
        return "Debug"
    if _truthy(caller.get("REL_WITH_DEB_INFO")):
        return "RelWithDebInfo"
    return "Release"


def upstream_environment(
    build: CondaBuild, caller: Mapping[str, str], verbose: bool = False, cache: CompilerCache | None = None
) -> tuple[dict[str, str], list[Setting]]:
    """The caller's environment with the settings applied, and the settings (for the log)."""
    chosen = settings(build, caller, verbose, cache)
    env = dict(caller)
    for setting in chosen:
        if setting.value is None:
            env.pop(setting.name, None)
        else:
            env[setting.name] = setting.value
    return env, chosen


def reconfigure_inputs(env: Mapping[str, str]) -> dict[str, str]:
    """The part of an environment a CMake reconfigure of PyTorch reads; must match between passes."""
    return {
        name: value
        for name, value in sorted(env.items())
        if name not in RECONFIGURE_EXEMPT
        and (name.startswith(RECONFIGURE_PREFIXES) or name in RECONFIGURE_NAMES)
    }


def cuda_toolkit_cache_args(build: CondaBuild) -> list[str]:
    """conda-forge's CUDA is split: nvcc in the build prefix, headers and libraries in the host prefix under
    targets/<arch>. 2.13.0's cmake/public/cuda.cmake sets CUDAToolkit_ROOT unconditionally, so only these
    cache variables redirect FindCUDAToolkit (pytorch-build-facts.md, corrections 5; the feedstock's build.sh
    exports the same three).

    CUDA_TOOLKIT_ROOT_DIR is what kineto's CUPTI lookup reads: 2.13.0's cmake/Dependencies.cmake sets
    ``CUDA_SOURCE_DIR`` to the CMake variable ``${CUDA_TOOLKIT_ROOT_DIR}`` and finds libcupti.so (cupti.lib
    with MSVC) only below it (NO_DEFAULT_PATH), else builds kineto without CUPTI ("Could not find CUPTI
    library, using CPU-only Kineto build"). The variable comes from PyTorch's FindCUDA.cmake, which without
    it takes nvcc's parent directory, the build prefix, where cuda-cupti-dev is not (2.13.0 wheel,
    share/cmake/Caffe2/Modules_CUDA_fix/upstream/FindCUDA.cmake:672-699; it never reads an environment
    variable of that name). conda-forge's 2.13.0 sets it to the host prefix "for CUPTI" (build.sh:207-208,
    bld.bat:105-106, since fa4e0321) and forwards it to CMake with its patch 0003."""
    if not build.cuda_version:
        return []
    if build.windows:
        return windows.cuda_toolkit_cache_args(build)
    target = cuda_target(build)
    return [
        f"-DCUDAToolkit_BIN_DIR={build.build_prefix}/bin",
        f"-DCUDAToolkit_ROOT_DIR={build.prefix}",
        f"-DCUDAToolkit_TARGET_DIR={build.prefix}/targets/{target}",
        f"-DCUDA_TOOLKIT_ROOT_DIR={build.prefix}",
    ]


# NNPACK's x86-64 backend (linux-64, osx-64) generates kernels with PeachPy, which imports six; unless
# PYTHON_SIX_SOURCE_DIR is defined, NNPACK's CMakeLists.txt downloads six from PyPI at configure time
# (cmake/DownloadSix.cmake), and a build must not need the network. Defined empty, PeachPy's PYTHONPATH
# gets no extra entry and the interpreter imports the six of the host environment (recipe: six in every
# host), the same outcome as conda-forge's 2.13.0, which empties DownloadSix.cmake instead
# (pytorch-cpu-feedstock 74dd3d46 build.sh:124-125, since f168fbcb "Unvendor six"; six in its host). A
# constant: CMAKE_ARGS must be the same in every pass.
NNPACK_X86_64_TARGETS = ("linux-64", "osx-64")


def nnpack_cache_args(build: CondaBuild) -> list[str]:
    """``-DPYTHON_SIX_SOURCE_DIR=`` where NNPACK would download six (see above)."""
    return ["-DPYTHON_SIX_SOURCE_DIR="] if build.target_platform in NNPACK_X86_64_TARGETS else []


def build_number(caller: Mapping[str, str]) -> str:
    """PYTORCH_BUILD_NUMBER: the caller's, if it is a number (upstream's int() would fail on anything
    else, in the middle of setup.py), else 0."""
    value = caller.get("PYTORCH_BUILD_NUMBER", "").strip()
    if not value:
        return "0"
    if not value.isdigit():
        raise MegabuildError(
            f"PYTORCH_BUILD_NUMBER={value!r} is not a number: unset it (the driver uses 0) or give 0"
        )
    return str(int(value))


def physical_memory_bytes() -> int | None:
    """Total memory of this machine, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def max_jobs(build: CondaBuild, caller: Mapping[str, str], memory: int | None = None) -> str:
    """The caller's MAX_JOBS (a positive number); else CPU_COUNT, for CUDA builds capped by memory."""
    given = caller.get("MAX_JOBS", "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise MegabuildError(f"MAX_JOBS={given!r} is not a positive number: fix it or unset it")
        return given
    jobs = build.cpu_count
    if build.windows:
        return str(min(jobs, WINDOWS_MAX_JOBS))
    if build.target_platform.startswith("osx-"):
        return str(min(jobs, MACOS_MAX_JOBS))
    if build.cuda_version:
        memory = physical_memory_bytes() if memory is None else memory
        if memory:
            jobs = min(jobs, max(1, memory // CUDA_BYTES_PER_JOB))
    return str(jobs)


def _find_root_with_source(words: list[str], src_dir: Path) -> list[str]:
    """Append ``;<src_dir>`` to every -DCMAKE_FIND_ROOT_PATH (conda's activation and the cuda-nvcc one each
    add one and CMake keeps the last), so find_path() still finds the bundled sources (oneDNN's headers)."""
    return [
        f"{word};{src_dir}"
        if "=" in word and word.split("=", 1)[0].split(":", 1)[0] == "-DCMAKE_FIND_ROOT_PATH"
        else word
        for word in words
    ]


def _strip_cmake_args(cmake_args: str, on_windows: bool = False) -> list[str]:
    """conda-build's CMAKE_ARGS without the settings the upstream build must own."""
    owned = ("CMAKE_INSTALL_PREFIX", "CMAKE_BUILD_TYPE", "USE_MAGMA")
    words = windows.split_cmake_args(cmake_args, on_windows)
    return [
        w
        for w in words
        if not any(w.startswith(f"-D{name}=") or w.startswith(f"-D{name}:") for name in owned)
    ]


def _truthy(value: str | None) -> bool:
    return value is not None and value.upper() in {"1", "ON", "YES", "TRUE", "Y"}
