"""What activating conda-forge's compiler packages adds to a build script's environment (Linux).

conda-build activates the build and host environments before it runs ``build.sh``; conda-forge's
``{{ compiler('c') }}``/``{{ compiler('cxx') }}`` packages then export the toolchain and the standard
flags. The driver has to clean some of them up (``--as-needed``, ``-z now``, ``CMAKE_INSTALL_PREFIX`` in
``CMAKE_ARGS``, a per-output ``-fdebug-prefix-map``), so the rehearsal exports the same shape of
variables, pointing at this machine's gcc and binutils instead of conda's cross-named ones.

The values follow conda-forge's gcc activation for linux (flag sets abbreviated to the flags that
matter to a build: optimisation, PIC, hardening, include and library paths, debug-prefix maps).
"""

from __future__ import annotations

import shutil
from pathlib import Path

# conda's target triplets, as $HOST / $host_alias name them.
TRIPLETS = {"linux-64": "x86_64-conda-linux-gnu", "linux-aarch64": "aarch64-conda-linux-gnu"}
# Tuning flags per target platform (conda-forge's defaults for each architecture).
TUNING = {
    "linux-64": "-march=nocona -mtune=haswell -ftree-vectorize",
    "linux-aarch64": "-ftree-vectorize",
}
# Where each build tool is looked up on this machine (conda would have <triplet>-<tool> in BUILD_PREFIX).
TOOLS = {"CC": "gcc", "CXX": "g++", "AR": "ar", "RANLIB": "ranlib", "LD": "ld", "STRIP": "strip", "NM": "nm"}


def _tool(name: str) -> str:
    return shutil.which(name) or name


def _debug_prefix_maps(src_dir: Path, prefix: Path, pkg_name: str, pkg_version: str) -> str:
    """conda-forge's compiler activations (gcc and clang alike) map the work directory to a per-package
    source path in debug info: it names PKG_NAME, so it differs between the outputs of one recipe."""
    return (
        f"-fdebug-prefix-map={src_dir}=/usr/local/src/conda/{pkg_name}-{pkg_version} "
        f"-fdebug-prefix-map={prefix}=/usr/local/src/conda-prefix"
    )


def compiler_activation(
    *,
    prefix: Path,
    build_prefix: Path,
    src_dir: Path,
    pkg_name: str,
    pkg_version: str,
    target_platform: str,
    build_platform: str,
) -> dict[str, str]:
    """The variables conda-forge's gcc/gxx activation exports for one output."""
    triplet = TRIPLETS.get(target_platform, TRIPLETS["linux-64"])
    tuning = TUNING.get(target_platform, TUNING["linux-64"])
    debug_maps = _debug_prefix_maps(src_dir, prefix, pkg_name, pkg_version)
    hardening = "-fPIC -fstack-protector-strong -fno-plt"
    common = f"{tuning} {hardening} -O2 -ffunction-sections -pipe -isystem {prefix}/include"
    tools = {name: _tool(program) for name, program in TOOLS.items()}
    cmake_args = " ".join(
        [
            f"-DCMAKE_AR={tools['AR']}",
            f"-DCMAKE_CXX_COMPILER_AR={tools['AR']}",
            f"-DCMAKE_C_COMPILER_AR={tools['AR']}",
            f"-DCMAKE_RANLIB={tools['RANLIB']}",
            f"-DCMAKE_CXX_COMPILER_RANLIB={tools['RANLIB']}",
            f"-DCMAKE_C_COMPILER_RANLIB={tools['RANLIB']}",
            f"-DCMAKE_LINKER={tools['LD']}",
            f"-DCMAKE_STRIP={tools['STRIP']}",
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DCMAKE_INSTALL_PREFIX={prefix}",
            "-DCMAKE_INSTALL_LIBDIR=lib",
            f"-DCMAKE_PROGRAM_PATH={build_prefix}/bin;{prefix}/bin",
            *cross_cmake_args(target_platform, build_platform),
        ]
    )
    return {
        **tools,
        "CPP": f"{tools['CC']} -E",
        "HOST": triplet,
        "host_alias": triplet,
        "BUILD": TRIPLETS.get(build_platform, triplet),
        "build_alias": TRIPLETS.get(build_platform, triplet),
        "CFLAGS": f"{common} {debug_maps}",
        "CXXFLAGS": f"-fvisibility-inlines-hidden -fmessage-length=0 {common} {debug_maps}",
        "CPPFLAGS": f"-DNDEBUG -D_FORTIFY_SOURCE=2 -O2 -isystem {prefix}/include",
        "DEBUG_CFLAGS": f"{tuning} -fPIC -fstack-protector-all -fno-plt -Og -g -Wall -Wextra {debug_maps}",
        "DEBUG_CXXFLAGS": f"-fvisibility-inlines-hidden {tuning} -fPIC -Og -g {debug_maps}",
        "LDFLAGS": (
            "-Wl,-O2 -Wl,--sort-common -Wl,--as-needed -Wl,-z,relro -Wl,-z,now -Wl,--disable-new-dtags "
            f"-Wl,--gc-sections -Wl,--allow-shlib-undefined -Wl,-rpath,{prefix}/lib "
            f"-Wl,-rpath-link,{prefix}/lib -L{prefix}/lib"
        ),
        "CMAKE_ARGS": cmake_args,
        "CMAKE_PREFIX_PATH": f"{prefix}:{build_prefix}/{triplet}/sysroot/usr",
        "CONDA_BUILD_SYSROOT": f"{build_prefix}/{triplet}/sysroot",
    }


# ---- cross-compilation and macOS targets (simulated: feedstock_tools/proofs/rehearsal/target.py) ---------
# CMAKE_SYSTEM_PROCESSOR per target (ctng's @MACHINE@, clang's @UNAME_MACHINE@); Darwin's kernel release of
# the clang activation's cross CMAKE_ARGS (CMAKE_SYSTEM_VERSION, osx-arm64: darwin20.0.0).
_PROCESSORS = {"linux-64": "x86_64", "linux-aarch64": "aarch64", "osx-64": "x86_64", "osx-arm64": "arm64"}


def cross_cmake_args(target_platform: str, build_platform: str) -> list[str]:
    """What the compiler activation adds to CMAKE_ARGS when CONDA_BUILD_CROSS_COMPILATION=1: CMake then
    cross-compiles (CMAKE_CROSSCOMPILING). ctng-compiler-activation-feedstock 52080ff activate-gcc.sh:
    ``-DCMAKE_SYSTEM_NAME=@CMAKE_SYSTEM_NAME@ -DCMAKE_SYSTEM_PROCESSOR=@MACHINE@``; clang's (9fc6346
    activate-clang.sh) names Darwin and adds CMAKE_SYSTEM_VERSION. Simulated: the system stays Linux here
    (CMake's Darwin platform needs Apple's linker). Not simulated: ctng's CMAKE_FIND_ROOT_PATH and its
    ONLY modes, which would re-root the find_*() calls into a sysroot this machine does not have."""
    if target_platform == build_platform:
        return []
    args = ["-DCMAKE_SYSTEM_NAME=Linux", f"-DCMAKE_SYSTEM_PROCESSOR={_PROCESSORS[target_platform]}"]
    if target_platform.startswith("osx"):
        args.append("-DCMAKE_SYSTEM_VERSION=20.0.0")
    return args


# Flags of conda-forge's clang activation (clang-compiler-activation-feedstock 9fc6346, recipe/build.sh
# FINAL_* and recipe/activate-clang.sh *_USED), osx-64 with its x86 tuning.
_CLANG_CFLAGS = "-ftree-vectorize -fPIC -fstack-protector-strong -O2 -pipe"
_CLANG_CXX_ONLY = "-stdlib=libc++ -fvisibility-inlines-hidden -fmessage-length=0"
_CLANG_TUNING = {"osx-64": "-march=core2 -mtune=haswell -mssse3 ", "osx-arm64": ""}
# Flags only Apple's clang and ld64 know; the simulated compiler drops them (rehearsal/compilers.py).
DARWIN_ONLY_FLAGS = (
    "-mmacosx-version-min=",
    "-stdlib=libc++",
    "-Wl,-headerpad_max_install_names",
    "-headerpad_max_install_names",
    "-Wl,-undefined,dynamic_lookup",  # CMake's FindPython gives Python::Module this on APPLE
    # clang's warnings the driver does not let fail the build (megabuild/environment.py CLANG_WARNING_FLAGS);
    # gcc refuses -Wno-error= of a warning it lacks ("cc1plus: error: '-Wno-error=vla-cxx-extension': no
    # option", gcc 12 here) and does not know -Wunknown-warning-option
    "-Wno-unknown-warning-option",
    "-Wno-error=unused-command-line-argument",
    "-Wno-error=vla-cxx-extension",
)


def clang_activation(
    *,
    prefix: Path,
    build_prefix: Path,
    src_dir: Path,
    pkg_name: str,
    pkg_version: str,
    target_platform: str,
    build_platform: str,
    deployment_target: str,
    triplet: str,
    build_triplet: str,
    rules_override: Path,
) -> dict[str, str]:
    """The variables conda-forge's clang/clangxx activation exports for an osx output, pointing at the
    rehearsal's stand-in compilers ``<triplet>-clang``/``-clang++`` in BUILD_PREFIX/bin."""
    debug_maps = _debug_prefix_maps(src_dir, prefix, pkg_name, pkg_version)
    tuning = _CLANG_TUNING[target_platform]
    cflags = f"{tuning}{_CLANG_CFLAGS} -isystem {prefix}/include {debug_maps}"
    cxxflags = f"{tuning}{_CLANG_CFLAGS} {_CLANG_CXX_ONLY} -isystem {prefix}/include {debug_maps}"
    ldflags = "-Wl,-headerpad_max_install_names -Wl,-dead_strip_dylibs"
    tools = {name: _tool(program) for name, program in TOOLS.items()}
    cmake_args = [
        f"-DCMAKE_AR={tools['AR']}",
        f"-DCMAKE_RANLIB={tools['RANLIB']}",
        f"-DCMAKE_LINKER={tools['LD']}",
        f"-DCMAKE_STRIP={tools['STRIP']}",
        f"-DCMAKE_OSX_DEPLOYMENT_TARGET={deployment_target}",
        "-DCMAKE_BUILD_TYPE=Release",
        "-DCMAKE_FIND_FRAMEWORK=LAST",
        "-DCMAKE_FIND_APPBUNDLE=LAST",
        f"-DCMAKE_INSTALL_PREFIX={prefix}",
        "-DCMAKE_INSTALL_LIBDIR=lib",
        f"-DCMAKE_PROGRAM_PATH={build_prefix}/bin;{prefix}/bin",
        *cross_cmake_args(target_platform, build_platform),
        # simulation only: shared libraries named .dylib (target.py)
        f"-DCMAKE_USER_MAKE_RULES_OVERRIDE={rules_override}",
    ]
    compilers = {"CC": f"{build_prefix}/bin/{triplet}-clang", "CXX": f"{build_prefix}/bin/{triplet}-clang++"}
    return {
        **tools,
        **compilers,
        "CLANG": compilers["CC"],
        "OBJC": compilers["CC"],
        "CPP": f"{compilers['CC']} -E",
        "HOST": triplet,
        "host_alias": triplet,
        "BUILD": build_triplet,
        "build_alias": build_triplet,
        "CONDA_TOOLCHAIN_HOST": triplet,
        "CONDA_TOOLCHAIN_BUILD": build_triplet,
        "CFLAGS": cflags,
        "CXXFLAGS": cxxflags,
        "CPPFLAGS": f"-D_FORTIFY_SOURCE=2 -isystem {prefix}/include -mmacosx-version-min={deployment_target}",
        "DEBUG_CFLAGS": f"{cflags} -Og -g -Wall -Wextra",
        "LDFLAGS": f"{ldflags} -Wl,-rpath,{prefix}/lib -L{prefix}/lib",
        "LDFLAGS_LD": f"-headerpad_max_install_names -dead_strip_dylibs -rpath {prefix}/lib -L{prefix}/lib",
        "CMAKE_ARGS": " ".join(cmake_args),
        "CMAKE_PREFIX_PATH": f":{prefix}",
        "MACOSX_DEPLOYMENT_TARGET": deployment_target,
        "OSX_ARCH": "arm64" if target_platform == "osx-arm64" else "x86_64",
    }
