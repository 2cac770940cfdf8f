"""The driver's compiler cache (recipe/megabuild/compiler_cache.py) with the real ccache: where it lives, its
key, that a second BLAS's build compiles only what its BLAS changes, how a pass counts that, and that a
compile killed with SIGKILL leaves the cache usable."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from megabuild import compiler_cache
from megabuild.conda_env import CondaBuild
from megabuild.errors import MegabuildError

pytestmark = pytest.mark.skipif(
    shutil.which("ccache") is None, reason="needs ccache (run-tests.py installs it)"
)


def conda_build(tmp_path: Path, **extra: str) -> CondaBuild:
    env = {
        "PKG_NAME": "libtorch-split", "PKG_VERSION": "0", "PREFIX": str(tmp_path / "h_env"),
        "BUILD_PREFIX": str(tmp_path / "build_env"), "SRC_DIR": str(tmp_path / "work"),
        "RECIPE_DIR": str(tmp_path / "recipe"), "target_platform": "linux-64", **extra,
    }  # fmt: skip
    return CondaBuild.from_environ(env)


def real_version() -> str:
    first = subprocess.run(["ccache", "--version"], capture_output=True, text=True, check=True).stdout
    return first.split()[2]


def test_where_the_cache_lives_and_its_key(tmp_path: Path) -> None:
    version = real_version()
    path = {"PATH": os.environ["PATH"]}
    # conda-build: beside the work directory, which outlives its top-level builds
    cache = compiler_cache.locate(conda_build(tmp_path), path)
    assert cache is not None and cache.version == version
    assert cache.directory == tmp_path / "megabuild-compiler-cache" / f"ccache-{version}-linux-64-cpu"
    # a place the caller names (rattler-build's jobs must), keyed by the CUDA version too
    named = {**path, compiler_cache.LOCATION_VARIABLE: str(tmp_path / "job-cache")}
    cuda = conda_build(tmp_path, cuda_compiler_version="12.9")
    assert (
        compiler_cache.locate(cuda, named).directory
        == tmp_path / "job-cache" / f"ccache-{version}-linux-64-cuda12.9"
    )
    rattler = {**path, compiler_cache.RATTLER_BUILD_MARK: "/x/files", compiler_cache.LOCATION_VARIABLE: ""}
    with pytest.raises(MegabuildError, match=r"^MEGABUILD_COMPILER_CACHE is not set: rattler-build empties"):
        compiler_cache.locate(conda_build(tmp_path), rattler)
    with pytest.raises(MegabuildError, match=r"MEGABUILD_COMPILER_CACHE='cache' is not an absolute path"):
        compiler_cache.locate(conda_build(tmp_path), {**path, compiler_cache.LOCATION_VARIABLE: "cache"})
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    with pytest.raises(MegabuildError, match=r"^no ccache on PATH: add ccache to the build requirements"):
        compiler_cache.locate(conda_build(tmp_path), {"PATH": str(empty)})
    impostor = empty / "ccache"
    impostor.write_text("#!/bin/sh\necho 'sccache 0.16.0'\n")
    impostor.chmod(0o755)
    with pytest.raises(MegabuildError, match=r"said 'sccache 0\.16\.0', not 'ccache version X\.Y'"):
        compiler_cache.locate(conda_build(tmp_path), {"PATH": str(empty)})
    windows = conda_build(
        tmp_path, target_platform="win-64", LIBRARY_PREFIX=str(tmp_path / "h_env" / "Library")
    )
    assert compiler_cache.locate(windows, path) is None


# A CMake project shaped like PyTorch's BLAS switch (aten/src/ATen/CMakeLists.txt and
# cmake/Modules/FindMKL.cmake of 2.6.0): a header written into the SOURCE tree, included by both files, tested
# by one; MKL's flags on every command.
PROJECT = {
    "CMakeLists.txt": """cmake_minimum_required(VERSION 3.18)
project(blasdemo CXX)
if(BLAS STREQUAL "MKL")
  set(AT_MKL_ENABLED 1)
  add_compile_options(-DMKL_HAS_SBGEMM -DMKL_HAS_SHGEMM)
  include_directories(AFTER SYSTEM ${CMAKE_CURRENT_SOURCE_DIR}/mkl/include)
else()
  set(AT_MKL_ENABLED 0)
endif()
configure_file(Config.h.in ${CMAKE_CURRENT_SOURCE_DIR}/Config.h)
add_library(demo STATIC plain.cpp blas_user.cpp)
""",
    "Config.h.in": "#define AT_MKL_ENABLED() @AT_MKL_ENABLED@\n",
    "plain.cpp": '#include "Config.h"\nint plain(int x) { return 3 * x; }\n',
    "blas_user.cpp": '#include "Config.h"\n#if AT_MKL_ENABLED()\nint blas() { return 1; }\n#else\n'
    "int blas() { return 0; }\n#endif\n",
    "mkl/include/mkl.h": "",
}


def build_with(blas: str, source: Path, build_dir: Path, env: dict[str, str]) -> list[str]:
    """A fresh build directory at the same path (as the second BLAS's top-level build gets); the objects
    ninja ran, in its log's order."""
    shutil.rmtree(build_dir, ignore_errors=True)
    subprocess.run(
        ["cmake", "-S", str(source), "-B", str(build_dir), "-G", "Ninja", f"-DBLAS={blas}"],
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(["cmake", "--build", str(build_dir)], env=env, check=True, capture_output=True)
    log = (build_dir / ".ninja_log").read_text().splitlines()[1:]
    return [line.split("\t")[3] for line in log if line.split("\t")[3].endswith(".o")]


def test_the_second_blas_compiles_only_what_its_blas_changes(tmp_path: Path) -> None:
    source = tmp_path / "src"
    for name, text in PROJECT.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(text)
    cache = compiler_cache.locate(conda_build(tmp_path), {"PATH": os.environ["PATH"]})
    assert cache is not None
    env = {key: value for key, value in os.environ.items() if not key.startswith("CCACHE_")}
    env |= {name: value for name, value, _ in compiler_cache.settings(cache, cuda=False)}
    build_dir = tmp_path / "work" / "build"
    counted = {}
    for blas in ("MKL", "Generic"):
        env["CCACHE_STATSLOG"] = str(compiler_cache.start_pass(cache))
        objects = build_with(blas, source, build_dir, env)
        logged = compiler_cache.read_stats_log(cache.stats_log)
        sources = compiler_cache.compile_sources(build_dir, env)
        assert sorted(sources[o] for o in objects) == sorted(
            str(source / n) for n in ("plain.cpp", "blas_user.cpp")
        )
        counted[blas] = compiler_cache.served_from_cache(objects, logged, sources)
    # ninja reran both (every command line changed), ccache compiled only the file that tests the macro
    assert counted == {"MKL": [], "Generic": ["CMakeFiles/demo.dir/plain.cpp.o"]}


def test_stats_log_blocks_and_objects_ccache_never_saw() -> None:
    logged = [("/s/a.cpp", True), ("/s/a.cpp", False), ("/s/b.cpp", False)]
    sources = {"a1.o": "/s/a.cpp", "a2.o": "/s/a.cpp", "b.o": "/s/b.cpp", "asm.o": "/s/asm.S"}
    # a source compiled twice takes its outcomes in order; an object ccache did not log was compiled
    assert compiler_cache.served_from_cache(["a1.o", "a2.o", "b.o", "asm.o"], logged, sources) == ["a1.o"]


def cc1plus_of(group: int) -> bool:
    """Whether a compiler proper (cc1plus) runs in the process group ``group``."""
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        if name == "cc1plus" and int(fields[2]) == group:
            return True
    return False


def test_a_compile_killed_with_sigkill_leaves_the_cache_usable(tmp_path: Path) -> None:
    """A job killed mid-compile (a runner's timeout, an OOM kill): ccache's own writes are atomic, so the
    next run compiles, stores and then serves the object."""
    cache = compiler_cache.locate(conda_build(tmp_path), {"PATH": os.environ["PATH"]})
    assert cache is not None
    env = {key: value for key, value in os.environ.items() if not key.startswith("CCACHE_")}
    env |= {name: value for name, value, _ in compiler_cache.settings(cache, cuda=False)}
    # enough work (about a second of cc1plus) that the compiler is still running when the kill arrives
    functions = (
        f"double f{i}(double x) {{ for (int k = 0; k < 3; ++k) x = x * 1.{i} + k; return x; }}\n"
        for i in range(1500)
    )
    heavy = tmp_path / "heavy.cpp"
    heavy.write_text("".join(functions))
    command = ["ccache", "g++", "-O0", "-c", str(heavy), "-o", str(tmp_path / "heavy.o")]
    env["CCACHE_STATSLOG"] = str(compiler_cache.start_pass(cache))
    child = subprocess.Popen(command, env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    while not cc1plus_of(child.pid):
        assert child.poll() is None, "the compile ended before it could be killed: make it heavier"
        assert time.monotonic() < deadline, "no cc1plus appeared within 60 s"
        time.sleep(0.01)
    os.killpg(child.pid, signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    outcomes = []
    for _ in range(2):
        env["CCACHE_STATSLOG"] = str(compiler_cache.start_pass(cache))
        subprocess.run(command, env=env, check=True)
        outcomes += compiler_cache.read_stats_log(cache.stats_log)
    assert outcomes == [(str(heavy), False), (str(heavy), True)]
    assert (
        subprocess.run(["ccache", "--show-stats"], env=env, capture_output=True, check=False).returncode == 0
    )
