"""The build driver on win-64: conda-build's Windows environment, the settings, recipe/bld.bat and the
activation scripts, and the driver's standard-library use on a Windows Python.

What runs for real here: recipe/bld.bat and the .bat activation scripts under Wine's cmd (Debian's wine64,
8.0), with a python.exe test double compiled by MinGW-w64 into a real PE executable. Those tests are
skipped where Wine or MinGW are missing (CI installs neither: ``apt-get install wine64
g++-mingw-w64-x86-64-posix`` and run this file to include them; docs/reference/rehearsal.md).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from recipe_matrix import RECIPE_VERSION

from megabuild import activation, windows
from megabuild.cmake_cache import CMakeCache
from megabuild.conda_env import CondaBuild
from megabuild.environment import settings, upstream_environment
from megabuild.errors import MegabuildError
from megabuild.passes import _pass1_cache_problems

RECIPE = Path(__file__).resolve().parents[2] / "recipe"
WINE = shutil.which("wine") or shutil.which("wine64") or "/usr/lib/wine/wine64"
MINGW_CC = shutil.which("x86_64-w64-mingw32-gcc-posix")
needs_wine = pytest.mark.skipif(
    not Path(WINE).exists() or MINGW_CC is None,
    reason="needs Wine's cmd and MinGW-w64 (apt-get install wine64 g++-mingw-w64-x86-64-posix)",
)


def windows_environ(pkg_name: str = "libtorch-split", **extra: str) -> dict[str, str]:
    """What conda-build 26.x exports to bld.bat on win-64 (environ.py windows_vars, python_vars)."""
    env = {
        "PKG_NAME": pkg_name,
        "PKG_VERSION": RECIPE_VERSION,
        "PREFIX": "C:\\b\\h_env",
        "LIBRARY_PREFIX": "C:\\b\\h_env\\Library",
        "BUILD_PREFIX": "C:\\b\\_build_env",
        "SRC_DIR": "C:\\b\\work",
        "RECIPE_DIR": "C:\\b\\recipe",
        "PYTHON": "C:\\b\\h_env\\python.exe",
        "SP_DIR": "C:\\b\\h_env\\Lib\\site-packages",
        "CPU_COUNT": "16",
        "SHLIB_EXT": ".dll",
        "target_platform": "win-64",
        "build_platform": "win-64",
        "cuda_compiler_version": "12.8",
        "blas_impl": "mkl",
        "CMAKE_GENERATOR": "Visual Studio 17 2022",
        # recipe/meta.yaml's script_env: the configuration's GPU architectures (test input)
        "MEGABUILD_CUDA_ARCH_LIST": "5.0;8.6;12.0+PTX",
    }
    env.update(extra)
    return env


def test_a_windows_build_without_library_prefix_is_one_clear_error() -> None:
    env = windows_environ()
    del env["LIBRARY_PREFIX"]
    with pytest.raises(
        MegabuildError, match=r"^LIBRARY_PREFIX is not set for this win-64 build: conda-build"
    ):
        CondaBuild.from_environ(env)
    assert CondaBuild.from_environ(windows_environ()).library_prefix == Path("C:\\b\\h_env\\Library")


def test_windows_settings_point_at_the_library_prefix() -> None:
    env = windows_environ(CMAKE_ARGS='-DCMAKE_PROGRAM_PATH=C:\\b\\_build_env\\Library\\bin "-DX=C:\\a b\\c"')
    build = CondaBuild.from_environ(env)
    upstream, _ = upstream_environment(build, env)
    library = "C:\\b\\h_env\\Library"
    assert upstream["CMAKE_GENERATOR"] == "Ninja"  # not conda-build's Visual Studio generator
    assert upstream["INTEL_MKL_DIR"] == upstream["CUDNN_ROOT"] == upstream["MAGMA_HOME"] == library
    assert upstream["CMAKE_PREFIX_PATH"] == library and upstream["DISTUTILS_USE_SDK"] == "1"
    assert upstream["USE_NCCL"] == "0" and "NCCL_INCLUDE_DIR" not in upstream
    # what the recipe's patch 0001 makes setup.py read: shlex.split of the driver's CMAKE_ARGS
    words = shlex.split(upstream["CMAKE_ARGS"])
    assert "-DCMAKE_PROGRAM_PATH=C:\\b\\_build_env\\Library\\bin" in words  # backslashes kept
    assert "-DX=C:\\a b\\c" in words  # one word, as cmd quoted it
    assert "-DCUDAToolkit_ROOT_DIR=C:/b/h_env/Library" in words
    assert "-DCUDAToolkit_BIN_DIR=C:/b/_build_env/Library/bin" in words
    assert "-DUSE_MAGMA=ON" in words  # no lazy linalg library on Windows: MAGMA is part of torch_cuda


def test_cpu_windows_build_has_no_cuda_settings() -> None:
    env = windows_environ(cuda_compiler_version="None")
    chosen = {s.name: s.value for s in settings(CondaBuild.from_environ(env), env)}
    assert chosen["USE_CUDA"] == "OFF" and "USE_NCCL" not in chosen and "CUDA_TOOLKIT_ROOT_DIR" not in chosen
    assert "-DUSE_MAGMA=OFF" in shlex.split(chosen["CMAKE_ARGS"] or "")


def test_pass1_cache_expectations_on_windows() -> None:
    build = CondaBuild.from_environ(windows_environ())
    good = CMakeCache.parse("BUILD_PYTHON:BOOL=ON\nUSE_NUMPY:BOOL=ON\nUSE_CUDA:BOOL=ON\nUSE_MAGMA:BOOL=ON\n")
    assert _pass1_cache_problems(good, build) == []  # BUILD_LAZY_CUDA_LINALG forced off: no entry at all
    no_magma = CMakeCache.parse(good.render().replace("USE_MAGMA:BOOL=ON", "USE_MAGMA:BOOL=OFF"))
    assert _pass1_cache_problems(no_magma, build) == ["USE_MAGMA='OFF' (expected ON)"]


def test_the_linalg_output_does_not_exist_on_windows(tmp_path: Path) -> None:
    from megabuild import passes

    env = windows_environ("libtorch-cuda-linalg", SRC_DIR=str(tmp_path), magma_variant="magma")
    with pytest.raises(
        MegabuildError, match=r"libtorch-cuda-linalg does not exist on win-64: 2\.13\.0 builds"
    ):
        passes.pass_cuda_linalg(passes.PassContext(CondaBuild.from_environ(env), env, passes.Options(), None))  # type: ignore[arg-type]


def test_cmake_args_split_like_cmd_on_windows_and_like_sh_elsewhere() -> None:
    value = '-DA=C:\\x\\y "-DB=C:\\p q\\r" -DC=\\n'
    assert windows.split_cmake_args(value, True) == ["-DA=C:\\x\\y", "-DB=C:\\p q\\r", "-DC=\\n"]
    assert windows.split_cmake_args(value, False) == ["-DA=C:xy", "-DB=C:\\p q\\r", "-DC=n"]
    with pytest.raises(MegabuildError, match=r"CMAKE_ARGS cannot be split into words"):
        windows.split_cmake_args('"-DA=C:\\x', True)


def test_activation_scripts_for_windows_include_the_bat_ones() -> None:
    on_linux = activation.scripts("7.5;8.0;12.0+PTX")
    on_windows = activation.scripts("7.5;8.0;12.0+PTX", windows=True)
    assert set(on_windows) == set(on_linux) | {activation.ACTIVATE_BAT, activation.DEACTIVATE_BAT}
    assert 'set "CF_TORCH_CUDA_ARCH_LIST=7.5;8.0;12.0+PTX"' in on_windows[activation.ACTIVATE_BAT]
    with pytest.raises(MegabuildError, match=r"cannot go into the activation script"):
        activation.scripts("7.5%PATH%", windows=True)


# ---- Windows' standard library ---------------------------------------------------------------------------
# What a Windows CPython lacks that the driver could touch (Python docs, "Availability: Unix" each):
# fcntl, os.killpg, signal.SIGHUP, signal.pthread_sigmask, signal.sigpending. The child below removes
# them, and supplies an msvcrt TEST DOUBLE (locking only) to exercise the Windows lock path of staging.
WINDOWS_STDLIB_DOUBLE = """
import os, signal, subprocess, sys, types  # subprocess first: it takes an importable msvcrt for Windows
for name in ("SIGHUP", "pthread_sigmask", "sigpending"):
    delattr(signal, name)
del os.killpg
sys.modules["fcntl"] = None
calls = []
msvcrt = types.ModuleType("msvcrt")  # TEST DOUBLE of Windows' msvcrt.locking
msvcrt.LK_LOCK, msvcrt.LK_UNLCK = 1, 0
msvcrt.locking = lambda fd, mode, size: calls.append(mode)
sys.modules["msvcrt"] = msvcrt
sys.path.insert(0, sys.argv[1])
import megabuild.__main__, megabuild.passes
from megabuild import interrupt, staging
interrupt.install()
try:
    with interrupt.no_interruption():
        os.kill(os.getpid(), signal.SIGTERM)
        print("deferred", interrupt.pending())
except interrupt.Interrupted as exc:
    print("raised after the block", exc.signum == signal.SIGTERM)
interrupt._received.clear()  # the driver would have exited; this child goes on to stage
from pathlib import Path
trees_root = sys.argv[2]
trees = staging.UpstreamTrees(install=Path(trees_root) / "torch", shlib_ext=".dll")
staged = staging.stage_package("libtorch", trees, Path(trees_root) / "prefix")
print("staged", sorted(staged.files), "locks", calls)
"""


def test_the_driver_runs_on_windows_standard_library(tmp_path: Path) -> None:
    (tmp_path / "torch" / "lib").mkdir(parents=True)
    for name in ("c10.dll", "c10.lib"):
        (tmp_path / "torch" / "lib" / name).write_bytes(b"MZ")
    result = subprocess.run(
        [sys.executable, "-c", WINDOWS_STDLIB_DOUBLE, str(RECIPE), str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "deferred True\nraised after the block True\n" in result.stdout
    assert "staged ['Library/bin/c10.dll', 'Library/lib/c10.lib'] locks [1, 0]" in result.stdout


# ---- Wine's cmd and MinGW ----------------------------------------------------------------------------------
PYTHON_EXE_DOUBLE = r"""
/* TEST DOUBLE of %BUILD_PREFIX%\python.exe for bld.bat under Wine: records its command line and
   PYTHONPATH in %STANDIN_LOG%, exits with %STANDIN_EXIT%. */
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    FILE *log = fopen(getenv("STANDIN_LOG"), "a");
    for (int i = 1; i < argc; i++) fprintf(log, "%s%s", argv[i], i + 1 < argc ? " " : "\n");
    fprintf(log, "PYTHONPATH=%s\n", getenv("PYTHONPATH") ? getenv("PYTHONPATH") : "");
    fclose(log);
    return getenv("STANDIN_EXIT") ? atoi(getenv("STANDIN_EXIT")) : 0;
}
"""


def windows_path(path: Path) -> str:
    return "Z:" + str(path).replace("/", "\\")  # Wine's Z: drive is the Unix root


@pytest.fixture(scope="module")
def wine_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A Wine prefix (made once, ~25 s) and a build prefix whose python.exe is the MinGW-built double."""
    root = tmp_path_factory.mktemp("wine")
    build_prefix = root / "build_env"
    build_prefix.mkdir()
    source = root / "python_double.c"
    source.write_text(PYTHON_EXE_DOUBLE)
    assert MINGW_CC is not None
    subprocess.run([MINGW_CC, "-O1", "-o", str(build_prefix / "python.exe"), str(source)], check=True)
    assert (build_prefix / "python.exe").read_bytes()[:2] == b"MZ"  # a PE executable
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(root),
        "WINEPREFIX": os.environ.get("MEGABUILD_TEST_WINEPREFIX", str(root / "wineprefix")),
        "WINEDEBUG": "-all",
        "BUILD_PREFIX": windows_path(build_prefix),
        "RECIPE_DIR": windows_path(RECIPE),
        "STANDIN_LOG": windows_path(root / "calls.log"),
    }


def run_cmd(env: dict[str, str], script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [WINE, "cmd", "/c", script, *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )


@needs_wine
@pytest.mark.parametrize("status", [0, 1, 3])
def test_bld_bat_under_wine_cmd(wine_env: dict[str, str], status: int) -> None:
    log = Path(wine_env["STANDIN_LOG"][2:].replace("\\", "/"))
    log.unlink(missing_ok=True)
    env = {**wine_env, "STANDIN_EXIT": str(status), "PYTHONPATH": "C:\\site"}
    result = run_cmd(env, windows_path(RECIPE / "bld.bat"), "run", "--strict")
    # a failing driver stops the build with a non-zero status (bld.bat's `if errorlevel 1 exit 1`)
    assert result.returncode == (1 if status else 0), result.stdout + result.stderr
    calls = log.read_text().splitlines()
    assert calls == ["-m megabuild run --strict", f"PYTHONPATH={wine_env['RECIPE_DIR']};C:\\site"]


@needs_wine
def test_activation_bat_scripts_under_wine_cmd(wine_env: dict[str, str], tmp_path: Path) -> None:
    written = activation.write_activation_scripts(tmp_path, "7.5;8.0;12.0+PTX", windows=True)
    assert activation.ACTIVATE_BAT in written
    check = tmp_path / "check.bat"
    check.write_text(
        textwrap.dedent(f"""\
            @call "{windows_path(tmp_path / activation.ACTIVATE_BAT)}"
            @echo set=[%CF_TORCH_CUDA_ARCH_LIST%]
            @call "{windows_path(tmp_path / activation.DEACTIVATE_BAT)}"
            @echo unset=[%CF_TORCH_CUDA_ARCH_LIST%]
            @set "CF_TORCH_CUDA_ARCH_LIST=8.6"
            @call "{windows_path(tmp_path / activation.ACTIVATE_BAT)}"
            @echo user=[%CF_TORCH_CUDA_ARCH_LIST%]
            @call "{windows_path(tmp_path / activation.DEACTIVATE_BAT)}"
            @echo kept=[%CF_TORCH_CUDA_ARCH_LIST%]
            """)
    )
    result = run_cmd(wine_env, windows_path(check))
    lines = [line.strip() for line in result.stdout.splitlines() if "=[" in line]
    assert lines == ["set=[7.5;8.0;12.0+PTX]", "unset=[]", "user=[8.6]", "kept=[8.6]"], result.stderr


# ---- issue 30: the win-64 settings of conda-forge's 2.13.0 bld.bat -----------------------------------------


@pytest.mark.parametrize("cuda", ["None", "12.8"])
def test_windows_builds_default_to_four_jobs_as_conda_forge_on_the_same_runner(cuda: str) -> None:
    # CPU_COUNT 16: namespace-profile-16cpu-4x-on-windows-64; os.sysconf cannot read the memory there
    env = windows_environ(cuda_compiler_version=cuda)
    assert env["CPU_COUNT"] == "16"
    assert upstream_environment(CondaBuild.from_environ(env), env)[0]["MAX_JOBS"] == "4"
    few = windows_environ(cuda_compiler_version=cuda, CPU_COUNT="2")
    assert upstream_environment(CondaBuild.from_environ(few), few)[0]["MAX_JOBS"] == "2"
    mine = windows_environ(cuda_compiler_version=cuda, MAX_JOBS="12")
    assert upstream_environment(CondaBuild.from_environ(mine), mine)[0]["MAX_JOBS"] == "12"


def test_windows_protobuf_generator_include_flags_and_cupti() -> None:
    env = windows_environ(
        CMAKE_GENERATOR_PLATFORM="x64", CMAKE_GENERATOR_TOOLSET="v143", CFLAGS="/O2", CXXFLAGS="/O2 /EHsc"
    )
    upstream, _ = upstream_environment(CondaBuild.from_environ(env), env)
    assert upstream["USE_LITE_PROTO"] == "ON" and upstream["BUILD_CUSTOM_PROTOBUF"] == "OFF"
    assert "CMAKE_GENERATOR_PLATFORM" not in upstream and "CMAKE_GENERATOR_TOOLSET" not in upstream
    includes = "-IC:/b/h_env/Library/include -IC:/b/_build_env/Library/include"
    assert upstream["CFLAGS"] == f"/O2 {includes}"
    assert upstream["CXXFLAGS"] == f"/O2 /EHsc {includes}"
    assert upstream["CPPFLAGS"] == includes
    # kineto's CUPTI lookup reads the CMake variable, never an environment variable of that name
    assert "-DCUDA_TOOLKIT_ROOT_DIR=C:/b/h_env/Library" in shlex.split(upstream["CMAKE_ARGS"])
    assert "CUDA_TOOLKIT_ROOT_DIR" not in upstream
    assert upstream["USE_ITT"] == "OFF"
