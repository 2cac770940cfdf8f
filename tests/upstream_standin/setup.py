"""setup.py of the upstream stand-in: a TEST DOUBLE of PyTorch 2.13.0's setup.py build interface.

What it reproduces (see docs/reference/rehearsal.md and ../../docs/reference/architecture.md):
- every command except clean/egg_info/sdist/dist_info first builds the CMake project in ``build/``;
- CMake is configured only when ``build/CMakeCache.txt`` (or, with Ninja, ``build/build.ninja``) is
  missing, or when ``CMAKE_FRESH=1``; later runs only do ``cmake --build build --target install``;
- the generator is Ninja when ninja is on PATH and USE_NINJA is not negative, unless the environment
  names one in ``CMAKE_GENERATOR`` (conda-build exports ``Unix Makefiles``);
- the configure passes ``-DPython_EXECUTABLE=sys.executable`` and ``-DPython_NumPy_INCLUDE_DIR``,
  ``BUILD_PYTHON``, ``USE_NUMPY``, ``BUILD_TEST``, ``CMAKE_INSTALL_PREFIX=<source>/torch`` and
  ``TORCH_BUILD_VERSION``, then the words of ``$CMAKE_ARGS`` (the recipe's setup.py patch adds that);
  ``USE_*``/``BUILD_*``/``CMAKE_*`` environment variables reach CMake through cmake/EnvVarForwarding.cmake;
- ``--cmake-only`` configures (when needed) and exits without building;
- it imports ``tools/generate_torch_version.py`` at import time (``packaging``, and the assert that
  ``PYTORCH_BUILD_NUMBER`` is set whenever ``PYTORCH_BUILD_VERSION`` is) and takes the version from it;
- ``torch._C`` is built and installed by CMake (2.13); setuptools copies ``torch/`` with its installed
  ``lib``/``include``/``share``/``bin`` trees and ``_C{EXT_SUFFIX}`` into ``build/lib.<plat>-cpython-3XX/``,
  the per-interpreter directory because the distribution says it has extension modules.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent
# The version script is imported at import time, as upstream's setup.py does, and before setuptools: pip's
# setuptools (>= 71) makes its vendored packaging importable once imported, conda-forge's has none (build
# facts, corrections 2), so this order lets a host without `packaging` fail here as it does on conda-forge.
# PYTORCH_BUILD_VERSION without PYTORCH_BUILD_NUMBER fails here too, for every command.
sys.path.insert(0, str(ROOT))
from setuptools import setup  # noqa: E402
from setuptools.dist import Distribution  # noqa: E402
from tools.generate_torch_version import get_torch_version  # noqa: E402

BUILD_DIR = ROOT / "build"
INSTALL_DIR = ROOT / "torch"
VERSION = get_torch_version()
# Commands that never build the C++ libraries, as in upstream's setup.py.
NO_BUILD_COMMANDS = {"clean", "egg_info", "sdist", "dist_info", "--help", "-h", "--version"}
TRUE_WORDS = {"1", "ON", "YES", "TRUE", "Y"}
FALSE_WORDS = {"0", "OFF", "NO", "FALSE", "N"}


def report(message: str) -> None:
    print(f"-- [stand-in setup.py] {message}", flush=True)


def env_flag(name: str, words: set[str]) -> bool:
    return os.environ.get(name, "").upper() in words


def numpy_include() -> str | None:
    if env_flag("USE_NUMPY", FALSE_WORDS):
        return None
    try:
        import numpy
    except ImportError:
        return None
    return numpy.get_include()


def build_type() -> str:
    """The cached CMAKE_BUILD_TYPE wins once a cache exists, as upstream's BuildType()."""
    cache = BUILD_DIR / "CMakeCache.txt"
    if cache.exists():
        for line in cache.read_text().splitlines():
            if line.startswith("CMAKE_BUILD_TYPE:"):
                return line.split("=", 1)[1] or "Release"
    if env_flag("DEBUG", TRUE_WORDS):
        return "Debug"
    if env_flag("REL_WITH_DEB_INFO", TRUE_WORDS):
        return "RelWithDebInfo"
    return os.environ.get("CMAKE_BUILD_TYPE", "Release")


def cmake_generator() -> str:
    """Ninja when it is on PATH and USE_NINJA is not negative; a CMAKE_GENERATOR variable wins (upstream)."""
    if os.environ.get("CMAKE_GENERATOR"):
        return os.environ["CMAKE_GENERATOR"]
    if shutil.which("ninja") and not env_flag("USE_NINJA", FALSE_WORDS):
        return "Ninja"
    return "Unix Makefiles"


def cmake_generate() -> None:
    cache = BUILD_DIR / "CMakeCache.txt"
    if env_flag("CMAKE_FRESH", TRUE_WORDS) and cache.exists():
        cache.unlink()
    os.environ.pop("CMAKE_FRESH", None)
    generator = cmake_generator()
    if cache.exists() and (generator != "Ninja" or (BUILD_DIR / "build.ninja").exists()):
        report("build/CMakeCache.txt exists: not re-running CMake (as upstream)")
        return
    if "CMAKE_BUILD_TYPE" not in os.environ:
        os.environ["CMAKE_BUILD_TYPE"] = build_type()
    BUILD_DIR.mkdir(exist_ok=True)
    numpy_dir = numpy_include()
    args = [
        "cmake",
        f"-G{generator}",
        f"-DPython_EXECUTABLE={sys.executable}",
        f"-DBUILD_PYTHON={'False' if env_flag('BUILD_LIBTORCH_WHL', TRUE_WORDS) else 'True'}",
        f"-DBUILD_TEST={'False' if env_flag('BUILD_TEST', FALSE_WORDS) else 'True'}",
        f"-DUSE_NUMPY={'True' if numpy_dir else 'False'}",
        f"-DCMAKE_INSTALL_PREFIX={INSTALL_DIR}",
        f"-DTORCH_BUILD_VERSION={VERSION}",
    ]
    if numpy_dir:
        args.append(f"-DPython_NumPy_INCLUDE_DIR={numpy_dir}")
    args += shlex.split(os.environ.get("CMAKE_ARGS", ""))
    args.append(str(ROOT))
    report("configuring: " + shlex.join(args))
    subprocess.run(args, cwd=BUILD_DIR, check=True)


def cmake_build() -> None:
    args = ["cmake", "--build", ".", "--target", "install", "--config", build_type()]
    if os.environ.get("MAX_JOBS"):
        args += ["-j", os.environ["MAX_JOBS"]]
    elif cmake_generator() != "Ninja":
        args += ["-j", str(os.cpu_count() or 1)]
    report("building: " + shlex.join(args))
    subprocess.run(args, cwd=BUILD_DIR, check=True)


class BinaryDistribution(Distribution):
    """torch._C is package data built by CMake; the distribution still has extension modules, so setuptools
    builds into the per-interpreter build/lib.<plat>-cpython-3XX and tags the wheel for one Python."""

    def has_ext_modules(self) -> bool:
        return True


def build_deps() -> None:
    if shutil.which("cmake") is None:
        sys.exit("the upstream stand-in needs cmake on PATH")
    cmake_generate()
    cmake_build()


def main() -> None:
    # --cmake-only: configure, then exit before building and before setuptools sees the argument (upstream
    # filters it out of sys.argv; pytorch 2.6.0 setup.py, "Stop once cmake terminates")
    cmake_only = "--cmake-only" in sys.argv
    sys.argv = [arg for arg in sys.argv if arg != "--cmake-only"]
    if cmake_only:
        cmake_generate()
        report("Finished running cmake (--cmake-only)")
        return
    if not NO_BUILD_COMMANDS.intersection(sys.argv[1:]):
        build_deps()
    setup(
        name="torch",
        version=VERSION,
        description="upstream stand-in (test double) of PyTorch's build interface",
        # the subpackages the recipe's import test names, and functorch beside torch (the 2.13.0 wheel)
        packages=["torch", "torch.nn", "torch.distributed", "torch._inductor", "functorch"],
        package_data={
            "torch": [
                f"_C{sysconfig.get_config_var('EXT_SUFFIX')}",
                "lib/*.so*",
                # macOS: conda-forge's 2.13.0 build.sh moves build/lib.*/torch/lib/* into $PREFIX/lib and
                # its osx tests find lib*.dylib there (pytorch-cpu-feedstock 74dd3d46)
                "lib/*.dylib*",
                # Windows: upstream's setup.py ships lib/*.dll and lib/*.lib (the 2.13.0 win_amd64 wheel)
                "lib/*.dll",
                "lib/*.lib",
                "bin/*",
                "include/**/*.h",
                "share/cmake/**/*.cmake",
                "version.py",
            ],
        },
        distclass=BinaryDistribution,
        zip_safe=False,
    )


if __name__ == "__main__":
    main()
