"""Retarget the Python-specific entries of PyTorch's CMakeCache.txt from one interpreter to another.

PyTorch's CMake build meets Python only through FindPython (``find_package(Python COMPONENTS Interpreter
OPTIONAL_COMPONENTS Development.Module NumPy)``), pybind11's CMake config when the system pybind11 is used,
and a few per-environment paths (docs/reference/megabuild.md, "Retargeting"). Changing only
``Python_EXECUTABLE`` is not enough: FindPython keeps its cached ``_Python_*`` results for the old version,
reports Development.Module missing, and PyTorch then FORCE-writes ``BUILD_PYTHON=OFF`` into the cache.

So the switch, entry by entry:

* set ``Python_EXECUTABLE`` and ``Python_NumPy_INCLUDE_DIR`` (the two hints setup.py passes) to the target's;
* drop every ``_Python*`` INTERNAL entry and ``FIND_PACKAGE_MESSAGE_DETAILS_Python*`` so FindPython detects
  the target afresh, and pybind11's derived ``PYTHON_IS_DEBUG``/``PYTHON_MODULE_DEBUG_POSTFIX``;
* set pybind11's ``PYTHON_MODULE_EXTENSION``/``PYBIND11_PYTHON_EXECUTABLE_LAST`` to the target's: pybind11
  only refreshes them when the executable *path* changes, and in conda-build it does not (every output's
  host prefix sits at the same ``$PREFIX``: ``$PREFIX/bin/python`` is 3.10 in one output, 3.13 in another);
* in every other entry whose value names the old interpreter (include, stdlib and site-packages dirs, SOABI,
  extension suffix, ``python3.X`` also inside ``libpython3.X``, ``cpython-3X``, ``cp3X``), substitute the
  target's spelling; bare ``3.X``/``3X`` only in entries whose key names Python (elsewhere they are CUDA or
  compiler versions).

The old interpreter's facts come from the cache itself (what CMake detected), the target's from running the
target interpreter. After the build, :func:`check_retarget_kept` checks that CMake detected the target.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath

from megabuild.cmake_cache import CacheChange, CMakeCache
from megabuild.errors import MegabuildError


class RetargetError(MegabuildError):
    """The cache or the target interpreter does not allow a clean switch."""


def python_linked_targets(target_platform: str) -> tuple[str, ...]:
    """The CMake targets of PyTorch 2.13.0 that compile against one Python: what a ``pytorch`` pass may
    rebuild. ``torch_python``; ``_C``, a ``Python_add_library(_C MODULE WITH_SOABI ...)`` target linking it
    since pytorch/pytorch#180243; and on non-Darwin platforms ``nnapi_backend``, which links ``torch_python``
    (built, not installed). Evidence: ../shared/docs/pytorch-build-facts.md, corrections 3; the 2.13.0
    wheel's ``_C`` (NEEDED libtorch_python.so, RUNPATH ``$ORIGIN:$ORIGIN/lib``, a CMake install RPATH)."""
    darwin = target_platform.startswith("osx-")
    return ("torch_python", "_C") if darwin else ("torch_python", "_C", "nnapi_backend")


# Asked from the target interpreter; the same values FindPython and pybind11 compute.
_PROBE = """
import json, sys, sysconfig
try:
    import numpy
    numpy_include = numpy.get_include()
except ImportError:
    numpy_include = None
paths = sysconfig.get_paths()
print(json.dumps({
    "executable": sys.executable,
    "version": list(sys.version_info[:3]),
    "soabi": sysconfig.get_config_var("SOABI"),
    "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
    "include_dir": paths["include"],
    "stdlib": paths["stdlib"],
    "platstdlib": paths["platstdlib"],
    "purelib": paths["purelib"],
    "platlib": paths["platlib"],
    "numpy_include": numpy_include,
    "platform": sysconfig.get_platform(),
    "cache_tag": sys.implementation.cache_tag,
}))
"""

# Entries pybind11's CMake config derives from the interpreter and recomputes when they are missing.
_PYBIND11_DERIVED = ("PYTHON_IS_DEBUG", "PYTHON_MODULE_DEBUG_POSTFIX")
# Removed by prefix: FindPython's own results (also FindPython3's, used by ONNX) and its found-message.
_DROPPED_PREFIXES = ("_Python", "FIND_PACKAGE_MESSAGE_DETAILS_Python")
# Options PyTorch FORCE-sets when FindPython loses a component: they must come out of a pass unchanged.
GUARDED_OPTIONS = ("BUILD_PYTHON", "USE_NUMPY", "BUILD_LAZY_CUDA_LINALG")


@dataclass(frozen=True)
class PythonFacts:
    """What the CMake build needs to know of one interpreter."""

    executable: str
    version: tuple[int, int, int]
    soabi: str  # cpython-312-x86_64-linux-gnu
    ext_suffix: str  # .cpython-312-x86_64-linux-gnu.so
    include_dir: str | None
    stdlib: str
    platstdlib: str
    purelib: str
    platlib: str
    numpy_include: str | None
    platform: str = ""  # sysconfig.get_platform(), e.g. linux-x86_64 (probe only)
    cache_tag: str = ""  # sys.implementation.cache_tag, e.g. cpython-312 (probe only)

    @property
    def short(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"

    @property
    def nodot(self) -> str:
        return f"{self.version[0]}{self.version[1]}"

    @property
    def setuptools_lib_dir(self) -> str:
        """setuptools' (>= 62.1) build/lib.<platform>-<cache tag> directory of this interpreter."""
        return f"lib.{self.platform}-{self.cache_tag or f'cpython-{self.nodot}'}"


def probe(executable: str | Path) -> PythonFacts:
    """Run ``executable`` and read its facts; a missing or broken interpreter is a one-line error."""
    try:
        result = subprocess.run(
            [str(executable), "-c", _PROBE], check=True, capture_output=True, text=True, timeout=120
        )
    except OSError as exc:
        raise RetargetError(
            f"cannot run the Python interpreter {executable} ({exc.strerror or exc}): add python to this "
            "output's host requirements"
        ) from None
    except subprocess.TimeoutExpired:
        raise RetargetError(f"Python interpreter {executable} did not answer within 120 s") from None
    except subprocess.CalledProcessError as exc:
        last = (exc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RetargetError(f"Python interpreter {executable} failed to report its paths: {last}") from None
    data = json.loads(result.stdout)
    data["version"] = tuple(data["version"])
    return PythonFacts(**data)


def facts_from_cache(cache: CMakeCache) -> PythonFacts:
    """The interpreter the cache was configured with, as FindPython recorded it."""
    where = cache.path or "CMakeCache.txt"
    executable = cache.get("Python_EXECUTABLE")
    properties = cache.get("_Python_INTERPRETER_PROPERTIES")
    missing = [
        key
        for key, value in (("Python_EXECUTABLE", executable), ("_Python_INTERPRETER_PROPERTIES", properties))
        if not value
    ]
    if missing or executable is None or properties is None:
        raise RetargetError(
            f"{where} lacks the Python entries {', '.join(missing)}: it was not configured by pass 1 with "
            "BUILD_PYTHON, or a retarget was interrupted; rebuild from pass 1 (PKG_NAME=libtorch-split)"
        )
    # id;major;minor;patch;arch;abi;soabi[;sosabi (CMake >= 3.26)];stdlib;stdarch;sitelib;sitearch
    fields = properties.split(";")
    if len(fields) < 11 or not all(part.isdigit() for part in fields[1:4]):
        raise RetargetError(f"{where}: _Python_INTERPRETER_PROPERTIES {properties!r} has an unknown layout")
    soabi = fields[6]
    stdlib, stdarch, sitelib, sitearch = fields[-4:]
    # Windows' SOABI is cp312-win_amd64 (FindPython takes it from the .pyd suffix, Support.cmake 4.1)
    module_suffix = ".pyd" if soabi.startswith("cp") else ".so"
    return PythonFacts(
        executable=executable,
        version=(int(fields[1]), int(fields[2]), int(fields[3])),
        soabi=soabi,
        ext_suffix=cache.get("PYTHON_MODULE_EXTENSION") or (f".{soabi}" if soabi else "") + module_suffix,
        include_dir=cache.get("_Python_INCLUDE_DIR"),
        stdlib=stdlib,
        platstdlib=stdarch,
        purelib=sitelib,
        platlib=sitearch,
        numpy_include=cache.get("Python_NumPy_INCLUDE_DIR") or cache.get("_Python_NumPy_INCLUDE_DIR"),
    )


def _spellings(old: PythonFacts, new: PythonFacts) -> list[tuple[str, str]]:
    """Old -> new strings, longest first so a path is replaced before the version inside it."""
    pairs = [
        (old.include_dir, new.include_dir),
        (old.numpy_include, new.numpy_include),
        (old.stdlib, new.stdlib),
        (old.platstdlib, new.platstdlib),
        (old.purelib, new.purelib),
        (old.platlib, new.platlib),
        (old.executable, new.executable),
        # an extension suffix without a SOABI (a cross-compiling FindPython records none) is the bare module
        # suffix ".so", which every library path ends with: replacing it turned MAGMA_LIBRARIES' libmagma.so
        # into libmagma.cpython-310-aarch64-linux-gnu.so (the linux-aarch64 CUDA rehearsals, measured)
        (old.ext_suffix if old.soabi else None, new.ext_suffix),
        (old.soabi, new.soabi),
    ]
    unique: dict[str, str] = {}
    for before, after in pairs:
        if before and after and before != after and before not in unique:
            unique[before] = after
    return sorted(unique.items(), key=lambda pair: len(pair[0]), reverse=True)


def _version_patterns(old: PythonFacts, new: PythonFacts) -> list[tuple[re.Pattern[str], str]]:
    """Version spellings that may sit inside any Python-specific value: python3.12, cpython-312, cp312."""
    return [
        (re.compile(rf"python{re.escape(old.short)}(?![\d])"), f"python{new.short}"),
        (re.compile(rf"(?<![\w])cpython-{old.nodot}(?![\d])"), f"cpython-{new.nodot}"),
        (re.compile(rf"(?<![\w])cp{old.nodot}(?![\d])"), f"cp{new.nodot}"),
    ]


def _bare_version_patterns(old: PythonFacts, new: PythonFacts) -> list[tuple[re.Pattern[str], str]]:
    """3.12 and 312 alone: only inside entries whose key says Python, where nothing else has versions."""
    return [
        (re.compile(rf"(?<![\d.]){re.escape(old.short)}(?![\d])"), new.short),
        (re.compile(rf"(?<![\d.]){old.nodot}(?![\d])"), new.nodot),
    ]


def names_old_python(value: str, old: PythonFacts) -> bool:
    # the SOABI only where CMake recorded one: FindPython leaves it empty when cross-compiling
    # (_Python_INTERPRETER_PROPERTIES "Python;3;10;13;64;;;abi3;...", measured with CMake 3.25.1 and
    # 4.1.3), and an empty token would match every value
    tokens = [f"python{old.short}", f"cpython-{old.nodot}", *([old.soabi] if old.soabi else [])]
    tokens += [path for path in (old.include_dir, old.purelib, old.stdlib) if path]
    return any(token in value for token in tokens)


def retarget(cache: CMakeCache, target: PythonFacts, old: PythonFacts | None = None) -> list[CacheChange]:
    """Edit a Linux or macOS ``cache`` in memory so the next configure uses ``target``; returns every change
    by key. A win-64 cache is edited entry by entry instead (``windows_python.retarget_windows``, which
    imports this module; the driver's pass picks between the two, so no import goes back).

    ``old``: the Python the cache names, when its FindPython entries are gone (an earlier edit was written
    but CMake has not re-detected yet); by default read from those entries."""
    old = old if old is not None else facts_from_cache(cache)
    needs_numpy = needs_numpy_of(cache, old, target)
    changes: list[CacheChange] = []

    def record(change: CacheChange | None) -> None:
        if change is not None:
            changes.append(change)

    # 1. the hints setup.py passes, and pybind11's entries that only refresh on a path change
    record(cache.set("Python_EXECUTABLE", target.executable))
    if needs_numpy and target.numpy_include is not None:
        record(
            cache.set("Python_NumPy_INCLUDE_DIR", target.numpy_include)
            if "Python_NumPy_INCLUDE_DIR" in cache
            else cache.set("Python_NumPy_INCLUDE_DIR", target.numpy_include, type="PATH")
        )
    if "PYTHON_MODULE_EXTENSION" in cache:
        record(cache.set("PYTHON_MODULE_EXTENSION", target.ext_suffix))
    if "PYBIND11_PYTHON_EXECUTABLE_LAST" in cache:
        record(cache.set("PYBIND11_PYTHON_EXECUTABLE_LAST", target.executable))
    handled = {"Python_EXECUTABLE", "Python_NumPy_INCLUDE_DIR", "PYTHON_MODULE_EXTENSION"}
    handled.add("PYBIND11_PYTHON_EXECUTABLE_LAST")

    # 2. FindPython's cached detection and pybind11's derived entries: detected again on the next configure
    for key in list(cache.entries):
        if key.startswith(_DROPPED_PREFIXES) or key in _PYBIND11_DERIVED:
            changes.extend(cache.remove(key))

    # 3. every other entry that names the old interpreter
    for key, value in _substituted(cache, old, target, skip=handled).items():
        record(cache.set(key, value))
    return changes


def needs_numpy_of(cache: CMakeCache, old: PythonFacts, target: PythonFacts) -> bool:
    """Whether the cache builds with NumPy; a target without numpy is then an error naming the fix."""
    needs_numpy = old.numpy_include is not None or is_on(cache.get("USE_NUMPY"))
    if needs_numpy and target.numpy_include is None:
        raise RetargetError(
            f"{target.executable} has no numpy but {cache.path or 'CMakeCache.txt'} builds with NumPy "
            "(USE_NUMPY): add numpy to the host requirements of pytorch"
        )
    return needs_numpy


def _substituted(cache: CMakeCache, old: PythonFacts, target: PythonFacts, skip: set[str]) -> dict[str, str]:
    """New values of the entries (other than ``skip``) that name the old interpreter."""
    spellings = _spellings(old, target)
    versions = _version_patterns(old, target) if old.version[:2] != target.version[:2] else []
    bare = _bare_version_patterns(old, target) if old.version[:2] != target.version[:2] else []
    edited: dict[str, str] = {}
    for key, entry in cache.entries.items():
        if key in skip:
            continue
        value = entry.value
        python_keyed = "PYTHON" in key.upper()
        if not (python_keyed or names_old_python(value, old) or any(b in value for b, _ in spellings)):
            continue
        for before, after in spellings:
            value = value.replace(before, after)
        for pattern, after in versions:
            value = pattern.sub(after, value)
        if python_keyed:
            for pattern, after in bare:
                value = pattern.sub(after, value)
        if value != entry.value:
            edited[key] = value
    return edited


def check_retarget_kept(cache: CMakeCache, target: PythonFacts, before: dict[str, str | None]) -> None:
    """After the build: CMake detected the target, kept our values, and left the guarded options alone."""
    where = cache.path or "CMakeCache.txt"
    found = facts_from_cache(cache)
    problems = []
    if found.version[:2] != target.version[:2]:
        problems.append(f"FindPython found Python {found.short}, expected {target.short}")
    if cache.get("Python_EXECUTABLE") != target.executable:
        problems.append(f"Python_EXECUTABLE is {cache.get('Python_EXECUTABLE')!r}")
    if (
        target.include_dir
        and found.include_dir is not None
        and not _same_path(found.include_dir, target.include_dir)
    ):
        problems.append(f"_Python_INCLUDE_DIR is {found.include_dir!r}, expected {target.include_dir!r}")
    problems += check_guarded_options(cache, before)
    if problems:
        raise RetargetError(
            f"{where} after the build: {'; '.join(problems)}: see docs/reference/megabuild.md"
        )


def _same_path(found: str, expected: str) -> bool:
    """CMake writes C:/x/include where Python reports C:\\x\\include; Windows paths ignore case."""
    if ":" in expected[:3] or "\\" in expected:
        return PureWindowsPath(found) == PureWindowsPath(expected)
    return found == expected


def check_guarded_options(cache: CMakeCache, before: dict[str, str | None]) -> list[str]:
    """BUILD_PYTHON, USE_NUMPY and BUILD_LAZY_CUDA_LINALG must keep the values pass 1 gave them."""
    return [
        f"{key} changed from {before.get(key)!r} to {cache.get(key)!r}"
        for key in GUARDED_OPTIONS
        if key in before and _normalise_bool(cache.get(key)) != _normalise_bool(before[key])
    ]


def guarded_values(cache: CMakeCache) -> dict[str, str | None]:
    return {key: cache.get(key) for key in GUARDED_OPTIONS}


_TRUE = {"1", "ON", "YES", "TRUE", "Y"}


def is_on(value: str | None) -> bool:
    return value is not None and value.upper() in _TRUE


def _normalise_bool(value: str | None) -> str | None:
    """CMake spellings of one truth value (setup.py passes True/False, options read ON/OFF)."""
    if value is None:
        return None
    upper = value.upper()
    if upper in _TRUE or (upper.isdigit() and upper != "0"):
        return "ON"
    if upper in {"0", "OFF", "NO", "FALSE", "N", "IGNORE", ""} or upper.endswith("-NOTFOUND"):
        return "OFF"
    return value
