"""What scikit-build-core does with a reused build directory, across Pythons
(docs/records/2026-11-26-skbuild-build-dir.md). Run by hand, not by CI; it needs PyPI (pip installs
scikit-build-core) and CPython 3.10-3.13:

    python benchmarks/skbuild_build_dir.py --work /tmp/skbuild-reuse 1.1.1 1.1.2

For each scikit-build-core VERSION it makes one venv per Python holding that version, and a directory holding
it alone (``pip install --no-deps --target``). On a two-target CMake project (a plain shared library ``core``
and a Python extension ``_ext`` linking it, ``build-dir = "build"``) it builds a wheel with 3.10, 3.11, 3.12
and 3.13 in turn on the same build directory, twice: with each venv's own scikit-build-core (``pip wheel
--no-build-isolation``, the way a per-Python environment runs it) and with the one copy on ``PYTHONPATH``
(``build_wheel`` called directly, the way the megabuild driver runs it). It prints what ninja ran each time
(``.ninja_log``, read by the driver's own reader), whether scikit-build-core said "clearing cache", and the
recorded ``skbuild_path``; with ``--dump`` also the variables CMake saw (every ``SKBUILD*``/``Python*``/
``CMAKE_INSTALL_PREFIX``/... variable) and scikit-build-core's ``CMakeInit.txt`` of the last build.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipe"))
from megabuild.atomic_file import write_text
from megabuild.ninja_log import ran_between, read_log

PYTHONS = ("3.10", "3.11", "3.12", "3.13")
LOGGING = "--config-settings=logging.level=INFO"  # "clearing cache" is logged at INFO
PROJECT = {
    "CMakeLists.txt": """cmake_minimum_required(VERSION 3.18)
project(${SKBUILD_PROJECT_NAME} VERSION ${SKBUILD_PROJECT_VERSION} LANGUAGES C)
find_package(Python COMPONENTS Interpreter Development.Module REQUIRED)
add_library(core SHARED src/core.c)
Python_add_library(_ext MODULE WITH_SOABI src/ext.c)
target_link_libraries(_ext PRIVATE core)
set_target_properties(_ext PROPERTIES INSTALL_RPATH "$ORIGIN/lib")
install(TARGETS core LIBRARY DESTINATION demo/lib)
install(TARGETS _ext LIBRARY DESTINATION demo)
get_cmake_property(_vars VARIABLES)
set(_dump "")
foreach(_v IN LISTS _vars)
  if(_v MATCHES "^(SKBUILD|Python_|Python3_|PYTHON_|CMAKE_(INSTALL_PREFIX|BUILD_TYPE|MAKE_PROGRAM))")
    string(APPEND _dump "${_v}=${${_v}}\\n")
  endif()
endforeach()
file(WRITE "${CMAKE_BINARY_DIR}/vars-dump.txt" "${_dump}")
""",
    "src/core.c": "int core_answer(void) { return 42; }\n",
    "src/ext.c": """#define PY_SSIZE_T_CLEAN
#include <Python.h>
int core_answer(void);
static PyObject *answer(PyObject *s, PyObject *a) { return PyLong_FromLong(core_answer()); }
static PyMethodDef m[] = {{"answer", answer, METH_NOARGS, ""}, {0}};
static struct PyModuleDef d = {PyModuleDef_HEAD_INIT, "_ext", 0, -1, m};
PyMODINIT_FUNC PyInit__ext(void) { return PyModule_Create(&d); }
""",
    "demo/__init__.py": "from ._ext import answer\n",
    "pyproject.toml": """[build-system]
requires = ["scikit-build-core"]
build-backend = "scikit_build_core.build"
[project]
name = "demo"
version = "1.2.3"
[tool.scikit-build]
build-dir = "build"
wheel.packages = ["demo"]
cmake.build-type = "Release"
""",
}


def interpreter(minor: str) -> str:
    root = subprocess.run(["pyenv", "root"], check=False, capture_output=True, text=True).stdout.strip()
    found = sorted(Path(root, "versions").glob(f"{minor}.*")) if root else []
    return (
        str(found[-1] / "bin" / "python")
        if found
        else shutil.which(f"python{minor}") or sys.exit(f"no CPython {minor}: install it with pyenv")
    )


def setup(work: Path, version: str) -> None:
    for minor in PYTHONS:
        venv = work / f"venv-{version}-{minor}"
        if not (venv / "bin" / "python").exists():
            subprocess.run([interpreter(minor), "-m", "venv", str(venv)], check=True)
            subprocess.run(
                [venv / "bin" / "python", "-m", "pip", "install", "-q", f"scikit-build-core=={version}"],
                check=True,
            )
    one = work / f"one-{version}"
    if not one.exists():
        python = work / f"venv-{version}-{PYTHONS[-1]}" / "bin" / "python"
        subprocess.run(
            [
                python,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--target",
                one,
                f"scikit-build-core=={version}",
            ],
            check=True,
        )


def run(work: Path, version: str, mode: str, dump: bool) -> None:
    project = work / f"project-{version}-{mode}"
    shutil.rmtree(project, ignore_errors=True)
    for name, text in PROJECT.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        write_text(project / name, text)
    for minor in PYTHONS:
        log = project / "build" / ".ninja_log"
        before = read_log(log) if log.exists() else {}
        python = str(work / f"venv-{version}-{minor}" / "bin" / "python")
        env = dict(os.environ)
        if mode == "per-python":
            command = [
                python,
                "-m",
                "pip",
                "wheel",
                "--no-build-isolation",
                "--no-deps",
                "-v",
                ".",
                "-w",
                "dist",
                LOGGING,
            ]
        else:
            command = [
                python,
                "-c",
                "from scikit_build_core.build import build_wheel as b; b('dist', {'logging.level': 'INFO'})",
            ]
            env["PYTHONPATH"] = str(work / f"one-{version}")
        out = subprocess.run(command, check=False, cwd=project, env=env, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"{' '.join(command[:4])} failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
        ran = sorted(entry.output for entry in ran_between(before, read_log(log)))
        info = json.loads((project / "build" / ".skbuild-info.json").read_text())
        cleared = "clearing cache" in out.stdout + out.stderr
        print(f"{version} {mode:10} {minor}: cleared={cleared!s:5} ran={', '.join(ran)}")
        print(f"{'':22} skbuild_path={info['skbuild_path']}")
    if dump:
        print((project / "build" / "vars-dump.txt").read_text())
        print((project / "build" / "CMakeInit.txt").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("versions", nargs="+", help="scikit-build-core versions, e.g. 1.1.1 1.1.2")
    parser.add_argument("--work", type=Path, required=True, help="venvs and projects go here")
    parser.add_argument("--dump", action="store_true", help="print the variables CMake saw and CMakeInit.txt")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    for version in args.versions:
        setup(args.work.resolve(), version)
        for mode in ("per-python", "one-copy"):
            run(args.work.resolve(), version, mode, args.dump)


if __name__ == "__main__":
    main()
