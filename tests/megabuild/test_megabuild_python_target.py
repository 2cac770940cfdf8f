"""Retargeting PyTorch's CMakeCache.txt between Python versions.

Two kinds of evidence: caches written by real CMake with the real CPython 3.10-3.13 interpreters (through a
test double of PyTorch's Python detection: the same find_package call and the same BUILD_PYTHON/USE_NUMPY
trap), rebuilt after the switch; and cache text in the documented shape for 3.14, which is not installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from megabuild.cmake_cache import CMakeCache
from megabuild.ninja_log import PassWork, ran_between, read_log
from megabuild.python_target import (
    PythonFacts,
    RetargetError,
    check_retarget_kept,
    facts_from_cache,
    guarded_values,
    probe,
    retarget,
)

if TYPE_CHECKING:
    from conftest import HostPython

# Test double of PyTorch's Python detection (cmake/Dependencies.cmake + CMakeLists.txt): same find_package
# call, the same FORCE-writes when a component goes missing, BUILD_LAZY_CUDA_LINALG depending on
# BUILD_PYTHON, a Python-free core library fed by a write-if-changed Python code generator, and a
# torch_python that alone sees the Python and NumPy headers.
DETECTION_DOUBLE = """\
cmake_minimum_required(VERSION 3.18)
project(python_detection_double LANGUAGES C)
option(BUILD_PYTHON "Build Python binaries" ON)
option(USE_NUMPY "Use NumPy" ON)
if(BUILD_PYTHON)
  find_package(Python COMPONENTS Interpreter OPTIONAL_COMPONENTS Development.Module NumPy)
  if(NOT Python_Development.Module_FOUND)
    set(BUILD_PYTHON OFF CACHE BOOL "Build Python binaries" FORCE)
  endif()
  if(NOT Python_NumPy_FOUND)
    set(USE_NUMPY OFF CACHE BOOL "Use NumPy" FORCE)
  endif()
else()
  find_package(Python COMPONENTS Interpreter)
endif()
include(CMakeDependentOption)
cmake_dependent_option(BUILD_LAZY_CUDA_LINALG "lazy linalg" ON "BUILD_PYTHON" OFF)
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/generated.c
  COMMAND ${Python_EXECUTABLE} ${CMAKE_SOURCE_DIR}/gen.py ${CMAKE_BINARY_DIR}/generated.c
  DEPENDS ${CMAKE_SOURCE_DIR}/gen.py)
add_library(core SHARED core.c ${CMAKE_BINARY_DIR}/generated.c)
if(BUILD_PYTHON)
  add_library(torch_python SHARED torch_python.c)
  target_link_libraries(torch_python PRIVATE core Python::Module)
  if(USE_NUMPY)
    target_link_libraries(torch_python PRIVATE Python::NumPy)
    target_compile_definitions(torch_python PRIVATE USE_NUMPY)
  endif()
endif()
"""
GENERATOR = """\
import pathlib, sys
target = pathlib.Path(sys.argv[1])
text = "int generated(void) { return 7; }\\n"
if not target.exists() or target.read_text() != text:
    target.write_text(text)
"""
TORCH_PYTHON = """\
#include <Python.h>
#ifdef USE_NUMPY
#include <numpy/arrayobject.h>
#endif
int core(void);
int torch_python(void) { return core() + PY_MINOR_VERSION; }
"""


@pytest.fixture(scope="session")
def interpreters(host_pythons: dict[str, HostPython]) -> dict[str, Path]:
    """Real CPython 3.10-3.13 with numpy: the rehearsal's venv templates (tests/conftest.py)."""
    return {minor: host.python for minor, host in sorted(host_pythons.items())}


def write_double_source(tmp_path: Path) -> Path:
    """The detection double's source tree (CMakeLists.txt, its code generator and two targets)."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(DETECTION_DOUBLE)
    (source / "gen.py").write_text(GENERATOR)
    (source / "core.c").write_text("int generated(void);\nint core(void) { return generated(); }\n")
    (source / "torch_python.c").write_text(TORCH_PYTHON)
    return source


def configure_double(tmp_path: Path, python: Path) -> Path:
    """Configure the detection double the way setup.py configures PyTorch; returns the build dir."""
    source = write_double_source(tmp_path)
    facts = probe(python)
    build = tmp_path / "build"
    subprocess.run(
        [
            "cmake", "-S", str(source), "-B", str(build), "-G", "Ninja",
            f"-DPython_EXECUTABLE={facts.executable}",
            f"-DPython_NumPy_INCLUDE_DIR={facts.numpy_include}",
            "-DBUILD_PYTHON=True", "-DUSE_NUMPY=True",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True)
    return build


needs_toolchain = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("cmake", "ninja", "cc")),
    reason="needs cmake, ninja and a C compiler",
)


@needs_toolchain
def test_retarget_through_every_installed_python(interpreters: dict[str, Path], tmp_path: Path) -> None:
    versions = list(interpreters)
    build = configure_double(tmp_path, interpreters[versions[0]])
    cache_path = build / "CMakeCache.txt"
    pass1 = guarded_values(CMakeCache.load(cache_path))
    assert pass1 == {"BUILD_PYTHON": "True", "USE_NUMPY": "True", "BUILD_LAZY_CUDA_LINALG": "ON"}
    # every next version, then back to the first one
    for version in [*versions[1:], versions[0]]:
        target = probe(interpreters[version])
        cache = CMakeCache.load(cache_path)
        old = facts_from_cache(cache)
        changes = retarget(cache, target)
        keys = {change.key for change in changes}
        assert cache.not_kept(changes) == []
        assert {"Python_EXECUTABLE", "Python_NumPy_INCLUDE_DIR", "_Python_INCLUDE_DIR"} <= keys
        assert "_Python_INTERPRETER_PROPERTIES" in keys and "FIND_PACKAGE_MESSAGE_DETAILS_Python" in keys
        cache.write()
        before = read_log(build / ".ninja_log")
        subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True)
        work = PassWork.from_entries(ran_between(before, read_log(build / ".ninja_log")))
        after = CMakeCache.load(cache_path)
        check_retarget_kept(after, target, pass1)
        assert after.not_kept(changes) == []
        assert facts_from_cache(after).include_dir == target.include_dir != old.include_dir
        # only the Python bindings compiled; the core library was not touched
        assert set(work.objects_by_target()) == {"torch_python"}
        assert work.linked == ["libtorch_python.so"]


def cmake_version() -> tuple[int, ...]:
    first = subprocess.run(["cmake", "--version"], check=True, capture_output=True, text=True).stdout
    return tuple(int(part) for part in first.split()[2].split(".")[:2])


@needs_toolchain
def test_cross_compiling_retarget_under_the_cmake_on_path(
    interpreters: dict[str, Path], tmp_path: Path
) -> None:
    """A cross configure (CMAKE_SYSTEM_NAME given, as conda's cross CMAKE_ARGS do), Python found through
    Python_ROOT_DIR (the driver's), then the driver's retarget. Run here with CMake 3.25.1 (system) and
    4.1.3 (``pip install cmake==4.1.*`` first on PATH): both record no SOABI while cross-compiling and,
    with CMP0190 unset under 4.1 (the project's minimum is older), still ask the interpreter for the rest,
    so the dropped _Python_INTERPRETER_PROPERTIES comes back for the target's Python."""
    first, second = list(interpreters)[:2]
    facts = probe(interpreters[first])
    source = write_double_source(tmp_path)

    def root(python: Path) -> str:  # where include/python3.X is: the base installation of the venv
        return subprocess.run(
            [str(python), "-c", "import sys; print(sys.base_prefix)"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    env = dict(os.environ, Python_ROOT_DIR=root(interpreters[first]))
    build = tmp_path / "build"
    subprocess.run(
        [
            "cmake", "-S", str(source), "-B", str(build), "-G", "Ninja",
            "-DCMAKE_SYSTEM_NAME=Linux", "-DCMAKE_SYSTEM_PROCESSOR=aarch64",
            f"-DPython_EXECUTABLE={facts.executable}", f"-DPython_NumPy_INCLUDE_DIR={facts.numpy_include}",
            "-DBUILD_PYTHON=True", "-DUSE_NUMPY=True",
        ],
        check=True, capture_output=True, env=env,
    )  # fmt: skip
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True, env=env)
    cache = CMakeCache.load(build / "CMakeCache.txt")
    pass1 = guarded_values(cache)
    assert pass1["BUILD_PYTHON"] == "True"
    old = facts_from_cache(cache)
    assert old.soabi == ""  # cross-compiling: FindPython records no SOABI (3.25.1 and 4.1.3 alike)
    assert cmake_version() >= (3, 18)
    target = probe(interpreters[second])
    changes = retarget(cache, target)
    cache.write()
    env["Python_ROOT_DIR"] = root(interpreters[second])
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True, env=env)
    after = CMakeCache.load(build / "CMakeCache.txt")
    check_retarget_kept(after, target, pass1)
    assert after.not_kept(changes) == []
    assert facts_from_cache(after).version[:2] == target.version[:2]


@needs_toolchain
def test_changing_only_the_executable_springs_the_build_python_trap(
    interpreters: dict[str, Path], tmp_path: Path
) -> None:
    """The failure the retargeting exists for, shown on real CMake: BUILD_PYTHON flips silently."""
    versions = list(interpreters)
    build = configure_double(tmp_path, interpreters[versions[0]])
    cache = CMakeCache.load(build / "CMakeCache.txt")
    pass1 = guarded_values(cache)
    cache.set("Python_EXECUTABLE", str(probe(interpreters[versions[1]]).executable))
    cache.write()
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True)
    with pytest.raises(RetargetError, match=r"BUILD_PYTHON changed from 'True' to 'OFF'"):
        check_retarget_kept(
            CMakeCache.load(build / "CMakeCache.txt"), probe(interpreters[versions[1]]), pass1
        )


def cache_text_314(prefix: str = "/opt/conda") -> str:
    """A cache in the shape CMake >= 3.26 and pybind11 3 write (pytorch-build-facts.md §2) for 3.14."""
    sp = f"{prefix}/lib/python3.14/site-packages"
    return f"""\
# This is the CMakeCache file.
########################
# EXTERNAL cache entries
########################

//Build Python binaries
BUILD_PYTHON:BOOL=True

//Use NumPy
USE_NUMPY:BOOL=True

BUILD_LAZY_CUDA_LINALG:BOOL=ON

//No help, variable specified on the command line.
Python_EXECUTABLE:UNINITIALIZED={prefix}/bin/python

//No help, variable specified on the command line.
Python_NumPy_INCLUDE_DIR:UNINITIALIZED={sp}/numpy/_core/include

//Path to a file.
NVSHMEM_PY_DIR:STRING={sp}/nvidia/nvshmem

//Where pybind11 lives
pybind11_DIR:PATH={sp}/pybind11/share/cmake/pybind11

CUDA_VERSION_STRING:STRING=12.9

TORCH_CUDA_ARCH_LIST:STRING=5.2;6.1;8.6;12.0+PTX

########################
# INTERNAL cache entries
########################

//Details about finding Python
FIND_PACKAGE_MESSAGE_DETAILS_Python:INTERNAL=[{prefix}/bin/python][cfound components: Interpreter Development.Module NumPy ][v3.14.0()]
PYBIND11_PYTHON_EXECUTABLE_LAST:INTERNAL={prefix}/bin/python
PYTHON_IS_DEBUG:INTERNAL=0
PYTHON_MODULE_DEBUG_POSTFIX:INTERNAL=
PYTHON_MODULE_EXTENSION:INTERNAL=.cpython-314-x86_64-linux-gnu.so
_Python:INTERNAL=Python
_Python_DEVELOPMENT_MODULE_SIGNATURE:INTERNAL=0a1b
_Python_EXECUTABLE:INTERNAL={prefix}/bin/python
_Python_INCLUDE_DIR:INTERNAL={prefix}/include/python3.14
//Python Properties
_Python_INTERPRETER_PROPERTIES:INTERNAL=Python;3;14;0;64;;cpython-314-x86_64-linux-gnu;abi3;{prefix}/lib/python3.14;{prefix}/lib/python3.14;{sp};{sp}
_Python_INTERPRETER_SIGNATURE:INTERNAL=2c3d
_Python_NUMPY_SIGNATURE:INTERNAL=4e5f
_Python_NumPy_INCLUDE_DIR:INTERNAL={sp}/numpy/_core/include
pybind11_INCLUDE_DIRS:INTERNAL={sp}/pybind11/include;{prefix}/include/python3.14
"""  # noqa: E501


def conda_facts(minor: int, prefix: str = "/opt/conda", numpy: bool = True) -> PythonFacts:
    """What probe() reports for conda's python 3.<minor> at ``prefix`` (same path for every version)."""
    sp = f"{prefix}/lib/python3.{minor}/site-packages"
    return PythonFacts(
        executable=f"{prefix}/bin/python",
        version=(3, minor, 0),
        soabi=f"cpython-3{minor}-x86_64-linux-gnu",
        ext_suffix=f".cpython-3{minor}-x86_64-linux-gnu.so",
        include_dir=f"{prefix}/include/python3.{minor}",
        stdlib=f"{prefix}/lib/python3.{minor}",
        platstdlib=f"{prefix}/lib/python3.{minor}",
        purelib=sp,
        platlib=sp,
        numpy_include=f"{sp}/numpy/_core/include" if numpy else None,
    )


def test_314_cache_is_read() -> None:
    facts = facts_from_cache(CMakeCache.parse(cache_text_314()))
    assert facts.version == (3, 14, 0)
    assert facts.soabi == "cpython-314-x86_64-linux-gnu"
    assert facts.ext_suffix == ".cpython-314-x86_64-linux-gnu.so"
    assert facts.include_dir == "/opt/conda/include/python3.14"
    assert facts.purelib == "/opt/conda/lib/python3.14/site-packages"


def test_retarget_314_to_310_at_the_same_prefix_path() -> None:
    """conda-build's case: $PREFIX/bin/python is the same path, the version behind it is not."""
    cache = CMakeCache.parse(cache_text_314())
    changes = {change.key: change for change in retarget(cache, conda_facts(10))}
    sp10 = "/opt/conda/lib/python3.10/site-packages"
    assert cache.get("Python_EXECUTABLE") == "/opt/conda/bin/python"  # same path: no change
    assert "Python_EXECUTABLE" not in changes
    assert cache.get("Python_NumPy_INCLUDE_DIR") == f"{sp10}/numpy/_core/include"
    assert cache.get("PYTHON_MODULE_EXTENSION") == ".cpython-310-x86_64-linux-gnu.so"
    assert cache.get("NVSHMEM_PY_DIR") == f"{sp10}/nvidia/nvshmem"
    assert cache.get("pybind11_DIR") == f"{sp10}/pybind11/share/cmake/pybind11"
    assert "pybind11_INCLUDE_DIRS" in changes
    assert cache.get("pybind11_INCLUDE_DIRS") == f"{sp10}/pybind11/include;/opt/conda/include/python3.10"
    for removed in (
        "_Python_INCLUDE_DIR",
        "_Python",
        "FIND_PACKAGE_MESSAGE_DETAILS_Python",
        "PYTHON_IS_DEBUG",
    ):
        assert removed not in cache and changes[removed].new is None
    # nothing Python-free is touched, not even values that look like versions
    assert cache.get("CUDA_VERSION_STRING") == "12.9"
    assert cache.get("TORCH_CUDA_ARCH_LIST") == "5.2;6.1;8.6;12.0+PTX"
    assert cache.get("BUILD_PYTHON") == "True"
    assert "3.14" not in cache.render() and "314" not in cache.render()


def test_retarget_313_to_314_every_spelling() -> None:
    text = (
        cache_text_314().replace("3.14", "3.13").replace("314", "313").replace("Python;3;14;", "Python;3;13;")
    )
    cache = CMakeCache.parse(text)
    assert facts_from_cache(cache).version == (3, 13, 0)
    retarget(cache, conda_facts(14))
    rendered = cache.render()
    assert "3.13" not in rendered and "313" not in rendered
    assert cache.get("PYTHON_MODULE_EXTENSION") == ".cpython-314-x86_64-linux-gnu.so"


def test_missing_python_entries_are_an_error() -> None:
    cache = CMakeCache.parse("BUILD_PYTHON:BOOL=OFF\nPython_EXECUTABLE:FILEPATH=/usr/bin/python3\n")
    with pytest.raises(
        RetargetError, match=r"lacks the Python entries _Python_INTERPRETER_PROPERTIES: .*pass 1"
    ):
        retarget(cache, conda_facts(12))


def test_target_without_numpy_is_an_error() -> None:
    cache = CMakeCache.parse(cache_text_314())
    with pytest.raises(RetargetError, match=r"has no numpy .* add numpy to the host requirements of pytorch"):
        retarget(cache, conda_facts(12, numpy=False))
    assert cache.render() == CMakeCache.parse(cache_text_314()).render()  # refused before any edit


def test_entries_outside_the_known_keys() -> None:
    extra = (
        "SOME_LIBRARY:FILEPATH=/opt/conda/lib/libpython3.14.so\n"
        "SOME_NUMBER:STRING=3.14\n"
        "PYTHON_LIB_REL_PATH:STRING=lib/python3.14/site-packages\n"
        "PYTHON_VERSION_GUESS:STRING=3.14;314\n"
    )
    cache = CMakeCache.parse(
        cache_text_314().replace("CUDA_VERSION_STRING", extra + "CUDA_VERSION_STRING", 1)
    )
    changes = {change.key for change in retarget(cache, conda_facts(12))}
    assert cache.get("SOME_LIBRARY") == "/opt/conda/lib/libpython3.12.so"
    assert cache.get("PYTHON_LIB_REL_PATH") == "lib/python3.12/site-packages"
    assert cache.get("PYTHON_VERSION_GUESS") == "3.12;312"  # bare spellings: keys that name Python only
    assert cache.get("SOME_NUMBER") == "3.14" and "SOME_NUMBER" not in changes


def test_probe_of_a_missing_interpreter(tmp_path: Path) -> None:
    with pytest.raises(
        RetargetError,
        match=r"cannot run the Python interpreter .*bin/python \(No such file or directory\): add python to "
        r"this output's host",
    ):
        probe(tmp_path / "bin" / "python")


def test_probe_reports_the_running_interpreter() -> None:
    facts = probe(sys.executable)
    assert facts.version == tuple(sys.version_info[:3])
    assert facts.ext_suffix.startswith(f".cpython-{facts.nodot}")
