"""Run the megabuild driver's own pass logic on a real PyTorch build graph and count what each pass rebuilds.

The graph is Debian's pytorch 2.6.0+dfsg (CPU, USE_SYSTEM_LIBS=ON, Debian's -dev packages; about 1,370
ninja edges), the one real PyTorch source that configures on this kind of machine without downloading
anything but the source package. docs/records/2026-11-25-real-graph.md has the
figures and explains the method:

    python benchmarks/megabuild_real_graph.py --work /work/cache/debian/real-graph

1. the source: ``apt-get source pytorch`` from trixie through a private apt configuration under
   ``--debian-cache`` (the machine's own apt sources are not touched), unless it is already there;
2. pass 1 as the driver does it: ``setup.py build --cmake-only`` under CPython 3.10, the driver's
   ``ninja_graph.settle``, the build, and the driver's check that a reconfigure leaves nothing to rebuild;
3. one pass per later CPython (3.11, 3.12, 3.13 from pyenv): the driver's typed retarget of
   CMakeCache.txt, the driver's reconfigure, the code generators build.ninja depends on, a dry run
   (``ninja -n``: an upper bound), the build, and the driver's ``.ninja_log`` accounting (what ran), split
   into Python-linked targets (2.6.0's ``functorch`` among them), code generators and everything else.
   Report: per pass and the compile-work ratio against pass 1 + Python-linked objects x (N - 1);
4. ``--real-compile 3.12`` afterwards, in the same ``--work``: one more per-Python pass, to that CPython,
   whose Python-linked objects (and the code generators they depend on) the *real* compiler builds; its
   wall and CPU time go into the report. Its links are not run (the other libraries are the stand-in's);
5. ``--blas-switch`` instead of 2-4 (docs/records/2026-12-07-real-graph-blas.md): a merged CI job's two
   BLAS, as issue 44 builds them. BLAS=MKL (PyPI's ``mkl-devel``/``mkl``/``mkl-include`` wheels, unpacked
   under ``--debian-cache``, found by PyTorch's own FindMKL) in ``<work>/src``: setup.py's configure, the
   driver's settle, the code generators, the build; then that tree moves to ``<work>/src_moved_MKL`` (as
   conda-build renames ``work`` to ``work_moved_*``) and ``--second-blas`` (OpenBLAS, Debian's
   libopenblas-dev; or Generic) is configured and built from a fresh copy at the same path, so each tree
   has its own ``ATen/Config.h``, which configure writes into the source tree. Every compile goes through
   the real ccache with the driver's settings (megabuild/compiler_cache.py: CCACHE_DIR of the run's own,
   COMPILERCHECK=content, NODEPEND, MAXSIZE=0, one CCACHE_STATSLOG per build), and the driver's
   accounting (``read_stats_log``, ``compile_sources``, ``served_from_cache``) says which objects ccache
   served. Report: objects per configure, the second BLAS's misses (listed, by target) and hits, what it
   linked, the CPU seconds per hit and per miss, and the model of a merged job's wall time against two
   separate jobs (``--cores``, ``--link-seconds``, ``--test-seconds``: assumptions, not measured).
   ``--sample N`` builds only N seeded objects (no links), for a quick look.

Compiling all of PyTorch takes hours, so the builds run with a stand-in compiler: in a private mount
namespace the C and C++ compiler drivers are replaced by a script that writes an empty file at the ``-o``
output. Command lines, and so ninja's command hashes and decisions, are those of the real build; configure
and every code generator run for real. The stand-in writes no header dependencies, so after every later
pass the headers written during it are listed: none means no object of a real build would have been dirty
through a header either. Needs root or unprivileged user namespaces.

Under ``--blas-switch`` the stand-in differs in one way: whatever ccache runs with ``-E`` goes to the real
GCC, so what is real is configure, the code generators, the real preprocessed input of every object, the
command lines and ccache's whole decision (its direct-mode lookup, then the preprocessed-input hash of its
default mode, which leaves -D/-I/-isystem out): which objects the second BLAS compiles and which it takes
from the cache is exact. Faked: the compile itself (a miss "compiles" in milliseconds; a real one costs
about 22.9 s of CPU, the yardstick of step 4) and the links (nothing is linked: a link is counted, not
timed). The CPU seconds of a hit are real (ccache and the real preprocessor, timed per object by a launcher
around ccache), except that the object restored is a few bytes where a real one is hundreds of KB.

Writes a table to stdout and ``--json`` (default ``<work>/megabuild-real-graph.json``) atomically: a run
that fails writes no report. Missing tools, -dev packages or Pythons are one line naming what to install.
Standard library only.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "recipe"))

from real_graph_blas import (
    Assumptions,
    BlasBuild,
    build_figures,
    ccache_outcomes,
    classify_difference,
    model,
    python_objects_compiled,
    read_timing_log,
    switch_figures,
)

from megabuild import compiler_cache, ninja_graph
from megabuild.atomic_file import write_bytes, write_text
from megabuild.cmake_cache import CMakeCache
from megabuild.errors import MegabuildError
from megabuild.ninja_log import PassWork, ran_between, read_log, target_of_linked, target_of_object
from megabuild.python_target import (
    check_retarget_kept,
    guarded_values,
    probe,
    python_linked_targets,
    retarget,
)

SOURCE_PACKAGE = "pytorch"
SOURCE_DIR_NAME = "pytorch-2.6.0+dfsg"
APT_SOURCE_LINE = "deb-src http://deb.debian.org/debian trixie main"
# What configure needs on Debian 12 with the options below (found by configuring here until it passed).
DEV_PACKAGES = (
    "libprotobuf-dev", "protobuf-compiler", "libsleef-dev", "libpthreadpool-dev", "libcpuinfo-dev",
    "libfp16-dev", "libfxdiv-dev", "libpsimd-dev", "pybind11-dev", "libeigen3-dev", "libblas-dev",
    "liblapack-dev", "libonnx-dev", "libfmt-dev", "nlohmann-json3-dev", "libflatbuffers-dev",
    "flatbuffers-compiler", "libcpp-httplib-dev",
)  # fmt: skip
# Each tool and the Debian 12 package that provides it (`dpkg -S` here; flatc: `dpkg -c` of
# flatbuffers-compiler 2.0.8+dfsg1-2, which holds /usr/bin/flatc; mount left util-linux for its own package).
TOOLS = {
    "cmake": "cmake", "ninja": "ninja-build", "c++": "g++", "cc": "gcc", "flatc": "flatbuffers-compiler",
    "unshare": "util-linux", "mount": "mount", "apt-get": "apt", "dpkg-source": "dpkg-dev",
}  # fmt: skip
PYTHON_PACKAGES = ("numpy", "pyyaml", "typing_extensions", "setuptools")
# Debian's CPU configuration (debian/rules of 2.6.0+dfsg-7) with the features whose -dev packages
# Debian 12 lacks or has too old switched off; the build type and BUILD_TEST as the driver sets them.
BUILD_ENV = {
    "CMAKE_GENERATOR": "Ninja", "CMAKE_BUILD_TYPE": "Release", "BUILD_TEST": "0", "USE_NUMPY": "ON",
    "BLAS": "Generic", "GENERIC_BLAS_LIBRARIES": "blas", "USE_SYSTEM_LIBS": "ON",
    "PYTORCH_BUILD_VERSION": "2.6.0", "PYTORCH_BUILD_NUMBER": "0",
    "USE_CUDA": "0", "USE_ROCM": "0", "USE_DISTRIBUTED": "0", "USE_MKLDNN": "0", "USE_XNNPACK": "0",
    "USE_PYTORCH_QNNPACK": "0", "USE_NNPACK": "0", "USE_KINETO": "0", "USE_VULKAN": "0", "USE_FBGEMM": "0",
    "USE_MPI": "0", "USE_ITT": "0", "USE_GFLAGS": "0", "USE_GLOG": "0",
}  # fmt: skip
# The stand-in compiler driver (see the module docstring): an empty output file for every compile and link.
STANDIN = """#!/bin/sh
# stand-in compiler driver (benchmarks/megabuild_real_graph.py): an empty file at the -o output
while [ "$#" -gt 1 ]; do
  if [ "$1" = "-o" ]; then : > "$2"; exit 0; fi
  shift
done
exit 0
"""
# --blas-switch: the stand-in driver with the real preprocessor. ccache runs the compiler twice per miss
# (ccache 4.7.5 here, its calls logged through a stand-in: `<flags> -E -o <tmp>.ii <source>`, then the
# compile with `-c -MD -MT <obj> -MF <obj>.d -o <obj>`); anything with -E goes to the real driver, which the
# mount namespace keeps reachable at REAL, run with its own path as argv[0] (ORIGINAL): GCC finds cc1plus
# from argv[0] (measured: run from another path, "cannot execute 'cc1plus'"; with argv[0] set, its -E
# output equals the driver's own byte for byte), hence bash's exec -a. A compile writes a non-empty object
# and a dependency file naming no header: ccache 4.7.5 stores nothing, and logs
# compiler_produced_empty_output for an empty object, compiler_produced_no_output without the dependency
# file (both measured). A link writes its -o output, as STANDIN does.
STANDIN_PREPROCESSING = """#!/bin/bash
# stand-in compiler driver with the real preprocessor (benchmarks/megabuild_real_graph.py --blas-switch)
for arg in "$@"; do
  if [ "$arg" = "-E" ]; then exec -a ORIGINAL REAL "$@"; fi
done
output=""
depfile=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    -o) output="$2"; shift ;;
    -MF) depfile="$2"; shift ;;
  esac
  shift
done
if [ -n "$output" ]; then printf 'stand-in object\\n' > "$output"; fi
if [ -n "$depfile" ]; then printf '%s:\\n' "$output" > "$depfile"; fi
exit 0
"""
# The compiler launcher of --blas-switch: ccache as the driver runs it, with the CPU time of ccache and
# everything it ran (the real preprocessor, the stand-in) logged per object; the launcher is not part of
# the command line ccache hashes. One os.write per line with O_APPEND, so parallel compiles do not mix.
TIMING_LAUNCHER = """#!{python} -I
# ccache, timed (benchmarks/megabuild_real_graph.py --blas-switch)
import os, resource, subprocess, sys
arguments = sys.argv[1:]
status = subprocess.run(["ccache", *arguments], check=False).returncode
used = resource.getrusage(resource.RUSAGE_CHILDREN)
output = arguments[arguments.index("-o") + 1] if "-o" in arguments[:-1] else ""
log = os.open(os.environ["{variable}"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(log, f"{{output}}\\t{{used.ru_utime + used.ru_stime:.4f}}\\n".encode())
os.close(log)
sys.exit(status)
"""
TIMING_LOG_VARIABLE = "MEGABUILD_REAL_GRAPH_TIMING_LOG"
# MKL as PyPI ships it: the version the 2026-12-06 probe found with PyTorch's FindMKL
# (../shared/docs/blas-share-2.6.0.md); mkl-devel's wheel holds only CMake and pkg-config files, the
# libraries are mkl's (lib*.so.2), the headers mkl-include's.
MKL_VERSION = "2024.2.2"
MKL_WHEELS = ("mkl-devel", "mkl", "mkl-include")
# What each BLAS adds to BUILD_ENV (setup.py hands BLAS, INTEL_MKL_DIR, INTEL_OMP_DIR to CMake:
# tools/setup_helpers/cmake.py of 2.6.0, and CMAKE_* too); {mkl} is the unpacked MKL. On Linux FindMKL adds
# only INTEL_MKL_DIR's include/ and lib/intel64 (cmake/Modules/FindMKL.cmake:150-156), so the prefix path
# is what lets find_library see the wheels' lib/ (measured: without it, "MKL library not found").
BLAS_SETTINGS = {
    "MKL": {"BLAS": "MKL", "INTEL_MKL_DIR": "{mkl}", "INTEL_OMP_DIR": "{mkl}", "CMAKE_PREFIX_PATH": "{mkl}"},
    "OpenBLAS": {"BLAS": "OpenBLAS"},
    "Generic": {"BLAS": "Generic", "GENERIC_BLAS_LIBRARIES": "blas"},
}
# what caffe2/core/macros.h's BLAS_INFO says after each BLAS's configure (the probe's macros.h diff)
BLAS_INFO = {"MKL": "mkl", "OpenBLAS": "open", "Generic": "generic"}
BLAS_DEV_PACKAGES = {"OpenBLAS": ("libopenblas-dev",)}

# The driver's Python-linked targets (2.13.0) and 2.6.0's functorch, a MODULE linking torch_python
# (functorch/CMakeLists.txt of the 2.6.0 source; the 2.13.0 wheel has no functorch extension).
PYTHON_LINKED_2_6 = (*python_linked_targets("linux-64"), "functorch")
HEADER_SUFFIXES = (".h", ".hpp", ".hh", ".cuh", ".inc", ".def")


class Failed(Exception):
    """One line: what is wrong and what to do."""


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---- prerequisites ----------------------------------------------------------------------------------


def check_prerequisites(
    extra_tools: dict[str, str] | None = None, extra_packages: tuple[str, ...] = ()
) -> None:
    tools = {**TOOLS, **(extra_tools or {})}
    missing_tools = [tool for tool in tools if shutil.which(tool) is None]
    if missing_tools:
        packages = " ".join(dict.fromkeys(tools[tool] for tool in missing_tools))
        raise Failed(f"missing {', '.join(missing_tools)}: apt-get install {packages}")
    wanted = (*DEV_PACKAGES, *extra_packages)
    result = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\\n", *wanted],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    installed = {line.split()[0] for line in result.stdout.splitlines() if line.endswith(" installed")}
    missing = [package for package in wanted if package not in installed]
    if missing:
        raise Failed(f"missing -dev packages: apt-get install --no-install-recommends {' '.join(missing)}")


def pyenv_python(version: str) -> Path:
    root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=False).stdout.strip()
    found = sorted(glob.glob(f"{root or os.path.expanduser('~/.pyenv')}/versions/{version}.*/bin/python"))
    if not found:
        raise Failed(f"no CPython {version} under $(pyenv root)/versions: pyenv install {version}")
    return Path(found[-1])


def build_python(work: Path, version: str) -> Path:
    """A venv of the pyenv interpreter with what PyTorch's configure and code generators import."""
    venv = work / "venvs" / f"py{version}"
    python = venv / "bin" / "python"
    check = [str(python), "-c", "import numpy, yaml, typing_extensions, setuptools"]
    if python.exists() and subprocess.run(check, capture_output=True, check=False).returncode == 0:
        return python
    say(f"creating {venv} ({', '.join(PYTHON_PACKAGES)})")
    subprocess.run([str(pyenv_python(version)), "-m", "venv", "--clear", str(venv)], check=True)
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", *PYTHON_PACKAGES],
        capture_output=True,
        text=True,
        check=False,
    )
    if installed.returncode != 0:
        last = (installed.stderr.strip().splitlines() or ["no output"])[-1]
        raise Failed(f"pip could not install {' '.join(PYTHON_PACKAGES)} for Python {version}: {last}")
    return python


# ---- the source -------------------------------------------------------------------------------------


def debian_source(cache: Path) -> Path:
    """Debian's unpacked pytorch 2.6.0+dfsg source, fetched with a private apt configuration if absent."""
    source = cache / SOURCE_DIR_NAME
    if (source / "debian" / "rules").exists():
        return source
    apt = cache / "apt"
    for directory in (apt / "lists" / "partial", apt / "cache" / "archives" / "partial", apt / "etc"):
        directory.mkdir(parents=True, exist_ok=True)
    write_text(apt / "etc" / "sources.list", APT_SOURCE_LINE + "\n")
    options = [
        "-o", f"Dir::Etc::SourceList={apt / 'etc' / 'sources.list'}", "-o", "Dir::Etc::SourceParts=/dev/null",
        "-o", f"Dir::State::Lists={apt / 'lists'}", "-o", f"Dir::Cache={apt / 'cache'}",
    ]  # fmt: skip
    say(f"fetching Debian's {SOURCE_PACKAGE} source into {cache} ({APT_SOURCE_LINE})")
    for what, command in (
        ("apt-get update", ["apt-get", *options, "update"]),
        ("apt-get source", ["apt-get", *options, "source", "--download-only", SOURCE_PACKAGE]),
    ):
        result = subprocess.run(command, cwd=cache, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise Failed(
                f"{what} failed ({last}): deb.debian.org must be reachable, or unpack the source in {source}"
            )
    dsc = sorted(cache.glob(f"{SOURCE_PACKAGE}_2.6.0+dfsg-*.dsc"))
    if not dsc:
        raise Failed(f"apt-get source left no {SOURCE_PACKAGE}_2.6.0+dfsg-*.dsc in {cache}: trixie moved on")
    subprocess.run(
        ["dpkg-source", "-x", str(dsc[-1]), str(source)], cwd=cache, check=True, capture_output=True
    )
    return source


def fresh_tree(source: Path, work: Path) -> Path:
    tree = work / "src"
    if tree.exists():
        shutil.rmtree(tree)
    say(f"copying {source} to {tree}")
    shutil.copytree(source, tree, symlinks=True)
    # debian/rules, override_dh_auto_configure: the flatbuffers header is generated, not shipped
    subprocess.run(
        ["flatc", "--cpp", "--gen-mutable", "--scoped-enums", "mobile_bytecode.fbs"],
        cwd=tree / "torch" / "csrc" / "jit" / "serialization", check=True,
    )  # fmt: skip
    return tree


# ---- builds -----------------------------------------------------------------------------------------


@dataclass
class StandIn:
    """Runs commands with the compiler drivers replaced by STANDIN, in a private mount namespace."""

    script: Path
    drivers: list[Path]  # the real C and C++ drivers (symlinks resolved): what gets covered

    @classmethod
    def create(cls, work: Path) -> StandIn:
        script = work / "bin" / "standin-compiler"
        script.parent.mkdir(parents=True, exist_ok=True)
        write_text(script, STANDIN, mode=0o755)
        drivers = sorted({Path(shutil.which(name) or name).resolve() for name in ("c++", "cc")})
        return cls(script, drivers)

    def binds(self) -> list[str]:
        return [f"mount --bind {shlex.quote(str(self.script))} {shlex.quote(str(d))}" for d in self.drivers]

    def run(self, command: list[str], cwd: Path, env: dict[str, str], log: Path) -> None:
        binds = self.binds()
        unshare = ["unshare", "--mount", "--propagation", "private"]
        if os.geteuid() != 0:
            unshare.insert(1, "--map-root-user")
        inner = " && ".join([*binds, 'exec "$@"'])
        run_logged([*unshare, "sh", "-c", inner, "standin", *command], cwd, env, log)


@dataclass
class PreprocessingStandIn(StandIn):
    """STANDIN_PREPROCESSING over each compiler driver: the real driver stays reachable, bound to a path
    of its own in the same namespace, for everything run with -E."""

    real: dict[Path, Path] = field(default_factory=dict)  # driver -> where it stays reachable
    scripts: dict[Path, Path] = field(default_factory=dict)  # driver -> its stand-in

    @classmethod
    def create(cls, work: Path) -> PreprocessingStandIn:
        bin_dir = work / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        drivers = sorted({Path(shutil.which(name) or name).resolve() for name in ("c++", "cc")})
        real, scripts = {}, {}
        for driver in drivers:
            real[driver] = bin_dir / f"real-{driver.name}"
            write_text(real[driver], "")  # a mount point
            scripts[driver] = bin_dir / f"standin-{driver.name}"
            text = STANDIN_PREPROCESSING.replace("ORIGINAL", shlex.quote(str(driver)))
            text = text.replace("REAL", shlex.quote(str(real[driver])))
            write_text(scripts[driver], text, mode=0o755)
        return cls(scripts[drivers[0]], drivers, real, scripts)

    def binds(self) -> list[str]:
        quoted = {d: (shlex.quote(str(d)), shlex.quote(str(self.real[d]))) for d in self.drivers}
        keep = [f"mount --bind {driver} {real}" for driver, real in quoted.values()]
        cover = [f"mount --bind {shlex.quote(str(self.scripts[d]))} {quoted[d][0]}" for d in self.drivers]
        return keep + cover


def headers_written_since(tree: Path, since_ns: int) -> list[str]:
    """Headers (outside the install tree) written after ``since_ns``: the stand-in records no header
    dependencies, so an object including one of these would be rebuilt by a real build but not here."""
    installed = tree / "torch" / "include"
    return sorted(
        str(path.relative_to(tree))
        for path in tree.rglob("*")
        if path.suffix in HEADER_SUFFIXES
        and installed not in path.parents
        and path.is_file()
        and path.stat().st_mtime_ns > since_ns
    )


def run_logged(command: list[str], cwd: Path, env: dict[str, str], log: Path) -> None:
    with log.open("a") as handle:
        handle.write(f"$ {' '.join(command)}\n")
        handle.flush()
        result = subprocess.run(
            command, cwd=cwd, env=env, stdout=handle, stderr=subprocess.STDOUT, check=False
        )
    if result.returncode != 0:
        raise Failed(f"`{' '.join(command[:6])}` failed (status {result.returncode}): see {log}")


# ---- measuring a pass -------------------------------------------------------------------------------


@dataclass
class PassResult:
    name: str
    python: str
    would_run: list[str] = field(default_factory=list)  # dry run after the reconfigure
    objects: dict[str, int] = field(default_factory=dict)  # by kind: python, other
    linked: dict[str, list[str]] = field(default_factory=dict)  # by kind
    generators: int = 0  # code generator / custom command edges that ran
    cache_changes: int = 0
    reconfigures: int = 0
    rewritten_by_reconfigure: list[str] = field(default_factory=list)
    stale_after_pass1: list[str] = field(default_factory=list)
    headers_written: list[str] = field(default_factory=list)  # see headers_written_since
    resumed: bool = False  # pass 1 finished the build an interrupted run left (--resume)
    seconds: float = 0.0

    @property
    def non_python_edges(self) -> int:
        return self.objects.get("other", 0) + len(self.linked.get("other", []))

    @property
    def python_edges(self) -> int:
        return self.objects.get("python", 0) + len(self.linked.get("python", []))


def classify(work: PassWork, python_targets: set[str]) -> tuple[dict[str, int], dict[str, list[str]]]:
    objects = {"python": 0, "other": 0}
    for output in work.objects:
        objects["python" if target_of_object(output) in python_targets else "other"] += 1
    linked: dict[str, list[str]] = {"python": [], "other": []}
    for output in work.linked:
        linked["python" if target_of_linked(output) in python_targets else "other"].append(output)
    return objects, linked


@dataclass
class RealBuild:
    """The work tree of Debian's source and how its passes run."""

    tree: Path
    env: dict[str, str]
    standin: StandIn
    log: Path
    jobs: str

    @classmethod
    def in_work(cls, tree: Path, work: Path, jobs: str) -> RealBuild:
        """The build of ``tree`` with the command's environment, stand-in and log under ``work``."""
        env = dict(os.environ, **BUILD_ENV, MAX_JOBS=jobs)
        return cls(tree, env, StandIn.create(work), work / "build.log", jobs)

    @property
    def build_dir(self) -> Path:
        return self.tree / "build"


def build_pass(real: RealBuild) -> tuple[PassWork, list[str]]:
    """The build step of a pass (what `setup.py build` runs, `cmake --build`): first, with the real tools,
    what ninja does before it plans the build (the reconfigure a cache edit triggers and the code
    generators build.ninja depends on), then a dry run (`ninja -n` plans nothing while build.ninja is
    stale), then the build. Returns what ran and what the dry run listed."""
    before = read_log(real.build_dir / ".ninja_log")
    run_logged(["ninja", "-C", str(real.build_dir), "build.ninja"], real.tree, real.env, real.log)
    would_run = ninja_graph.would_run(real.build_dir, real.env)
    # the default targets: setup.py's `--target install` also installs, and CMake's install rewrites the
    # RPATH of every installed ELF file, which the stand-in's empty files are not (it compiles nothing)
    real.standin.run(
        ["cmake", "--build", str(real.build_dir), "-j", real.jobs], real.tree, real.env, real.log
    )
    return PassWork.from_entries(ran_between(before, read_log(real.build_dir / ".ninja_log"))), would_run


def pass_one(real: RealBuild, python: Path, resume: bool) -> PassResult:
    started = time.monotonic()
    short = probe(python).short
    if resume:
        say(f"pass 1: resuming the build of {real.tree} (configured and settled by an earlier run)")
        settled = ninja_graph.Settled(reconfigures=0, rewritten=[])
    else:
        say(f"pass 1: configure (setup.py build --cmake-only, CPython {short})")
        run_logged([str(python), "setup.py", "build", "--cmake-only"], real.tree, real.env, real.log)
        say("pass 1: the driver's settle (reconfigure until the command lines stop changing)")
        settled = ninja_graph.settle(real.build_dir, real.env)
    say(f"  {settled.reconfigures} reconfigure(s); rewritten: {', '.join(settled.rewritten) or 'nothing'}")
    edges = len(ninja_graph.commands(real.build_dir, real.env))
    say(f"pass 1: build ({edges} edges, stand-in compiler)")
    work, _ = build_pass(real)
    say("pass 1: the driver's check (a reconfigure must leave nothing to rebuild)")
    stale = ninja_graph.rebuilt_after_reconfigure(
        real.build_dir,
        real.env,
        lambda: real.standin.run(
            ["cmake", "--build", str(real.build_dir), "-j", real.jobs], real.tree, real.env, real.log
        ),
    )
    result = PassResult("1 libtorch-split", short, reconfigures=settled.reconfigures, resumed=resume)
    result.rewritten_by_reconfigure = settled.rewritten
    result.stale_after_pass1 = stale
    # pass 1 compiles every object once; a resumed build compiled most of them in the earlier run
    objects = graph_objects(real.build_dir, real.env) if resume else work.objects
    result.objects = {"python": 0, "other": len(objects)}
    result.linked = {"python": [], "other": work.linked}
    result.generators = len(work.other)
    result.seconds = round(time.monotonic() - started, 1)
    say(f"  {len(objects)} objects, {len(work.linked)} linked; stale after a reconfigure: {len(stale)}")
    return result


def python_pass(real: RealBuild, python: Path) -> PassResult:
    started = time.monotonic()
    target = probe(python)
    say(f"pass pytorch (py{target.short}): the driver's retarget of CMakeCache.txt")
    cache = CMakeCache.load(real.build_dir / "CMakeCache.txt")
    guarded = guarded_values(cache)
    changes = retarget(cache, target)
    edited = time.time_ns()
    cache.write()
    ninja_graph.reconfigure(real.build_dir, real.env)  # as the driver's pass does (_reconfigure_if_stale)
    work, would_run = build_pass(real)
    say(f"  the dry run listed {len(would_run)} object(s)/linked file(s)")
    headers = headers_written_since(real.tree, edited)
    check_retarget_kept(CMakeCache.load(real.build_dir / "CMakeCache.txt"), target, guarded)
    objects, linked = classify(work, set(PYTHON_LINKED_2_6))
    result = PassResult(f"4 pytorch (py{target.short})", target.short, would_run=would_run)
    result.objects, result.linked, result.generators = objects, linked, len(work.other)
    result.cache_changes = len(changes)
    result.headers_written = headers
    result.seconds = round(time.monotonic() - started, 1)
    say(
        f"  ran: {result.python_edges} Python-linked, {result.non_python_edges} other object/link edge(s); "
        f"headers written: {len(headers)}"
    )
    return result


def real_compile(real: RealBuild, python: Path) -> dict:
    """One more per-Python pass, to ``python``, with the real compiler: the driver's retarget and
    reconfigure, then ``ninja`` of the graph's Python-linked objects, which runs the code generators they
    depend on (the interpreter is in their command lines). Times: the reconfigure, then the build's wall
    time and the CPU time of ninja and its children."""
    target = probe(python)
    say(f"real compile (py{target.short}): the driver's retarget and reconfigure")
    cache = CMakeCache.load(real.build_dir / "CMakeCache.txt")
    retarget(cache, target)
    cache.write()
    started = time.monotonic()
    ninja_graph.reconfigure(real.build_dir, real.env)
    reconfigure_seconds = time.monotonic() - started
    objects = python_linked_objects(real.build_dir, real.env)
    say(f"real compile (py{target.short}): {len(objects)} Python-linked objects, the real compiler")
    before_log, before_cpu, load = read_log(real.build_dir / ".ninja_log"), os.times(), os.getloadavg()[0]
    started = time.monotonic()
    run_logged(["ninja", "-C", str(real.build_dir), "-j", real.jobs, *objects], real.tree, real.env, real.log)
    wall = time.monotonic() - started
    after_cpu = os.times()
    cpu = (after_cpu.children_user - before_cpu.children_user) + (
        after_cpu.children_system - before_cpu.children_system
    )
    ran = ran_between(before_log, read_log(real.build_dir / ".ninja_log"))
    wanted = set(objects)
    compiled = sorted((e.end_ms - e.start_ms) / 1000 for e in ran if e.output in wanted)
    generators = [e for e in ran if e.output not in wanted]
    result = {
        "python": target.short,
        "jobs": int(real.jobs),
        "reconfigure_seconds": round(reconfigure_seconds, 1),
        "objects_compiled": len(compiled),
        "generator_outputs": len(generators),
        "generators_seconds": round(max((e.end_ms for e in generators), default=0) / 1000, 1),
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "cpu_seconds_per_object": round(cpu / len(compiled), 1) if compiled else None,
        "object_seconds_median": compiled[len(compiled) // 2] if compiled else None,
        "object_seconds_max": compiled[-1] if compiled else None,
        "load_average_at_start": round(load, 2),
        "load_average_at_end": round(os.getloadavg()[0], 2),
    }
    say(
        f"  {len(compiled)} objects in {wall:.0f} s of wall time, {cpu:.0f} s of CPU "
        f"({result['cpu_seconds_per_object']} s per object); reconfigure {reconfigure_seconds:.0f} s"
    )
    return result


# ---- the BLAS switch --------------------------------------------------------------------------------


def mkl_prefix(cache: Path) -> Path:
    """MKL from PyPI's wheels, unpacked into ``<cache>/mkl-<version>`` (include/, lib/) unless already
    there, with the unversioned library names the linker and FindMKL's find_library look for."""
    prefix = cache / f"mkl-{MKL_VERSION}"
    if (prefix / "include" / "mkl.h").is_file() and (prefix / "lib" / "libmkl_core.so").exists():
        return prefix
    wheels = cache / "mkl-wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    say(f"downloading MKL {MKL_VERSION} ({', '.join(MKL_WHEELS)}) from PyPI into {wheels}")
    pins = [f"{name}=={MKL_VERSION}" for name in MKL_WHEELS]
    download = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels), *pins]
    result = subprocess.run(download, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise Failed(f"pip download {' '.join(pins)} failed ({last}): PyPI must be reachable")
    partial = cache / f"mkl-{MKL_VERSION}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    for name in MKL_WHEELS:
        found = sorted(wheels.glob(f"{name.replace('-', '_')}-{MKL_VERSION}-*.whl"))
        if not found:
            raise Failed(f"pip left no {name} {MKL_VERSION} wheel in {wheels}: remove the folder and rerun")
        data = f"{name.replace('-', '_')}-{MKL_VERSION}.data/data/"
        with zipfile.ZipFile(found[-1]) as wheel:
            for member in wheel.namelist():
                if member.startswith(data) and not member.endswith("/"):
                    target = partial / member[len(data) :]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with wheel.open(member) as packed:
                        write_bytes(target, packed.read())
    for library in sorted((partial / "lib").glob("lib*.so.2")):
        library.with_name(library.name[: -len(".2")]).symlink_to(library.name)
    shutil.rmtree(prefix, ignore_errors=True)
    partial.rename(prefix)  # whole or not at all: the check above looks at the final name only
    return prefix


def ccache_settings(cache: compiler_cache.CompilerCache, launcher: Path) -> dict[str, str]:
    """The driver's ccache settings (compiler_cache.settings: CCACHE_DIR, MAXSIZE, COMPILERCHECK=content,
    NODEPEND), with the timing launcher in place of the name ``ccache`` (it runs that ccache)."""
    values = {name: value for name, value, _why in compiler_cache.settings(cache, cuda=False)}
    for name in values:
        if name.endswith("_COMPILER_LAUNCHER"):
            values[name] = str(launcher)
    return values


def config_h_mkl(tree: Path) -> str:
    """AT_MKL_ENABLED()'s value in the ATen/Config.h configure wrote into the source tree."""
    config = tree / "aten" / "src" / "ATen" / "Config.h"
    for line in config.read_text().splitlines():
        if line.startswith("#define AT_MKL_ENABLED()"):
            return line.split()[-1]
    raise Failed(f"{config} defines no AT_MKL_ENABLED(): configure did not write it")


def blas_info(build_dir: Path) -> str:
    macros = build_dir / "caffe2" / "core" / "macros.h"
    for line in macros.read_text().splitlines():
        if "BLAS_INFO" in line:
            return line
    raise Failed(f"{macros} has no BLAS_INFO line: configure did not write it")


def report_progress(log: Path, total: int, done: threading.Event) -> None:
    """Every minute, how many compiles went through ccache so far (the timing launcher's log)."""
    while not done.wait(60):
        count = len(log.read_text().splitlines()) if log.exists() else 0
        say(f"  {count} of {total} compiles through ccache")


@dataclass
class BlasRun:
    """What the builds of one --blas-switch run share: the work folder, the cache, the launcher."""

    work: Path
    source: Path
    python: Path
    mkl: Path | None
    cache: compiler_cache.CompilerCache
    launcher: Path
    jobs: str
    sample: int
    seed: int

    def logs(self, blas: str, what: str) -> Path:
        folder = self.work / "logs"
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{blas}-{what}.log"


@dataclass
class Configured:
    """One BLAS's tree after configure, the driver's settle and the code generators."""

    real: RealBuild
    objects: list[str]
    seconds: float  # configure and settle, wall
    reconfigures: int
    generator_outputs: int


def configure_blas(run: BlasRun, blas: str) -> Configured:
    """A fresh copy of the source at ``<work>/src``, configured for ``blas`` (setup.py, as the driver's pass
    1) with the ccache settings, settled as the driver does, its code generators run with the real tools."""
    tree = fresh_tree(run.source, run.work)
    real = RealBuild.in_work(tree, run.work, run.jobs)
    real.standin = PreprocessingStandIn.create(run.work)
    real.log = run.logs(blas, "build")
    write_text(real.log, "")
    settings = {k: v.format(mkl=run.mkl) for k, v in BLAS_SETTINGS[blas].items()}
    real.env = {k: v for k, v in real.env.items() if k != "GENERIC_BLAS_LIBRARIES"}
    real.env.update(settings, **ccache_settings(run.cache, run.launcher))
    # configure's own check compiles (the real compiler) go through ccache too: logged apart
    for what in ("configure-cpu", "configure-ccache", "generators-ccache"):
        run.logs(blas, what).unlink(missing_ok=True)  # ccache and the launcher append
    real.env[TIMING_LOG_VARIABLE] = str(run.logs(blas, "configure-cpu"))
    real.env["CCACHE_STATSLOG"] = str(run.logs(blas, "configure-ccache"))
    started = time.monotonic()
    shown = " ".join(f"{name}={value}" for name, value in settings.items())
    say(f"{blas}: configure (setup.py build --cmake-only, {shown})")
    run_logged([str(run.python), "setup.py", "build", "--cmake-only"], tree, real.env, real.log)
    say(f"{blas}: the driver's settle")
    settled = ninja_graph.settle(real.build_dir, real.env)
    seconds = round(time.monotonic() - started, 1)
    info = blas_info(real.build_dir)
    if f'"{BLAS_INFO[blas]}"' not in info:
        raise Failed(f"BLAS={blas} configured {info.strip()!r}: see {real.log}")
    objects = graph_objects(real.build_dir, real.env)
    say(f"  {seconds:.0f} s, {settled.reconfigures} reconfigure(s); {len(objects)} objects; {info.strip()}")
    before = read_log(real.build_dir / ".ninja_log")
    generators = [
        name
        for name in ninja_targets(real.build_dir, real.env)
        if name.startswith("cmake_object_order_depends_target_")
    ]
    say(f"{blas}: the code generators ({len(generators)} targets, the real tools)")
    real.env["CCACHE_STATSLOG"] = str(run.logs(blas, "generators-ccache"))
    command = ["ninja", "-C", str(real.build_dir), "-j", run.jobs, *generators]
    real.standin.run(command, tree, real.env, real.log)
    outputs = len(ran_between(before, read_log(real.build_dir / ".ninja_log")))
    return Configured(real, objects, seconds, settled.reconfigures, outputs)


def blas_build(run: BlasRun, blas: str, chosen: list[str] | None) -> tuple[BlasBuild, list[str]]:
    """One BLAS: ``configure_blas``, then the build through ccache (the real preprocessor, the compile
    faked), timed. Returns the build's figures and, under --sample, the objects it built."""
    configured = configure_blas(run, blas)
    real, objects = configured.real, configured.objects
    if run.sample and chosen is None:
        chosen = sorted(random.Random(run.seed).sample(sorted(objects), min(run.sample, len(objects))))
    targets = [obj for obj in chosen if obj in set(objects)] if chosen is not None else []
    stats, timing = run.logs(blas, "build-ccache"), run.logs(blas, "ccache-cpu")
    stats.unlink(missing_ok=True)
    timing.unlink(missing_ok=True)
    real.env["CCACHE_STATSLOG"], real.env[TIMING_LOG_VARIABLE] = str(stats), str(timing)
    total = len(targets) if chosen is not None else len(objects)
    say(f"{blas}: build, {total} objects through ccache (the real preprocessor, the stand-in's compile)")
    command = ["ninja", "-C", str(real.build_dir), "-j", run.jobs, *targets]
    if chosen is None:
        command = ["cmake", "--build", str(real.build_dir), "-j", run.jobs]
    before_log = read_log(real.build_dir / ".ninja_log")
    done = threading.Event()
    threading.Thread(target=report_progress, args=(timing, total, done), daemon=True).start()
    cpu_before, started = os.times(), time.monotonic()
    try:
        real.standin.run(command, real.tree, real.env, real.log)
    finally:
        done.set()
    wall, cpu_after = time.monotonic() - started, os.times()
    cpu = (cpu_after.children_user - cpu_before.children_user) + (
        cpu_after.children_system - cpu_before.children_system
    )
    work = PassWork.from_entries(ran_between(before_log, read_log(real.build_dir / ".ninja_log")))
    sources = compiler_cache.compile_sources(real.build_dir, real.env)
    served = compiler_cache.served_from_cache(work.objects, compiler_cache.read_stats_log(stats), sources)
    build = BlasBuild(
        blas=blas,
        objects_in_graph=objects,
        objects_ran=work.objects,
        served=served,
        linked=work.linked,
        generator_outputs=configured.generator_outputs,
        config_h_mkl_enabled=config_h_mkl(real.tree),
        configure_seconds=configured.seconds,
        settle_reconfigures=configured.reconfigures,
        build_wall_seconds=round(wall, 1),
        build_cpu_seconds=round(cpu, 1),
        cpu_seconds=read_timing_log(timing.read_text().splitlines()),
        outcomes=ccache_outcomes(stats.read_text().splitlines() if stats.exists() else []),
    )
    say(
        f"  {wall:.0f} s, {cpu:.0f} s of CPU: {len(work.objects)} objects, {len(build.compiled)} compiled "
        f"(ccache misses), {len(served)} from the cache; {len(work.linked)} linked"
    )
    return build, targets


def ninja_targets(build_dir: Path, env: dict[str, str]) -> list[str]:
    text = subprocess.run(
        ["ninja", "-C", str(build_dir), "-t", "targets", "all"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.split(":", 1)[0] for line in text.splitlines()]


def move_away(work: Path, blas: str) -> Path:
    """The tree of the BLAS just built goes aside, as conda-build renames ``work`` to ``work_moved_*``
    before the next top-level build; the next BLAS gets a fresh copy at the same path."""
    moved = work / f"src_moved_{blas}"
    shutil.rmtree(moved, ignore_errors=True)
    (work / "src").rename(moved)
    return moved


def blas_switch(args: argparse.Namespace, report_path: Path) -> int:
    """``--blas-switch``: the first BLAS, then the second from a fresh tree at the same path, one cache."""
    blases = ["MKL", args.second_blas]
    started = time.monotonic()
    try:
        extra = BLAS_DEV_PACKAGES.get(blases[1], ())
        check_prerequisites(extra_tools={"ccache": "ccache"}, extra_packages=extra)
        args.work.mkdir(parents=True, exist_ok=True)
        args.debian_cache.mkdir(parents=True, exist_ok=True)
        python = build_python(args.work, args.pythons[0])
        source = debian_source(args.debian_cache)
        mkl = mkl_prefix(args.debian_cache)
        program = shutil.which(compiler_cache.PROGRAM) or compiler_cache.PROGRAM
        version = compiler_cache.program_version(program)
        cache_dir = args.work / "compiler-cache" / f"{compiler_cache.PROGRAM}-{version}-real-graph"
        shutil.rmtree(cache_dir, ignore_errors=True)  # the first BLAS starts from an empty cache
        cache = compiler_cache.CompilerCache(program, version, cache_dir)
        launcher = args.work / "bin" / "timed-ccache"
        launcher.parent.mkdir(parents=True, exist_ok=True)
        text = TIMING_LAUNCHER.format(python=sys.executable, variable=TIMING_LOG_VARIABLE)
        write_text(launcher, text, mode=0o755)
        run = BlasRun(args.work, source, python, mkl, cache, launcher, args.jobs, args.sample, args.seed)
        first, chosen = blas_build(run, blases[0], None)
        move_away(args.work, blases[0])
        second, _ = blas_build(run, blases[1], chosen if args.sample else None)
    except (Failed, MegabuildError, subprocess.CalledProcessError) as exc:
        return failed(exc)
    payload = {
        "source": f"Debian {SOURCE_DIR_NAME} ({APT_SOURCE_LINE})",
        "mkl": f"PyPI {', '.join(MKL_WHEELS)} {MKL_VERSION}",
        "ccache": f"{cache.program} {cache.version}",
        "jobs": int(args.jobs),
        "sample": {"objects": args.sample, "seed": args.seed} if args.sample else None,
        "builds": [build_figures(first), build_figures(second)],
        "switch": switch_figures(first, second),
        "seconds": round(time.monotonic() - started, 1),
        "cpu_seconds": {b.blas: b.cpu_seconds for b in (first, second)},
    }
    if not args.sample:  # a sample has no links and too few hits to model a job on
        payload["model"] = models(payload, args)
    write_text(report_path, json.dumps(payload, indent=1, sort_keys=True) + "\n")
    print(blas_table(payload))
    return 0


def preprocess_command(command: str, launcher: str, output: Path) -> list[str]:
    """A compile command of the graph as the real preprocessor's: without the launcher and the dependency
    file, -E -P for -c, the output to ``output``."""
    words = shlex.split(command)
    if words and words[0] == launcher:
        words = words[1:]
    out: list[str] = []
    skip = 0
    for word in words:
        if skip:
            skip -= 1
        elif word in ("-MT", "-MF", "-MQ"):
            skip = 1
        elif word == "-MD":
            continue
        elif word == "-o":
            out += ["-o", str(output)]
            skip = 1
        elif word == "-c":
            out += ["-E", "-P"]
        else:
            out.append(word)
    return out


def preprocess_all(tree: Path, objects: list[str], launcher: str, into: Path) -> None:
    """``objects`` preprocessed by the real compiler in ``tree`` (its build's compile commands)."""
    build = tree / "build"
    entries = json.loads(
        subprocess.run(
            ["ninja", "-C", str(build), "-t", "compdb"], capture_output=True, text=True, check=True
        ).stdout
    )
    commands = {os.path.relpath(os.path.join(e["directory"], e["output"]), build): e for e in entries}
    into.mkdir(parents=True, exist_ok=True)
    for number, obj in enumerate(objects, start=1):
        entry = commands[obj]
        output = into / (obj.replace("/", "_") + ".i")
        subprocess.run(
            preprocess_command(entry["command"], launcher, output), cwd=entry["directory"], check=True
        )
        if number % 10 == 0:
            say(f"  {number} of {len(objects)}")


def put_trees_back(moved: Path, current: Path, aside: Path) -> None:
    """Undo the swap of an --explain-misses that was killed during it: the second BLAS's tree back at
    ``current``, the first's at ``moved``. Each step is one rename, so a kill between two steps leaves a
    state the next call also recognises."""
    if aside.exists() and not current.exists():  # killed between the two renames of a swap
        aside.rename(current)
    if aside.exists() and not moved.exists():  # killed with the first tree at the path
        current.rename(moved)
        aside.rename(current)


def explain_misses(args: argparse.Namespace, report_path: Path) -> int:
    """``--explain-misses``: after a --blas-switch run in the same --work, each object the second BLAS
    compiled that both graphs have, preprocessed (-E -P) by the real compiler under both BLAS at the same
    path (the first tree moved back for its turn, then moved aside again), and why the two differ
    (real_graph_blas.classify_difference). Adds ``explained`` to the report."""
    work = args.work
    try:
        payload = json.loads(report_path.read_text()) if report_path.is_file() else None
        if not payload or "switch" not in payload:
            raise Failed(f"--explain-misses: no --blas-switch report {report_path}; run --blas-switch first")
        first, second = (b["blas"] for b in payload["builds"])
        moved, current = work / f"src_moved_{first}", work / "src"
        aside = work / f"src_{second}"
        put_trees_back(moved, current, aside)
        if not (moved / "build" / "build.ninja").exists() or not (current / "build" / "build.ninja").exists():
            raise Failed(f"--explain-misses: {moved} or {current} has no build: run --blas-switch again")
        objects = payload["switch"]["second_compiled_in_both_graphs"]
        launcher = str(work / "bin" / "timed-ccache")
        texts = work / "explained"
        shutil.rmtree(texts, ignore_errors=True)
        say(f"{second}: preprocessing the {len(objects)} objects it compiled")
        preprocess_all(current, objects, launcher, texts / second)
        current.rename(aside)
        moved.rename(current)
        try:
            say(f"{first}: preprocessing the same objects (its tree back at {current})")
            preprocess_all(current, objects, launcher, texts / first)
        finally:
            current.rename(moved)
            aside.rename(current)
    except (Failed, OSError, ValueError, KeyError, subprocess.CalledProcessError) as exc:
        return failed(exc)
    explained = {}
    for obj in objects:
        name = obj.replace("/", "_") + ".i"
        with (texts / first / name).open() as a, (texts / second / name).open() as b:
            why, lines = classify_difference(a, b)
        explained[obj] = {"why": why, "lines": lines}
    payload["explained"] = explained
    write_text(report_path, json.dumps(payload, indent=1, sort_keys=True) + "\n")
    for obj, found in explained.items():
        print(f"{found['why']:<12} {obj}  {' | '.join(found['lines'][:2])}")
    return 0


def models(payload: dict, args: argparse.Namespace) -> list[dict]:
    """The model once per --test-seconds value, from the report's figures."""
    first, second = payload["builds"]
    compiled = python_objects_compiled(payload["switch"], PYTHON_LINKED_2_6)
    return [
        model(
            first, second, compiled, Assumptions(args.cores, link_seconds=args.link_seconds, test_seconds=t)
        )
        for t in args.test_seconds
    ]


def remodel(args: argparse.Namespace, report_path: Path) -> int:
    """``--remodel``: the model of an earlier --blas-switch report again, with this command's assumptions."""
    try:
        payload = json.loads(report_path.read_text())
        if "builds" not in payload or payload.get("sample"):
            raise Failed(f"{report_path} is no whole-graph --blas-switch report: run --blas-switch first")
    except (OSError, ValueError) as exc:
        return failed(Failed(f"--remodel: cannot read {report_path} ({exc}): run --blas-switch first"))
    except Failed as exc:
        return failed(exc)
    payload["model"] = models(payload, args)
    write_text(report_path, json.dumps(payload, indent=1, sort_keys=True) + "\n")
    print(blas_table(payload))
    return 0


def blas_table(payload: dict) -> str:
    header = "blas      graph  ran  compiled  from cache  linked  cpu-s/miss  cpu-s/hit  configure-s  build-s"
    lines = [header]
    for b in payload["builds"]:
        lines.append(
            f"{b['blas']:<9} {b['objects_in_graph']:>5} {b['objects_ran']:>4} {b['objects_compiled']:>9} "
            f"{b['objects_from_cache']:>11} {b['linked']:>7} {b['cpu_seconds_per_miss']!s:>11} "
            f"{b['cpu_seconds_per_hit']!s:>10} {b['configure_seconds']:>12} {b['build_wall_seconds']:>8}"
        )
    switch = payload["switch"]
    lines.append(f"second BLAS compiled: {', '.join(switch['second_compiled']) or 'nothing'}")
    for modelled in payload.get("model", []):
        tests = modelled["assumptions"]["test_seconds"]
        walls = modelled["wall_seconds"]
        lines.append(
            f"model, tests {tests:.0f} s per BLAS: merged job {walls['merged_job']} s, separate jobs "
            f"{walls['separate_jobs']} s (wall); runner time {modelled['runner_seconds']}"
        )
    return "\n".join(lines)


# ---- the report -------------------------------------------------------------------------------------


def graph_objects(build_dir: Path, env: dict[str, str]) -> list[str]:
    """Every object file of the graph."""
    return [target for target in ninja_targets(build_dir, env) if target.endswith(".o")]


def python_linked_objects(build_dir: Path, env: dict[str, str]) -> list[str]:
    """Objects of the Python-linked targets in the graph: what a per-Python pass has to compile."""
    targets = set(PYTHON_LINKED_2_6)
    return [output for output in graph_objects(build_dir, env) if target_of_object(output) in targets]


def summary(results: list[PassResult], per_python_objects: int, edges: int) -> dict:
    first, later = results[0], results[1:]
    compiled = first.objects["other"] + sum(r.objects["python"] + r.objects["other"] for r in later)
    limit = first.objects["other"] + per_python_objects * len(later)
    return {
        "graph_edges": edges,
        "python_linked_objects_in_graph": per_python_objects,
        "objects_compiled": compiled,
        "limit": limit,
        "compile_work_ratio": round(compiled / limit, 4) if limit else None,
        "non_python_edges_rerun": sum(r.non_python_edges for r in later),
        "stale_after_pass1": len(first.stale_after_pass1),
        "headers_written_in_later_passes": sum(len(r.headers_written) for r in later),
        "not_measured": "the MAGMA pass: the graph is CPU-only (no CUDA here); the stand-in proves it",
    }


def table(results: list[PassResult]) -> str:
    header = ("pass", "objects: py", "other", "links: py", "other", "generators", "dry-run", "seconds")
    rows = [
        (
            r.name, str(r.objects.get("python", 0)), str(r.objects.get("other", 0)),
            str(len(r.linked.get("python", []))), str(len(r.linked.get("other", []))), str(r.generators),
            str(len(r.would_run)) if r.name[0] != "1" else "-", f"{r.seconds:.0f}",
        )
        for r in results
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row))
        for row in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def add_blas_arguments(parser: argparse.ArgumentParser) -> None:
    blas = parser.add_argument_group("--blas-switch (docs/records/2026-12-07-real-graph-blas.md)")
    blas.add_argument(
        "--blas-switch",
        action="store_true",
        help="instead of the Python passes: BLAS=MKL (PyPI's wheels), then the second BLAS from a fresh copy "
        "of the source at the same path, both built through one ccache with the real preprocessor and the "
        "compile faked; reports the second BLAS's misses, hits, links and CPU per hit, and the model "
        "(report <work>/megabuild-real-graph-blas.json)",
    )
    blas.add_argument(
        "--second-blas", choices=("OpenBLAS", "Generic"), default="OpenBLAS", help="default OpenBLAS"
    )
    blas.add_argument(
        "--sample", type=int, default=0, metavar="N",
        help="build only N objects drawn with --seed from the first BLAS's graph (and no links); 0: all",
    )  # fmt: skip
    blas.add_argument("--seed", type=int, default=42, help="the sample's seed (default 42)")
    blas.add_argument("--cores", type=int, default=16, help="the model's runner cores (default 16)")
    blas.add_argument(
        "--link-seconds", type=float, default=0.0,
        help="the model's wall seconds of one BLAS's links (not measured: the stand-in links nothing)",
    )  # fmt: skip
    blas.add_argument(
        "--test-seconds", type=float, nargs="+", default=[0.0], metavar="SECONDS",
        help="the model's wall seconds of one BLAS's package tests, one model each (not measured here)",
    )  # fmt: skip
    blas.add_argument(
        "--explain-misses", action="store_true",
        help="after --blas-switch in the same --work: why each object the second BLAS compiled differs "
        "(both BLAS's preprocessed input, the real compiler; adds 'explained' to the report)",
    )  # fmt: skip
    blas.add_argument(
        "--remodel", action="store_true",
        help="model an earlier --blas-switch report again with these assumptions (rewrites its model)",
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument(
        "--work", type=Path, required=True, help="scratch directory (several GB): source copy, build, venvs"
    )
    parser.add_argument(
        "--debian-cache",
        type=Path,
        default=Path("/work/cache/debian"),
        help="where Debian's source is (or is fetched to)",
    )
    parser.add_argument(
        "--pythons",
        nargs="+",
        default=["3.10", "3.11", "3.12", "3.13"],
        help="pass 1's Python first, then one pytorch pass each",
    )
    parser.add_argument("--jobs", default="2", help="parallel build jobs (default 2)")
    parser.add_argument("--json", type=Path, help="report file (default <work>/megabuild-real-graph.json)")
    parser.add_argument(
        "--real-compile",
        metavar="VERSION",
        help="after a run in the same --work: one more pass to this CPython whose Python-linked objects the "
        "real compiler builds (about 30 min on 2 idle cores); adds its times to the report",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="finish the pass-1 build an interrupted run left in <work>/src (skips copy, configure, settle)",
    )
    add_blas_arguments(parser)
    args = parser.parse_args(argv)
    blas_report = args.json or args.work / "megabuild-real-graph-blas.json"
    if args.remodel:
        return remodel(args, blas_report)
    if args.explain_misses:
        return explain_misses(args, blas_report)
    if args.blas_switch:
        return blas_switch(args, blas_report)
    report_path = args.json or args.work / "megabuild-real-graph.json"
    started = time.monotonic()
    if args.real_compile:
        return add_real_compile(args, report_path)
    try:
        check_prerequisites()
        args.work.mkdir(parents=True, exist_ok=True)
        args.debian_cache.mkdir(parents=True, exist_ok=True)
        pythons = [build_python(args.work, version) for version in args.pythons]
        source = debian_source(args.debian_cache)
        tree = args.work / "src"
        if not args.resume:
            tree = fresh_tree(source, args.work)
        elif not (tree / "build" / "build.ninja").exists():
            raise Failed(f"--resume: {tree}/build has no build.ninja; run without --resume")
        real = RealBuild.in_work(tree, args.work, args.jobs)
        env = real.env
        if not args.resume:
            write_text(real.log, "")
        results = [pass_one(real, pythons[0], args.resume)]
        results += [python_pass(real, python) for python in pythons[1:]]
        edges = len(ninja_graph.commands(real.build_dir, env))
        totals = summary(results, len(python_linked_objects(real.build_dir, env)), edges)
    except (Failed, ninja_graph.GraphError, subprocess.CalledProcessError) as exc:
        return failed(exc)
    totals["seconds"] = round(time.monotonic() - started, 1)
    payload = {
        "source": f"Debian {SOURCE_DIR_NAME} ({APT_SOURCE_LINE})",
        "pythons": args.pythons,
        "summary": totals,
        "passes": [
            dict(asdict(r), python_edges=r.python_edges, non_python_edges=r.non_python_edges) for r in results
        ],
    }
    write_text(report_path, json.dumps(payload, indent=1, sort_keys=True) + "\n")
    print(table(results))
    print(
        f"compile-work ratio {totals['compile_work_ratio']}: {totals['objects_compiled']} objects compiled, "
        f"limit {totals['limit']} = pass 1 + {totals['python_linked_objects_in_graph']} Python-linked "
        f"x {len(results) - 1}; non-Python edges re-run after pass 1: {totals['non_python_edges_rerun']}; "
        f"left stale by pass 1: {totals['stale_after_pass1']}; {totals['seconds']:.0f} s; {report_path}"
    )
    return 0


def failed(exc: Exception) -> int:
    """The one line of a failed run, on stderr; exit status 1."""
    if isinstance(exc, subprocess.CalledProcessError):
        message = f"`{' '.join(map(str, exc.cmd[:5]))}` failed with status {exc.returncode}"
    else:
        message = str(exc)
    print(f"megabuild_real_graph: {message}", file=sys.stderr)
    return 1


def add_real_compile(args: argparse.Namespace, report_path: Path) -> int:
    """``--real-compile``: the real compile of one more pass in the tree of an earlier run, added to its
    report (rewritten atomically; a failed compile leaves the report as it was)."""
    try:
        if not report_path.is_file():
            raise Failed(f"--real-compile: no report {report_path}; run without --real-compile first")
        tree = args.work / "src"
        if not (tree / "build" / "build.ninja").exists():
            raise Failed(f"--real-compile: {tree}/build has no build.ninja; run without --real-compile first")
        python = build_python(args.work, args.real_compile)
        measured = real_compile(RealBuild.in_work(tree, args.work, args.jobs), python)
    except (Failed, ninja_graph.GraphError, subprocess.CalledProcessError) as exc:
        return failed(exc)
    payload = json.loads(report_path.read_text())
    payload["real_compile"] = measured
    write_text(report_path, json.dumps(payload, indent=1, sort_keys=True) + "\n")
    print(json.dumps(measured, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
