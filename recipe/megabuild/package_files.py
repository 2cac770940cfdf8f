"""Which installed file goes to which package: the one staging table of the recipe (plain data).

The upstream build leaves its files in three trees:

* ``install``: CMake's install prefix ``<SRC_DIR>/torch``, only its ``lib``, ``include``, ``share`` and
  ``bin`` directories (the rest of ``<SRC_DIR>/torch`` is Python source). Paths are relative to
  ``<SRC_DIR>/torch`` and keep that relative path under ``$PREFIX`` (``lib/libc10.so`` ->
  ``$PREFIX/lib/libc10.so``).
* ``setuptools``: ``<SRC_DIR>/build/lib.<platform>-cpython-3XX``, what ``setup.py build`` assembles for one
  Python: the ``torch``, ``torchgen`` and ``functorch`` packages, ``torch/_C.cpython-3XX-<platform>.so`` and
  copies of the install tree under ``torch/{lib,include,share,bin}``. Paths keep their relative path under
  ``$SP_DIR``.
* ``metadata``: the ``torch-<version>.dist-info`` directory ``setup.py dist_info`` writes; under ``$SP_DIR``.

A scikit-build-core source tree (2.14 and later, megabuild/skbuild.py) has no ``build/lib.*``: its wheel,
unpacked, gives all three, with the same shapes: ``install`` = the wheel's ``torch/`` (CMake's install prefix
there, ``wheel.install-dir``), ``setuptools`` = the wheel's root (``torch/``, ``torchgen/``, ``functorch/``,
``torch/_C...so`` and ``torch/{lib,include,share,bin}``, as ``build/lib.*`` had them), ``metadata`` = its
dist-info. So one table serves both kinds of tree.

Shared libraries are written ``lib/libc10{shlib}``: ``{shlib}`` is the platform's library suffix as
conda-build exports it in ``SHLIB_EXT``, with an optional version where that platform puts one: ``.so``,
``.so.2``, ``.so.2.13.0`` on Linux (a versioned library and its links), ``.dylib``, ``.2.dylib`` on macOS
(:func:`megabuild.staging.shlib_regex`). Python extension modules are ``.so`` on both
(``_C.cpython-312-darwin.so``) and fall under the ``torch/**`` rule. So one table serves linux and macOS,
and a library of the other platform's naming (a ``.so`` in a macOS tree) is unclaimed and stops the build.

Every file of every tree must match exactly one rule: a file no rule claims, or that two rules claim, stops
the build with its path (a new upstream file is a packaging decision, never an accident). Rules with package
:data:`NOT_SHIPPED` are deliberate omissions, each with its reason.

Third-party libraries that official wheels bundle (an OpenMP runtime, NVPL BLAS/LAPACK, the Arm Compute
Library, KleidiAI's and mimalloc's headers, ...) are never shipped: their rule carries a :class:`Bundled`
decision saying what the conda build has instead, a conda-forge run requirement, the code compiled in
statically, or nothing at all, with the evidence. ``python -m feedstock_tools wheel-layout`` prints these
decisions for a real wheel, and its linkage check accepts a wheel binary's need of a bundled library only
through such a decision.

Layout (as conda-forge's pytorch packages have it): ``libtorch`` owns the C++ libraries, the headers of
PyTorch itself and ``share/cmake``, so ``find_package(Torch)`` works from ``$PREFIX/share/cmake/Torch``.
``pytorch`` owns ``$PREFIX/lib/libtorch_python{shlib}`` and the Python packages; its
``site-packages/torch/{lib,include,share,bin}`` are relative symlinks to ``$PREFIX/{lib,include,share,bin}``
(action ``link``), so ``torch/share/cmake/Torch`` computes its prefix as ``site-packages/torch`` and finds the
very same libraries and headers, and ``torch/_C``'s ``$ORIGIN/lib`` RUNPATH reaches ``$PREFIX/lib``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

# The recipe's names (recipe/meta.yaml, recipe-v1/recipe.yaml), read from here by the driver and the tools
# (tests/test_package_names.py keeps them from being written anywhere else). The top-level build, the one
# compile every output reuses, is no package of its own.
TOP_LEVEL = "libtorch-split"
LIBTORCH = "libtorch"
LIBTORCH_CUDA_LINALG = "libtorch-cuda-linalg"
PYTORCH = "pytorch"
# the metapackages users install, holding no files
PYTORCH_CPU = "pytorch-cpu"
PYTORCH_GPU = "pytorch-gpu"
NOT_SHIPPED = "(not shipped)"

PACKAGES = (LIBTORCH, LIBTORCH_CUDA_LINALG, PYTORCH)  # the packages with files, in the order they link

Tree = Literal["install", "setuptools", "metadata"]
# What the conda build has in place of a library an official wheel bundles:
# run requirement: a conda-forge package provides it and is a run requirement of the package that loads it;
# static: the build compiles the bundled source into PyTorch's own libraries, nothing separate is shipped;
# absent: the conda build does not use it at all.
Decision = Literal["run requirement", "static", "absent"]
# copy: the file goes into the package at its path; link: the package holds a symlink to $PREFIX/<link_to>
# in place of the directory the file is in; drop: the file is not packaged (package NOT_SHIPPED).
Action = Literal["copy", "link", "drop"]


@dataclass(frozen=True)
class Bundled:
    """The decision for a third-party library an official wheel bundles, with its evidence."""

    library: str  # what it is
    decision: Decision
    # decision "run requirement": the conda-forge package providing it; "static"/"absent": ""
    conda_package: str
    evidence: str


@dataclass(frozen=True)
class Rule:
    """Files of ``tree`` matching ``pattern`` (``*`` within a path segment, ``**`` any number of segments)."""

    tree: Tree
    pattern: str
    package: str
    why: str
    action: Action = "copy"
    excluding: tuple[str, ...] = ()
    # action "link": the directory (relative to the tree) replaced by a symlink, and its $PREFIX target
    link_dir: str = ""
    link_to: str = ""
    # a third-party library or header set that official wheels bundle: what the conda build has instead
    bundled: Bundled | None = None
    # where a copied file goes, relative to $PREFIX; "" keeps its path in the tree (install tree: under
    # $PREFIX, the others: under $SP_DIR). A template: {path} its path in the tree, {name} its file name,
    # {sp_dir} $SP_DIR relative to $PREFIX (the Windows table below needs all three)
    destination: str = ""


_TEST_ARTIFACTS = "BUILD_TEST artifacts: the recipe builds with BUILD_TEST=0; official wheels carry them"
_THIRD_PARTY_HEADERS = (
    "headers of bundled third-party code installed beside PyTorch's own: conda-forge packages provide the "
    "shared ones (fmt, protobuf, pybind11, sleef, onednn, cpuinfo, ...) and shipping these would clobber them"
)
_LIBTORCH_LIBS = "PyTorch's C++ libraries; linked by the pytorch package and by C++ consumers"
_NVRTC_SHIM = "CUDA builds: NVRTC shim, dlopened by libtorch_cuda"
_WHEEL_BUNDLE = "bundled into the official wheel after the build; never a vendored copy in a conda package"
_NOT_IN_PREFIX_INCLUDE = (
    "pytorch-cpu-feedstock 74dd3d46 build.sh moves only include/{ATen,caffe2,tensorpipe,torch,c10} into "
    "$PREFIX/include"
)

# ---- bundled third-party libraries: the decisions (wheel evidence: `wheel-layout --needs-list` of the
# 2.13.0 wheels, tests/data/torch-2.13.0-*-wheel-needs.txt.gz) -----------------------------------------------
GNU_OPENMP = Bundled(
    "GNU OpenMP runtime libgomp.so.1 (x86_64 and aarch64 wheels; libtorch_cpu loads it)",
    "run requirement",
    "_openmp_mutex",
    "conda-forge's gcc links -fopenmp code against libgomp; $PREFIX/lib/libgomp.so.1 is the link that "
    "_openmp_mutex installs (ctng-compilers-feedstock b9e501a recipe/install-openmp_impl.sh), a run "
    "dependency of libgcc (its meta.yaml); libtorch lists it as a run requirement on linux",
)
LLVM_OPENMP = Bundled(
    "LLVM OpenMP runtime libomp.dylib and its omp.h (macOS wheel, install name "
    "/opt/llvm-openmp/lib/libomp.dylib; libtorch_cpu loads @rpath/libomp.dylib)",
    "run requirement",
    "llvm-openmp",
    "the recipe's osx host has llvm-openmp, whose strong run_exports make it a run requirement "
    "(openmp-feedstock 7776098 recipe/meta.yaml); conda-forge's 2.13.0 pytorch runs with llvm-openmp "
    "(pytorch-cpu-feedstock 74dd3d46); omp.h is that package's header",
)
NVPL = Bundled(
    "NVIDIA Performance Libraries BLAS and LAPACK, OpenMP-threaded LP64 builds (aarch64 wheel's BLAS; "
    "libtorch_cpu loads libnvpl_{blas,lapack}_lp64_gomp.so.0)",
    "run requirement",
    "libcblas",
    "the conda build links the BLAS interface packages libblas/libcblas/liblapack (blas_impl generic, "
    "patch 0005), whose run_exports make them run requirements; the implementation is chosen at install "
    "time, NVPL among them (blas-feedstock 5505ad3 recipe/meta.yaml: blas_impl nvpl)",
)
GFORTRAN = Bundled(
    "GNU Fortran runtime libgfortran.so.5 (aarch64 wheel)",
    "absent",
    "",
    "no library of the 2.13.0 aarch64 wheel loads it (its needs list); where a BLAS implementation needs "
    "it, conda-forge's libgfortran5 comes as that implementation's dependency",
)
ARM_COMPUTE = Bundled(
    "Arm Compute Library libarm_compute{,_graph}.so (aarch64 wheel; oneDNN's ACL backend, libtorch_cpu "
    "loads both)",
    "absent",
    "",
    "USE_MKLDNN_ACL defaults to OFF (cmake_dependent_option in CMakeLists.txt, 2.6.0 text) and neither "
    "this recipe (megabuild/environment.py) nor pytorch-cpu-feedstock 74dd3d46 build.sh turns it on",
)
KLEIDIAI = Bundled(
    "KleidiAI micro-kernel headers include/kai/** (aarch64 and macOS wheels)",
    "static",
    "",
    "2.13.0 builds its bundled KleidiAI with BUILD_SHARED_LIBS OFF into Caffe2_DEPENDENCY_LIBS "
    "(cmake/Dependencies.cmake context of pytorch-cpu-feedstock 74dd3d46 patch 0012), as conda-forge does "
    "(it sets no USE_SYSTEM_KLEIDIAI); the headers serve only ATen/native/kleidiai; "
    + _NOT_IN_PREFIX_INCLUDE,
)
MIMALLOC = Bundled(
    "mimalloc headers include/mimalloc-2.3/** (aarch64 and win_amd64 wheels; mi_malloc is inside the "
    "aarch64 libc10.so; on Windows c10's allocator)",
    "static",
    "",
    "USE_MIMALLOC builds mimalloc-static (MI_BUILD_SHARED OFF) into libc10 (CMakeLists.txt and "
    "c10/CMakeLists.txt, 2.6.0 text); no PyTorch header includes mimalloc's; " + _NOT_IN_PREFIX_INCLUDE,
)


# fmt: off
RULES: tuple[Rule, ...] = (
    # ---- install tree: libraries -----------------------------------------------------------------------
    Rule("install", "lib/libc10{shlib}", LIBTORCH, _LIBTORCH_LIBS),
    Rule("install", "lib/libc10_cuda{shlib}", LIBTORCH, _LIBTORCH_LIBS),
    Rule("install", "lib/libtorch{shlib}", LIBTORCH, _LIBTORCH_LIBS),
    Rule("install", "lib/libtorch_cpu{shlib}", LIBTORCH, _LIBTORCH_LIBS),
    Rule("install", "lib/libtorch_cuda{shlib}", LIBTORCH, _LIBTORCH_LIBS),
    Rule("install", "lib/libtorch_global_deps{shlib}", LIBTORCH,
         "preloaded RTLD_GLOBAL by torch/__init__.py"),
    Rule("install", "lib/libcaffe2_nvrtc{shlib}", LIBTORCH, _NVRTC_SHIM),
    Rule("install", "lib/libtorch_nvshmem{shlib}", LIBTORCH, "CUDA builds with NVSHMEM"),
    Rule("install", "lib/libshm{shlib}", LIBTORCH,
         "shared-memory manager library, used by torch_shm_manager"),
    Rule("install", "lib/libtorch_cuda_linalg{shlib}", LIBTORCH_CUDA_LINALG,
         "dlopened by bare name from libtorch_cpu's directory; the MAGMA and non-MAGMA builds are variants"),
    Rule("install", "lib/libtorch_python{shlib}", PYTORCH,
         "tied to one CPython minor version; lives in $PREFIX/lib so TorchConfig.cmake's torch_python works"),
    Rule("install", "lib/libshm/**", NOT_SHIPPED, "libshm's sources: upstream keeps them in torch/lib",
         action="drop"),
    Rule("install", "lib/libshm_windows/**", NOT_SHIPPED, "libshm's Windows sources", action="drop"),
    Rule("install", "lib/*.a", NOT_SHIPPED,
         "static archives of bundled dependencies; setup.py's package_data leaves them out", action="drop"),
    Rule("install", "lib/libgomp.so.1", NOT_SHIPPED, _WHEEL_BUNDLE, action="drop", bundled=GNU_OPENMP),
    Rule("install", "lib/libomp{shlib}", NOT_SHIPPED, _WHEEL_BUNDLE, action="drop", bundled=LLVM_OPENMP),
    Rule("install", "lib/libnvpl_*{shlib}", NOT_SHIPPED, _WHEEL_BUNDLE, action="drop", bundled=NVPL),
    Rule("install", "lib/libgfortran{shlib}", NOT_SHIPPED, _WHEEL_BUNDLE, action="drop", bundled=GFORTRAN),
    Rule("install", "lib/libarm_compute*{shlib}", NOT_SHIPPED, _WHEEL_BUNDLE, action="drop",
         bundled=ARM_COMPUTE),
    Rule("install", "lib/libtorchbind_test{shlib}", NOT_SHIPPED, _TEST_ARTIFACTS, action="drop"),
    Rule("install", "lib/libjitbackend_test{shlib}", NOT_SHIPPED, _TEST_ARTIFACTS, action="drop"),
    Rule("install", "lib/libbackend_with_compiler{shlib}", NOT_SHIPPED, _TEST_ARTIFACTS, action="drop"),
    Rule("install", "lib/libaoti_custom_ops{shlib}", NOT_SHIPPED, _TEST_ARTIFACTS, action="drop"),
    # ---- install tree: executables -----------------------------------------------------------------------
    Rule("install", "bin/torch_shm_manager", LIBTORCH, "torch.multiprocessing's file_system sharing"),
    Rule("install", "bin/protoc", NOT_SHIPPED, "bundled protobuf compiler; conda-forge's libprotobuf has one",
         action="drop"),
    Rule("install", "bin/protoc-*", NOT_SHIPPED, "bundled protobuf compiler (versioned name)", action="drop"),
    Rule("install", "bin/test_*", NOT_SHIPPED, _TEST_ARTIFACTS + " (test_*.pt models too)", action="drop"),
    Rule("install", "bin/*Test", NOT_SHIPPED, _TEST_ARTIFACTS, action="drop"),
    Rule("install", "bin/*.ptl", NOT_SHIPPED, _TEST_ARTIFACTS, action="drop"),
    Rule("install", "bin/upgrader_models/**", NOT_SHIPPED, _TEST_ARTIFACTS, action="drop"),
    # ---- install tree: headers ---------------------------------------------------------------------------
    Rule("install", "include/ATen/**", LIBTORCH, "PyTorch's C++ API headers"),
    Rule("install", "include/c10/**", LIBTORCH, "PyTorch's C++ API headers"),
    Rule("install", "include/caffe2/**", LIBTORCH, "PyTorch's C++ API headers (caffe2/core/macros.h, ...)"),
    Rule("install", "include/torch/**", LIBTORCH, "PyTorch's C++ API headers (torch/extension.h, csrc/api)"),
    Rule("install", "include/tensorpipe/**", LIBTORCH, "included by torch/csrc/distributed/rpc headers"),
    Rule("install", "include/libshm.h", LIBTORCH, "the header of libshm.so"),
    Rule("install", "include/omp.h", NOT_SHIPPED, "OpenMP header of the bundled runtime", action="drop",
         bundled=LLVM_OPENMP),
    Rule("install", "include/kai/**", NOT_SHIPPED, "headers of the bundled KleidiAI", action="drop",
         bundled=KLEIDIAI),
    Rule("install", "include/mimalloc-*/**", NOT_SHIPPED, "headers of the bundled mimalloc", action="drop",
         bundled=MIMALLOC),
    # ---- install tree: CUDA builds only ------------------------------------------------------------------
    # (the other CUDA-only files of the 2.13.0 CUDA wheel, tests/data/torch-2.13.0-cuda130-wheel-files.txt.gz,
    # are libraries named above and headers below include/{ATen,c10,tensorpipe}/, claimed by the rules there)
    Rule("install", "include/THC/**", LIBTORCH,
         "CUDA builds: THCAtomics.cuh and THCDeviceUtils.cuh forward to ATen/cuda; downstream CUDA "
         "extensions (torchvision's kernels among them) still include them"),
    *(
        Rule("install", f"include/{name}", NOT_SHIPPED, _THIRD_PARTY_HEADERS, action="drop")
        for name in (
            "advisor-annotate.h", "clog.h", "cpuinfo.h", "dnnl*.h", "dnnl*.hpp", "fbgemm/**", "fmt/**",
            "fp16/**", "fp16.h", "fxdiv.h", "google/**", "ittnotify*.h", "jitprofiling.h", "kineto/**",
            "legacy/**", "libittnotify.h", "nnpack.h", "oneapi/**", "psimd.h", "pthreadpool.h",
            "pybind11/**", "qnnpack_func.h", "sleef.h",
        )
    ),
    # ---- install tree: CMake package files ---------------------------------------------------------------
    *(
        Rule("install", f"share/cmake/{name}/**", LIBTORCH,
             "find_package(Torch) from $PREFIX/share/cmake/Torch; variant-specific (CPU vs CUDA)")
        for name in ("ATen", "Caffe2", "Gloo", "Tensorpipe", "Torch")
    ),
    # ---- setuptools tree (one Python) --------------------------------------------------------------------
    *(
        Rule("setuptools", f"torch/{name}/**", PYTORCH,
             f"copy of the install tree's {name}/: a symlink to $PREFIX/{name} instead (conda-forge layout)",
             action="link", link_dir=f"torch/{name}", link_to=name)
        for name in ("lib", "include", "share", "bin")
    ),
    Rule("setuptools", "torch/test/**", NOT_SHIPPED, _TEST_ARTIFACTS, action="drop"),
    Rule("setuptools", "torch/**", PYTORCH, "the torch Python package and the torch._C extension",
         excluding=("torch/lib/**", "torch/include/**", "torch/share/**", "torch/bin/**", "torch/test/**")),
    Rule("setuptools", "torchgen/**", PYTORCH, "code generator used by torch.utils.cpp_extension and AOTI"),
    Rule("setuptools", "functorch/**", PYTORCH, "the functorch compatibility package"),
    # ---- metadata ----------------------------------------------------------------------------------------
    Rule("metadata", "torch-*.dist-info/**", PYTORCH, "so pip and importlib.metadata see torch"),
)
# fmt: on


# ---- win-64 --------------------------------------------------------------------------------------------
# conda's Windows layout (conda-build environ.py windows_vars): C/C++ files under %LIBRARY_PREFIX% =
# Library/, DLLs in Library/bin (on PATH when an environment is active, and added with os.add_dll_directory
# by torch/__init__.py's _load_dll_libraries: os.path.join(sys.exec_prefix, "Library", "bin"), the 2.13.0
# win_amd64 wheel's torch/__init__.py lines 175 and 241-242), import libraries in Library/lib, headers in
# Library/include, CMake packages in Library/share/cmake (TorchConfig.cmake computes TORCH_INSTALL_PREFIX
# three directories up: Library/). conda packages on Windows cannot rely on symlinks, so site-packages/torch
# keeps no lib/include/share/bin copies: everything comes from Library/ (conda-forge/pytorch-cpu-feedstock
# 74dd3d46 recipe/bld.bat places the files the same way; this table is derived from the one above, so a
# library named there is named here).
#
# Where the DLLs are in the install tree: 2.13.0 installs every library with DESTINATION lib (the wheel's
# torch/lib/c10.dll); with conda-forge's patch 0008 ("remove DESTINATION lib from install(TARGETS)",
# applied on win) CMake's defaults put DLLs (RUNTIME) in bin/ and import libraries (ARCHIVE) in lib/, and the
# exported Caffe2Targets-release.cmake names bin/c10.dll, which is where Library/bin needs it: without that
# patch, find_package(Torch) fails its check that the imported lib/c10.dll exists. Both places are claimed.

LIBRARY = "Library"  # %LIBRARY_PREFIX% relative to %PREFIX%
_LINUX_LIBRARY = re.compile(r"lib/lib(?P<stem>\w+)\{shlib\}")
_WINDOWS_SOURCE_COPIES = (
    "copy of the install tree, which libtorch and pytorch place in Library/ and Lib/site-packages/torch/lib; "
    "conda packages on Windows cannot rely on symlinks, and torch/__init__.py finds the DLLs in "
    "sys.exec_prefix/Library/bin"
)
_WINDOWS_STATIC = (
    "static library of bundled code (the Windows counterpart of lib/*.a; the 2.13.0 win_amd64 wheel ships "
    "these four): linked into PyTorch's DLLs, nothing links it later"
)
# The third-party DLLs of the win_amd64 wheel (its needs list, tests/data/torch-2.13.0-cp312-win_amd64-wheel-
# needs.txt.gz: torch_cpu.dll imports libiomp5md.dll and uv.dll; nothing imports libiompstubs5md.dll).
OPENMP_WINDOWS = Bundled(
    "Intel OpenMP runtime libiomp5md.dll (win_amd64 wheel; torch_cpu.dll loads it)",
    "run requirement",
    "llvm-openmp",
    "the recipe's win host has llvm-openmp (patch 0024 compiles OpenMP for the LLVM runtime), whose strong "
    "run_exports make it a run requirement; on Windows it ships Library/bin/libiomp5md.dll beside libomp.dll "
    "(openmp-feedstock 7776098 recipe/meta.yaml, its tests), and conda-forge's mkl is built with llvm-openmp "
    "(intel_repack-feedstock 54d37f9 recipe/meta.yaml: openmp_pkg), so MKL and PyTorch share that runtime",
)
OPENMP_STUBS_WINDOWS = Bundled(
    "Intel OpenMP stub library libiompstubs5md.dll (win_amd64 wheel)",
    "absent",
    "",
    "no binary of the 2.13.0 win_amd64 wheel loads it (its needs list); it is the serial stand-in for "
    "libiomp5md.dll, and the conda build links the real runtime",
)
LIBUV_WINDOWS = Bundled(
    "libuv uv.dll (win_amd64 wheel; torch_cpu.dll loads it, for gloo's transport)",
    "run requirement",
    "libuv",
    "libuv is a host requirement of the recipe on every platform; its run_exports pin_subpackage('libuv', "
    "max_pin='x') make it a run requirement, and it ships Library/bin/uv.dll (libuv-feedstock 13188ba "
    "recipe/meta.yaml)",
)


def _windows_library_rules(rule: Rule, stem: str) -> tuple[Rule, ...]:
    """The DLL (in lib/ or bin/, see above) and the import library of one library of the Linux table."""
    if rule.action == "drop":
        return tuple(
            replace(rule, pattern=f"{folder}/{stem}{suffix}")
            for folder, suffix in (("lib", ".dll"), ("bin", ".dll"), ("lib", ".lib"))
        )
    # torch_python.lib beside torch/_C: torch.utils.cpp_extension links extensions with
    # /LIBPATH:<site-packages>/torch/lib torch_python.lib (the wheel's cpp_extension.py), and conda-forge's
    # 2.13.0 test asserts %SP_DIR%\torch\lib\torch_python.lib
    implib = "{sp_dir}/torch/lib/{name}" if stem == "torch_python" else f"{LIBRARY}/lib/{{name}}"
    dll = f"{LIBRARY}/bin/{{name}}"
    return (
        *(replace(rule, pattern=f"{folder}/{stem}.dll", destination=dll) for folder in ("lib", "bin")),
        replace(rule, pattern=f"lib/{stem}.lib", why=f"{rule.why} (import library)", destination=implib),
    )


# fmt: off
_WINDOWS_ONLY_RULES = (
    *(
        Rule("install", f"lib/{name}.lib", NOT_SHIPPED, _WINDOWS_STATIC, action="drop")
        for name in ("cpuinfo", "fmt", "libittnotify", "sleef")
    ),
    Rule("install", "bin/protoc.exe", NOT_SHIPPED, "bundled protobuf compiler; conda-forge's libprotobuf "
         "has one", action="drop"),
    Rule("install", "lib/libiomp5md.dll", NOT_SHIPPED, _WHEEL_BUNDLE, action="drop", bundled=OPENMP_WINDOWS),
    Rule("install", "lib/libiompstubs5md.dll", NOT_SHIPPED, _WHEEL_BUNDLE, action="drop",
         bundled=OPENMP_STUBS_WINDOWS),
    Rule("install", "lib/uv.dll", NOT_SHIPPED, _WHEEL_BUNDLE, action="drop", bundled=LIBUV_WINDOWS),
)
# fmt: on


def _windows_rules() -> tuple[Rule, ...]:
    out: list[Rule] = []
    for rule in RULES:
        library = _LINUX_LIBRARY.fullmatch(rule.pattern)
        if rule.tree == "install" and library is not None:
            out += _windows_library_rules(rule, library["stem"])
        elif rule.tree == "install" and rule.pattern in ("lib/*.a", "lib/libgomp.so.1"):
            continue  # ELF-only names; their Windows counterparts are in _WINDOWS_ONLY_RULES
        elif rule.tree == "install":
            out.append(rule if rule.action == "drop" else replace(rule, destination=f"{LIBRARY}/{{path}}"))
        elif rule.action == "link":
            out.append(Rule(rule.tree, rule.pattern, NOT_SHIPPED, _WINDOWS_SOURCE_COPIES, action="drop"))
        else:
            out.append(rule)
    known = {rule.pattern for rule in out}  # a Windows file the Linux table names already is not named twice
    return (*out, *(rule for rule in _WINDOWS_ONLY_RULES if rule.pattern not in known))


WINDOWS_RULES: tuple[Rule, ...] = _windows_rules()


def rules_for(shlib_ext: str) -> tuple[Rule, ...]:
    """The table of a platform, by conda-build's SHLIB_EXT: .dll is win-64, the others share RULES."""
    return WINDOWS_RULES if shlib_ext == ".dll" else RULES
