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
    # conda-forge maps the work directory to a per-package source path in debug info: it names
    # PKG_NAME, so it differs between the outputs of one recipe.
    debug_maps = (
        f"-fdebug-prefix-map={src_dir}=/usr/local/src/conda/{pkg_name}-{pkg_version} "
        f"-fdebug-prefix-map={prefix}=/usr/local/src/conda-prefix"
    )
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
