"""The typed per-Python retarget of a win-64 CMake cache (recipe/megabuild/windows_python.py), 3.10-3.14.

No MSVC configure runs here, so the cache below is written entry by entry from the sources that say what
a Windows configure of 2.13.0 writes; where an entry's exact text is inferred, its comment says so:

* which entries carry the Python: conda-forge/pytorch-cpu-feedstock 74dd3d46 recipe/bld.bat rewrites
  ``[Pp]ython312``, ``v3.12.N``, ``Python;3;12;N;64``, ``cp312`` and ``numpy\\core\\include`` (backslashes)
  over the whole cache after a real MSVC configure, so those spellings are in it;
* FindPython's entries: CMake 4.1 Modules/FindPython/Support.cmake (the ``cmake==4.1.2`` wheel's copy):
  ``_Python_INTERPRETER_PROPERTIES`` (line 2411: id;major;minor;patch;arch;abiflags;soabi;sosabi;stdlib;
  stdarch;sitelib;sitearch; ABIFLAGS is ``<none>`` on Windows before 3.14, lines 676-687; SOABI from the
  ``.cp312-win_amd64.pyd`` suffix, lines 636-645), ``_Python_LIBRARY_RELEASE`` (find_library of
  python3XY, lines 3185-3200: ``libs/python312.lib``), ``_Python_RUNTIME_LIBRARY_RELEASE`` (line 3400,
  ``python312.dll`` next to the libs directory: inferred from conda's layout), ``_Python_INCLUDE_DIR``,
  ``_Python_NumPy_INCLUDE_DIR`` and the signatures;
* setup.py's ``-DPython_EXECUTABLE=sys.executable`` and ``-DPython_NumPy_INCLUDE_DIR=numpy.get_include()``
  (pytorch-build-facts.md §3; Windows spells both with backslashes, as bld.bat's ``numpy\\core`` shows);
* pybind11's ``PYTHON_MODULE_EXTENSION`` (``.cp312-win_amd64.pyd``: bld.bat's ``cp312-win_amd64``),
  ``PYBIND11_PYTHON_EXECUTABLE_LAST``, ``PYTHON_IS_DEBUG``, ``PYTHON_MODULE_DEBUG_POSTFIX``;
* paths without a version (Windows' ``Lib\\site-packages``, ``include``, ``Library\\share\\cmake``): the
  conda-build layout (environ.py windows_vars, utils.py get_stdlib_dir).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from megabuild.cmake_cache import CMakeCache
from megabuild.python_target import PythonFacts, RetargetError, facts_from_cache, retarget
from megabuild.windows_python import old_spellings, retarget_windows

PREFIX = "C:\\bld\\pytorch_1732\\h_env"  # conda-build's host prefix: the same path for every output
VERSIONS = {10: 16, 11: 11, 12: 8, 13: 1, 14: 0}  # 3.X -> a patch release


def windows_cache(minor: int, numpy_dir: str = "_core") -> str:
    patch = VERSIONS[minor]
    posix = PREFIX.replace("\\", "/")
    sp = f"{PREFIX}\\Lib\\site-packages"
    abiflags = "" if minor >= 14 else "<none>"
    return f"""\
# This is the CMakeCache file.
########################
# EXTERNAL cache entries
########################

//Build Python binaries
BUILD_PYTHON:BOOL=True

//Use NumPy
USE_NUMPY:BOOL=True

//No help, variable specified on the command line.
Python_EXECUTABLE:UNINITIALIZED={PREFIX}\\python.exe

//No help, variable specified on the command line.
Python_NumPy_INCLUDE_DIR:UNINITIALIZED={sp}\\numpy\\{numpy_dir}\\include

//The directory containing a CMake configuration file for pybind11.
pybind11_DIR:PATH={posix}/Library/share/cmake/pybind11

CUDA_VERSION_STRING:STRING=12.8

TORCH_CUDA_ARCH_LIST:STRING=5.2;6.1;8.6;12.0+PTX

CMAKE_INSTALL_PREFIX:PATH=C:/bld/pytorch_1732/work/torch

########################
# INTERNAL cache entries
########################

//Details about finding Python
FIND_PACKAGE_MESSAGE_DETAILS_Python:INTERNAL=[{posix}/python.exe][{posix}/include][{posix}/libs/python3{minor}.lib][cfound components: Interpreter Development.Module NumPy ][v3.{minor}.{patch}()]
PYBIND11_PYTHON_EXECUTABLE_LAST:INTERNAL={PREFIX}\\python.exe
PYTHON_IS_DEBUG:INTERNAL=0
PYTHON_MODULE_DEBUG_POSTFIX:INTERNAL=
PYTHON_MODULE_EXTENSION:INTERNAL=.cp3{minor}-win_amd64.pyd
_Python:INTERNAL=Python
_Python_DEVELOPMENT_MODULE_SIGNATURE:INTERNAL=5d1a
_Python_EXECUTABLE:INTERNAL={posix}/python.exe
_Python_INCLUDE_DIR:INTERNAL={posix}/include
//Python Properties
_Python_INTERPRETER_PROPERTIES:INTERNAL=Python;3;{minor};{patch};64;{abiflags};cp3{minor}-win_amd64;abi3;{PREFIX}\\Lib;{PREFIX}\\Lib;{sp};{sp}
_Python_INTERPRETER_SIGNATURE:INTERNAL=9c2e
_Python_LIBRARY_RELEASE:INTERNAL={posix}/libs/python3{minor}.lib
_Python_NUMPY_SIGNATURE:INTERNAL=4e5f
_Python_NumPy_INCLUDE_DIR:INTERNAL={sp}\\numpy\\{numpy_dir}\\include
_Python_RUNTIME_LIBRARY_RELEASE:INTERNAL={posix}/python3{minor}.dll
"""  # noqa: E501


def windows_facts(minor: int, base: Path, with_library: bool = True) -> PythonFacts:
    """What probe() reports for conda-forge's python 3.<minor> on win-64, at ``PREFIX``; ``base`` stands
    for %PREFIX% on this machine (holding libs/python3XY.lib unless ``with_library`` is false)."""
    if with_library:
        (base / "libs").mkdir(parents=True, exist_ok=True)
        (base / "libs" / f"python3{minor}.lib").write_bytes(b"!<arch>\n")
    sp = f"{PREFIX}\\Lib\\site-packages"
    return PythonFacts(
        executable=f"{PREFIX}\\python.exe",
        version=(3, minor, VERSIONS[minor]),
        soabi=f"cp3{minor}-win_amd64",
        ext_suffix=f".cp3{minor}-win_amd64.pyd",
        include_dir=f"{PREFIX}\\include",
        stdlib=f"{PREFIX}\\Lib",
        platstdlib=f"{PREFIX}\\Lib",
        purelib=sp,
        platlib=sp,
        numpy_include=f"{sp}\\numpy\\_core\\include",
        platform="win-amd64",
        cache_tag=f"cpython-3{minor}",
    )


PAIRS = [(old, new) for old in VERSIONS for new in VERSIONS if old != new]


@pytest.mark.parametrize(("old", "new"), PAIRS, ids=[f"3.{a}-to-3.{b}" for a, b in PAIRS])
def test_retarget_between_every_pair_of_pythons(old: int, new: int, tmp_path: Path) -> None:
    cache = CMakeCache.parse(windows_cache(old))
    before = facts_from_cache(cache)
    assert before.version == (3, old, VERSIONS[old]) and before.ext_suffix == f".cp3{old}-win_amd64.pyd"
    target = windows_facts(new, tmp_path)
    changes = {c.key: c for c in retarget_windows(cache, target, tmp_path, strict=True)}
    assert cache.get("PYTHON_MODULE_EXTENSION") == f".cp3{new}-win_amd64.pyd"
    # the same path in every output: no change, and said so by the absence of a change
    assert cache.get("Python_EXECUTABLE") == f"{PREFIX}\\python.exe" and "Python_EXECUTABLE" not in changes
    for dropped in ("_Python_LIBRARY_RELEASE", "_Python_RUNTIME_LIBRARY_RELEASE", "PYTHON_IS_DEBUG"):
        assert dropped not in cache and changes[dropped].new is None
    assert "FIND_PACKAGE_MESSAGE_DETAILS_Python" not in cache
    # nothing names the old Python any more; nothing else changed
    assert not old_spellings(before, target).search(cache.render())
    untouched = ("pybind11_DIR", "CUDA_VERSION_STRING", "TORCH_CUDA_ARCH_LIST", "CMAKE_INSTALL_PREFIX")
    original = CMakeCache.parse(windows_cache(old))
    assert all(cache.get(key) == original.get(key) for key in untouched)
    assert set(changes) <= {"PYTHON_MODULE_EXTENSION", "Python_NumPy_INCLUDE_DIR"} | {
        key for key in original.entries if key.startswith(("_Python", "FIND_PACKAGE", "PYTHON_"))
    }


def test_numpy_1_include_dir_becomes_numpy_2s(tmp_path: Path) -> None:
    """bld.bat's last sed line: numpy\\core\\include (numpy 1.x) -> numpy\\_core\\include."""
    cache = CMakeCache.parse(windows_cache(12, numpy_dir="core"))
    retarget_windows(cache, windows_facts(13, tmp_path), tmp_path, strict=True)
    assert cache.get("Python_NumPy_INCLUDE_DIR") == f"{PREFIX}\\Lib\\site-packages\\numpy\\_core\\include"


def test_an_unknown_python_shaped_entry_stops_a_strict_retarget(tmp_path: Path) -> None:
    text = windows_cache(12).replace(
        "CUDA_VERSION_STRING", "ONNX_PY_LIB:FILEPATH=C:/x/libs/Python312.lib\n\nCUDA_VERSION_STRING"
    )
    cache = CMakeCache.parse(text)
    with pytest.raises(
        RetargetError,
        match=r"1 cache entry spell Python 3\.12 but the Windows retarget does not know them, first "
        r"ONNX_PY_LIB='C:/x/libs/Python312\.lib': name it in recipe/megabuild/windows_python\.py",
    ):
        retarget_windows(cache, windows_facts(13, tmp_path), tmp_path, strict=True)
    assert cache.render() == text  # refused before any edit


def test_without_strict_the_unknown_entry_is_substituted_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = "ONNX_PY_LIB:FILEPATH=C:/x/libs/Python312.lib\nPY_TAG:STRING=cp312;v3.12.8;Python;3;12;8;64\n"
    cache = CMakeCache.parse(windows_cache(12).replace("CUDA_VERSION_STRING", extra + "CUDA_VERSION_STRING"))
    retarget_windows(cache, windows_facts(14, tmp_path), tmp_path, strict=False)
    assert cache.get("ONNX_PY_LIB") == "C:/x/libs/Python314.lib"  # the case of "Python" kept, as sed does
    assert cache.get("PY_TAG") == "cp314;v3.14.0;Python;3;14;0;64"
    assert "2 unknown cache entries spell Python 3.12 (ONNX_PY_LIB, PY_TAG)" in capsys.readouterr().out


def test_a_target_without_its_import_library_is_refused(tmp_path: Path) -> None:
    text = windows_cache(12)
    cache = CMakeCache.parse(text)
    with pytest.raises(
        RetargetError,
        match=r"python313\.lib is missing: FindPython needs Python 3\.13's import library on Windows; add "
        r"python 3\.13 .* to the host requirements",
    ):
        target = windows_facts(13, tmp_path, with_library=False)
        retarget_windows(cache, target, tmp_path, strict=True)
    assert cache.render() == text


def test_the_linux_retarget_is_not_used_for_windows(tmp_path: Path) -> None:
    """The Linux retarget substitutes python3.12-style spellings: Windows' python312 would survive it."""
    cache = CMakeCache.parse(
        windows_cache(12).replace(
            "CUDA_VERSION_STRING", "X_LIB:FILEPATH=C:/libs/python312.lib\n\nCUDA_VERSION_STRING"
        )
    )
    retarget(cache, windows_facts(13, tmp_path))  # the Linux path, for contrast
    assert cache.get("X_LIB") == "C:/libs/python312.lib"
