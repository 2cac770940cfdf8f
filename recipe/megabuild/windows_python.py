"""The per-Python retarget of a win-64 CMake cache: every entry it changes known by name, no ``sed``.

conda-forge's 2.13.0 bld.bat (pytorch-cpu-feedstock 74dd3d46) retargets the cache with ``sed`` over the
whole file: ``[Pp]ython312``, ``v3.12.N``, ``Python;3;12;N;64``, ``cp312`` and ``numpy\\core\\include``.
Those five spellings say which entries a Windows configure writes with the Python in them; CMake's
FindPython (Modules/FindPython/Support.cmake of CMake 4.1) and pybind11 say which entries they are:

=====================================  ===================================================  ================
entry                                  what it holds on Windows                             here
=====================================  ===================================================  ================
``Python_EXECUTABLE``                  setup.py's ``-DPython_EXECUTABLE=sys.executable``     set (the target)
``Python_NumPy_INCLUDE_DIR``           setup.py's numpy.get_include(): backslashes,         set
                                       ``numpy\\core\\include`` (1.x) or ``numpy\\_core\\include``
``PYTHON_MODULE_EXTENSION``            pybind11: ``.cp312-win_amd64.pyd``                   set
``PYBIND11_PYTHON_EXECUTABLE_LAST``    pybind11: the executable it last probed             set
``_Python_INTERPRETER_PROPERTIES``     ``Python;3;12;8;64;<none>;cp312-win_amd64;abi3;...``  dropped
``_Python_LIBRARY_RELEASE``            ``<prefix>/libs/python312.lib`` (find_library)        dropped
``_Python_RUNTIME_LIBRARY_RELEASE``    ``<prefix>/python312.dll``                            dropped
``_Python_*`` (executable, include     FindPython's other results and signatures             dropped
dir, NumPy dir, signatures)
``FIND_PACKAGE_MESSAGE_DETAILS_Python`` ``[...][...python312.lib][...][v3.12.8()]``         dropped
``PYTHON_IS_DEBUG``,                   pybind11's values derived from the interpreter        dropped
``PYTHON_MODULE_DEBUG_POSTFIX``
=====================================  ===================================================  ================

Dropped entries are found again by the next configure (FindPython re-detects, pybind11 recomputes).
Unlike Linux, Windows paths carry no version (``Lib\\site-packages``, ``include``, ``libs``), so the
entries above are all that change. Any other entry that still spells the old Python (``python312``,
``cp312``, ``cpython-312``, ``3.12.N``, ``Python;3;12``, the old NumPy or module suffix) is an entry this
table does not know: with MEGABUILD_STRICT it stops the pass before the cache is touched; otherwise its
version spellings are substituted as on Linux and a warning names it.

FindPython's Development.Module needs ``python3XY.lib`` on Windows (extension modules link the import
library), so a target Python without ``%PREFIX%\\libs\\python3XY.lib`` is refused before any edit.
"""

from __future__ import annotations

import re
from pathlib import Path

from megabuild.cmake_cache import CacheChange, CMakeCache
from megabuild.log import warn
from megabuild.python_target import PythonFacts, RetargetError, facts_from_cache, needs_numpy_of

# Entries set to the target's value, by name, and where the value comes from.
SET_ENTRIES = {
    "Python_EXECUTABLE": "executable",
    "Python_NumPy_INCLUDE_DIR": "numpy_include",
    "PYTHON_MODULE_EXTENSION": "ext_suffix",
    "PYBIND11_PYTHON_EXECUTABLE_LAST": "executable",
}
# Entries removed so CMake detects them afresh: FindPython's (and FindPython3's, used by ONNX) results and
# found-message, pybind11's derived values.
DROPPED_PREFIXES = ("_Python", "FIND_PACKAGE_MESSAGE_DETAILS_Python")
DROPPED_ENTRIES = ("PYTHON_IS_DEBUG", "PYTHON_MODULE_DEBUG_POSTFIX")


def import_library(python_root: Path, target: PythonFacts) -> Path:
    """``%PREFIX%\\libs\\python3XY.lib``: conda-forge's Windows python ships it there, and the driver points
    FindPython there (Python_ROOT_DIR = %PREFIX%)."""
    return python_root / "libs" / f"python{target.nodot}.lib"


def old_spellings(old: PythonFacts, new: PythonFacts) -> re.Pattern[str]:
    """Everything that names the old Python in a Windows cache value (case-insensitive: python312.lib,
    Python312, cp312-win_amd64, cpython-312, v3.12.8, Python;3;12;8;64), and its NumPy include directory
    and module suffix where the new Python's differ (Lib\\site-packages has no version on Windows)."""
    pairs = ((old.numpy_include, new.numpy_include), (old.ext_suffix, new.ext_suffix))
    literal = [re.escape(before) for before, after in pairs if before and before != after]
    return re.compile(
        "|".join(
            [
                rf"python{old.nodot}(?!\d)",
                rf"(?<![\w])cp(?:ython-)?{old.nodot}(?!\d)",
                rf"(?<![\d.]){old.version[0]}\.{old.version[1]}\.\d+",
                rf"Python;{old.version[0]};{old.version[1]};",
                *literal,
            ]
        ),
        re.IGNORECASE,
    )


def retarget_windows(
    cache: CMakeCache,
    target: PythonFacts,
    python_root: Path,
    old: PythonFacts | None = None,
    *,
    strict: bool = False,
) -> list[CacheChange]:
    """Switch a win-64 cache to ``target``, entry by entry (see the module's table)."""
    where = cache.path or "CMakeCache.txt"
    old = old if old is not None else facts_from_cache(cache)
    library = import_library(python_root, target)
    if not library.is_file():
        raise RetargetError(
            f"{library} is missing: FindPython needs Python {target.short}'s import library on Windows; add "
            f"python {target.short} (conda-forge's ships libs\\python{target.nodot}.lib) to the host "
            "requirements of this output"
        )
    needs_numpy = needs_numpy_of(cache, old, target)
    known = set(SET_ENTRIES) | set(DROPPED_ENTRIES)
    shaped = old_spellings(old, target)
    unknown = [
        key
        for key, entry in cache.entries.items()
        if key not in known and not key.startswith(DROPPED_PREFIXES) and shaped.search(entry.value)
    ]
    if unknown and strict:
        first = unknown[0]
        raise RetargetError(
            f"{where}: {len(unknown)} cache entr{'y' if len(unknown) == 1 else 'ies'} spell Python "
            f"{old.short} but the Windows retarget does not know them, first {first}="
            f"{cache.get(first)!r}: name it in recipe/megabuild/windows_python.py (what it is and how it "
            "changes), or build without MEGABUILD_STRICT to substitute its version spellings"
        )
    changes: list[CacheChange] = []
    for key, attribute in SET_ENTRIES.items():
        value = getattr(target, attribute)
        if key == "Python_NumPy_INCLUDE_DIR" and not needs_numpy:
            continue
        if key in cache or key in ("Python_EXECUTABLE", "Python_NumPy_INCLUDE_DIR"):
            change = cache.set(key, value) if key in cache else cache.set(key, value, type="PATH")
            if change is not None:
                changes.append(change)
    for key in list(cache.entries):
        if key.startswith(DROPPED_PREFIXES) or key in DROPPED_ENTRIES:
            changes.extend(cache.remove(key))
    if unknown:
        warn(
            f"{where}: {len(unknown)} unknown cache entr{'y' if len(unknown) == 1 else 'ies'} spell Python "
            f"{old.short} ({', '.join(unknown[:3])}): their version spellings are substituted; name them in "
            "recipe/megabuild/windows_python.py (MEGABUILD_STRICT=1 makes this an error)"
        )
        for key in unknown:
            change = cache.set(key, substitute(cache.entries[key].value, old, target))
            if change is not None:
                changes.append(change)
    return changes


def substitute(value: str, old: PythonFacts, new: PythonFacts) -> str:
    """``value`` with every spelling of ``old`` (:func:`old_spellings`) turned into ``new``'s, the case of
    ``python``/``Python`` kept: what conda-forge's sed lines do, for one entry."""
    for before, after in ((old.numpy_include, new.numpy_include), (old.ext_suffix, new.ext_suffix)):
        if before and after:
            value = value.replace(before, after)
    major, minor = old.version[:2]
    full = ".".join(map(str, new.version))
    value = re.sub(rf"(python){old.nodot}(?!\d)", rf"\g<1>{new.nodot}", value, flags=re.IGNORECASE)
    value = re.sub(rf"(?<![\w])(cp(?:ython-)?){old.nodot}(?!\d)", rf"\g<1>{new.nodot}", value)
    value = re.sub(rf"(?<![\d.]){major}\.{minor}\.\d+", full, value)
    return re.sub(rf"Python;{major};{minor};\d+;", f"Python;{full.replace('.', ';')};", value)
