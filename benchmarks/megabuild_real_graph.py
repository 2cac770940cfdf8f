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
   wall and CPU time go into the report. Its links are not run (the other libraries are the stand-in's).

Compiling all of PyTorch takes hours, so the builds run with a stand-in compiler: in a private mount
namespace the C and C++ compiler drivers are replaced by a script that writes an empty file at the ``-o``
output. Command lines, and so ninja's command hashes and decisions, are those of the real build; configure
and every code generator run for real. The stand-in writes no header dependencies, so after every later
pass the headers written during it are listed: none means no object of a real build would have been dirty
through a header either. Needs root or unprivileged user namespaces.

Writes a table to stdout and ``--json`` (default ``<work>/megabuild-real-graph.json``) atomically: a run
that fails writes no report. Missing tools, -dev packages or Pythons are one line naming what to install.
Standard library only.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "recipe"))

from megabuild import ninja_graph
from megabuild.atomic_file import write_text
from megabuild.cmake_cache import CMakeCache
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
# The driver's Python-linked targets (2.13.0) and 2.6.0's functorch, a MODULE linking torch_python
# (functorch/CMakeLists.txt of the 2.6.0 source; the 2.13.0 wheel has no functorch extension).
PYTHON_LINKED_2_6 = (*python_linked_targets("linux-64"), "functorch")
HEADER_SUFFIXES = (".h", ".hpp", ".hh", ".cuh", ".inc", ".def")


class Failed(Exception):
    """One line: what is wrong and what to do."""


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---- prerequisites ----------------------------------------------------------------------------------


def check_prerequisites() -> None:
    missing_tools = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing_tools:
        packages = " ".join(dict.fromkeys(TOOLS[tool] for tool in missing_tools))
        raise Failed(f"missing {', '.join(missing_tools)}: apt-get install {packages}")
    result = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\\n", *DEV_PACKAGES],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    installed = {line.split()[0] for line in result.stdout.splitlines() if line.endswith(" installed")}
    missing = [package for package in DEV_PACKAGES if package not in installed]
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

    def run(self, command: list[str], cwd: Path, env: dict[str, str], log: Path) -> None:
        binds = [f"mount --bind {self.script} {driver}" for driver in self.drivers]
        unshare = ["unshare", "--mount", "--propagation", "private"]
        if os.geteuid() != 0:
            unshare.insert(1, "--map-root-user")
        inner = " && ".join([*binds, 'exec "$@"'])
        run_logged([*unshare, "sh", "-c", inner, "standin", *command], cwd, env, log)


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


# ---- the report -------------------------------------------------------------------------------------


def graph_objects(build_dir: Path, env: dict[str, str]) -> list[str]:
    """Every object file of the graph."""
    text = subprocess.run(
        ["ninja", "-C", str(build_dir), "-t", "targets", "all"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.split(":", 1)[0] for line in text.splitlines() if line.split(":", 1)[0].endswith(".o")]


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
    args = parser.parse_args(argv)
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
