"""The upstream stand-in on its own: it must reproduce the PyTorch build behaviour the megabuild works
around, or the rehearsal would prove nothing. No driver here; the cache is edited by hand."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from feedstock_tools.proofs.rehearsal import ninja_log
from feedstock_tools.proofs.rehearsal.harness import DEFAULT_STANDIN
from megabuild.cmake_cache import CMakeCache
from megabuild.python_target import python_linked_targets

if TYPE_CHECKING:
    from conftest import HostPython

pytestmark = pytest.mark.rehearsal

PYTHONS = ("3.10", "3.11")


@pytest.fixture(scope="module")
def pythons(host_pythons: dict[str, HostPython]) -> tuple[Path, Path]:
    """The venv Pythons (tests/conftest.py) the stand-in is built with and retargeted to."""
    return host_pythons[PYTHONS[0]].python, host_pythons[PYTHONS[1]].python


def cache_of(build: Path) -> CMakeCache:
    return CMakeCache.load(build / "CMakeCache.txt")


def edit_cache(build: Path, drop_prefixes: tuple[str, ...], values: dict[str, str]) -> None:
    """Drop the entries whose key starts with one of ``drop_prefixes``, set ``values`` keeping each entry's
    type: chosen here by hand, as a user would, edited through the project's cache model."""
    cache = cache_of(build)
    for key in [key for key in cache.entries if key.startswith(drop_prefixes)]:
        cache.remove(key)
    for key, value in values.items():
        cache.set(key, value)
    cache.write()


def numpy_include(python: Path) -> str:
    return subprocess.run(
        [str(python), "-c", "import numpy; print(numpy.get_include())"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def setup_build(source: Path, python: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/tmp"),
        "BUILD_TEST": "0",
        "MAX_JOBS": "2",
        **env,
    }
    return subprocess.run(
        [str(python), "setup.py", "build"],
        cwd=source,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, pythons: tuple[Path, Path]) -> Path:
    """The stand-in configured and built once (CPU) by the first Python's setup.py."""
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("needs cmake and ninja")
    root = tmp_path_factory.mktemp("standin")
    source = root / "src"
    shutil.copytree(DEFAULT_STANDIN, source, ignore=shutil.ignore_patterns("build", "__pycache__"))
    run = setup_build(source, pythons[0], USE_CUDA="0")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return source


def test_setup_py_configures_once_and_builds_the_install_layout(
    built: Path, pythons: tuple[Path, Path]
) -> None:
    source = built
    tag = PYTHONS[0].replace(".", "")
    lib = next((source / "build").glob(f"lib.*-cpython-{tag}")) / "torch"
    for name in ("libc10.so", "libtorch_cpu.so", "libtorch.so", "libtorch_global_deps.so", "libshm.so"):
        assert (lib / "lib" / name).is_file(), name
    assert (lib / "share/cmake/Torch/TorchConfig.cmake").is_file()
    assert next(lib.glob(f"_C.cpython-{tag}*.so"))
    run = setup_build(source, pythons[0], USE_CUDA="0")
    assert "not re-running CMake" in run.stdout


def test_only_torch_python_sees_python_headers(built: Path) -> None:
    source = built
    include = cache_of(source / "build").get("_Python_INCLUDE_DIR")
    commands = subprocess.run(
        ["ninja", "-C", str(source / "build"), "-t", "commands"], check=True, capture_output=True, text=True
    ).stdout
    with_python = {
        ninja_log.target_of(line.split(" -o ", 1)[1].split()[0])
        for line in commands.splitlines()
        if include in line and " -c " in line and " -o " in line
    }
    # 2.13.0's Python-linked targets (the driver's list): torch_python, _C, nnapi_backend (not on Darwin)
    assert with_python == set(python_linked_targets("linux-64"))


def test_retargeting_the_cache_recompiles_only_the_python_linked_targets(
    built: Path, pythons: tuple[Path, Path]
) -> None:
    source = built
    build = source / "build"
    other = pythons[1]
    log_before = ninja_log.snapshot(build / ".ninja_log")
    edit_cache(
        build,
        ("_Python_", "FIND_PACKAGE_MESSAGE_DETAILS_Python"),
        {"Python_EXECUTABLE": str(other), "Python_NumPy_INCLUDE_DIR": numpy_include(other)},
    )
    run = setup_build(source, other, USE_CUDA="0")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    compiled = ninja_log.objects_between(log_before, ninja_log.snapshot(build / ".ninja_log"))
    assert set(ninja_log.targets_of(compiled)) == set(python_linked_targets("linux-64"))
    assert cache_of(build).get("BUILD_PYTHON") == "True"


def test_a_stale_findpython_cache_turns_build_python_off(
    built: Path, pythons: tuple[Path, Path], tmp_path: Path
) -> None:
    """Changing only Python_EXECUTABLE leaves _Python_INCLUDE_DIR of the old Python: Development.Module is
    then missing and BUILD_PYTHON is FORCE-set OFF, as upstream does (the trap the driver must avoid)."""
    source = built
    build = tmp_path / "build"
    subprocess.run(
        ["cmake", "-GNinja", "-S", str(source), "-B", str(build), f"-DCMAKE_INSTALL_PREFIX={tmp_path}/torch",
         f"-DPython_EXECUTABLE={pythons[0]}", "-DUSE_CUDA=OFF"],
        check=True, capture_output=True,
    )  # fmt: skip
    other = pythons[1]
    edit_cache(build, ("_Python_NumPy", "_Python_NUMPY"), {"Python_EXECUTABLE": str(other)})
    configure = subprocess.run(["cmake", str(build)], capture_output=True, text=True, check=True)
    assert "setting BUILD_PYTHON OFF" in " ".join(configure.stderr.split())  # CMake wraps messages
    assert cache_of(build).get("BUILD_PYTHON") == "OFF"


def test_environment_forwarding_never_overrides_the_cache(tmp_path: Path) -> None:
    if shutil.which("cmake") is None:
        pytest.skip("needs cmake")
    build = tmp_path / "build"
    env = {**os.environ, "USE_CUDNN": "OFF", "BUILD_FANCY_THING": "yes", "CMAKE_ARGS": "-DIGNORED=1"}
    base = ["cmake", "-GNinja", "-S", str(DEFAULT_STANDIN), "-B", str(build), "-DBUILD_PYTHON=OFF"]
    subprocess.run([*base, "-DUSE_CUDA=OFF"], env=env, check=True, capture_output=True)
    cache = cache_of(build)
    assert cache.get("USE_CUDNN") == "OFF"
    assert cache.get("BUILD_FANCY_THING") == "yes"
    assert cache.get("CMAKE_ARGS") == "-DIGNORED=1"  # forwarded as junk, never parsed (upstream behaviour)
    assert "IGNORED" not in cache
    subprocess.run(["cmake", str(build)], env={**env, "USE_CUDNN": "ON"}, check=True, capture_output=True)
    assert cache_of(build).get("USE_CUDNN") == "OFF"


def test_the_declared_compile_inputs_are_the_sources_that_read_them() -> None:
    """compile_inputs.json (the rehearsal's compile-work limit reads it) names exactly the sources whose
    preprocessed input a Python's headers, the BLAS macro or MAGMA's switch changes (the BLAS: any use of
    AT_MKL_ENABLED() but "AT_MKL_ENABLED() || AT_POCKETFFT_ENABLED()", which holds under every BLAS)."""
    declared = json.loads((DEFAULT_STANDIN / "compile_inputs.json").read_text())
    readers = {
        "python": re.compile(r"^#include <(Python|patchlevel)\.h>", re.M),
        "blas": re.compile(r"\bAT_MKL_ENABLED\(\)(?!\s*\|\|\s*AT_POCKETFFT_ENABLED\(\))"),
        "magma": re.compile(r"^#ifdef USE_MAGMA", re.M),
    }
    sources = [
        path
        for path in sorted(DEFAULT_STANDIN.rglob("*.c*"))
        if path.suffix in (".c", ".cpp") and "third_party" not in path.parts
    ]
    for kind, reader in readers.items():
        code = {p: re.sub(r"//.*", "", p.read_text()) for p in sources}  # what the compiler reads
        found = [str(p.relative_to(DEFAULT_STANDIN)) for p in sources if reader.search(code[p])]
        assert sorted(declared[kind]) == found, kind
