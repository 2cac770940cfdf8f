"""The compiler cache: ccache in its default mode (direct, then the preprocessor), in a place the job owns.

Why (docs/reference/megabuild.md, "The compiler cache"): a job that builds both BLAS runs pass 1 once per
BLAS, each from a fresh work directory at the same path (conda-build renames ``work`` between its top-level
builds; rattler-build gives every staging a fresh one). MKL's flags change every command line
(``-DMKL_HAS_SBGEMM -DMKL_HAS_SHGEMM`` and ``-isystem <mkl>/include``, PyTorch's FindMKL.cmake), so ninja, and
a cache that hashes the command line, recompile everything. ccache's preprocessor mode hashes the
preprocessed input and leaves ``-D``/``-I``/``-isystem`` out ("the theory is that these command line options
will change the preprocessor output if they have any effect at all": the ccache manual, "The preprocessor
mode"), so the second BLAS's pass 1 compiles only the objects whose preprocessed input its BLAS changes.

Where: ``$MEGABUILD_COMPILER_CACHE``, else ``$SRC_DIR/../megabuild-compiler-cache`` under conda-build, whose
work directory's parent keeps its files across the top-level builds of a job (measured with conda-build
26.7.1). rattler-build empties the subdirectories there at every staging and output (measured with
py-rattler-build 0.73.0), so there the variable must name a place; without it the driver stops. Below that
place, one directory per key (ccache's version, the target platform, CUDA or CPU): a cache another kind of
job left there is never used, and ccache checks every result it returns against the preprocessed input and
the compiler's content, so nothing outside the job is trusted.

Accounting: ccache appends one block per compilation to the file ``CCACHE_STATSLOG`` names, ``# <source>``
then its counters (ccache 4.7.5 and 4.14.2, measured); a block without a hit counter is a real compile. A
pass maps the sources to the objects ninja ran (``ninja -t compdb``), so its record counts real compiles,
not edges.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from megabuild.conda_env import CondaBuild
from megabuild.errors import MegabuildError

LOCATION_VARIABLE = "MEGABUILD_COMPILER_CACHE"
PROGRAM = "ccache"
FALLBACK_NAME = "megabuild-compiler-cache"
# set by rattler-build for every build script (measured: the environments py-rattler-build 0.73.0 gave its
# staging and outputs), named nowhere in conda-build 26.7.1's source
RATTLER_BUILD_MARK = "RATTLER_BUILD_PACKAGE_FILES"
# the counters ccache writes for a result it took from the cache instead of compiling (ccache 4.7.5, 4.14.2)
HIT_COUNTERS = frozenset({"direct_cache_hit", "preprocessed_cache_hit"})
STATS_LOG_NAME = "pass-stats.log"
_VERSION = re.compile(r"^ccache version (\d+(?:\.\d+)+)")


@dataclass(frozen=True)
class CompilerCache:
    """The cache of one job: the ccache it runs (found on PATH) and the directory of its key."""

    program: str  # the path of the ccache found
    version: str
    directory: Path

    @property
    def stats_log(self) -> Path:
        """Where ccache writes the current pass's compilations (the pass empties it first)."""
        return self.directory / STATS_LOG_NAME


def key(version: str, build: CondaBuild) -> str:
    """``ccache-4.7.5-linux-64-cuda12.9``: the tool's version and the target, the name of the job's cache."""
    flavour = f"cuda{build.cuda_version}" if build.cuda_version else "cpu"
    return f"{PROGRAM}-{version}-{build.target_platform}-{flavour}"


def locate(build: CondaBuild, caller: Mapping[str, str]) -> CompilerCache | None:
    """The job's cache, or None on Windows (one BLAS per job there, and MSVC builds without ccache). Stops
    with one line when no ccache is on PATH, or under rattler-build when no place is named."""
    if build.windows:
        return None
    program = shutil.which(PROGRAM, path=caller.get("PATH"))
    if program is None:
        raise MegabuildError(
            f"no {PROGRAM} on PATH: add {PROGRAM} to the build requirements of every scripted output "
            "(recipe/meta.yaml, build_tools); the second BLAS's pass 1 compiles from its cache"
        )
    given = caller.get(LOCATION_VARIABLE, "")
    if given:
        place = Path(given)
        if not place.is_absolute():
            raise MegabuildError(
                f"{LOCATION_VARIABLE}={given!r} is not an absolute path: name the directory the compiler "
                "cache of this job lives in"
            )
    elif RATTLER_BUILD_MARK in caller:
        raise MegabuildError(
            f"{LOCATION_VARIABLE} is not set: rattler-build empties the directories beside the work "
            "directory between builds, so the compiler cache needs a place of the job's own there; set it "
            "to a directory outside rattler-build's output (python -m feedstock_tools real-build does)"
        )
    else:
        place = build.src_dir.parent / FALLBACK_NAME
    version = program_version(program)
    return CompilerCache(program, version, place / key(version, build))


def program_version(program: str) -> str:
    try:
        result = subprocess.run(
            [program, "--version"], capture_output=True, text=True, check=False, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MegabuildError(f"cannot run {program} --version ({exc}): fix or replace that ccache") from None
    match = _VERSION.match(result.stdout)
    if result.returncode != 0 or match is None:
        first = (result.stdout.splitlines() or ["no output"])[0]
        raise MegabuildError(f"{program} --version said {first!r}, not 'ccache version X.Y': is it ccache?")
    return match[1]


def settings(cache: CompilerCache, cuda: bool) -> list[tuple[str, str, str]]:
    """(name, value, why) of the variables the upstream build runs with; the same in every pass (the
    launchers are CMake inputs, environment.reconfigure_inputs)."""
    launchers = ("C", "CXX", *(("CUDA",) if cuda else ()))
    out = [
        (
            f"CMAKE_{language}_COMPILER_LAUNCHER",
            PROGRAM,
            "every compile through ccache (CMake reads the variable on the first configure): the second "
            "BLAS's pass 1 takes what its BLAS does not change from the cache (megabuild/compiler_cache.py); "
            "the name, not a path, so the value is the same in every output",
        )
        for language in launchers
    ]
    out += [
        ("CCACHE_DIR", str(cache.directory), f"the job's own cache, keyed by {cache.directory.name}"),
        (
            "CCACHE_MAXSIZE",
            "0",
            "no limit: the cache holds one job's objects and goes with the job; a limit (5G by default) "
            "could evict the first BLAS's objects before the second asks for them",
        ),
        (
            "CCACHE_COMPILERCHECK",
            "content",
            "the compiler's bytes, not its time stamp: every output gets its build environment anew",
        ),
        (
            "CCACHE_NODEPEND",
            "1",
            "never the depend mode, which does not preprocess and so reuses nothing across BLAS (measured)",
        ),
    ]
    return out


def start_pass(cache: CompilerCache) -> Path:
    """An empty stats log for the pass about to run (one pass at a time uses a job's cache)."""
    cache.directory.mkdir(parents=True, exist_ok=True)
    cache.stats_log.unlink(missing_ok=True)
    return cache.stats_log


def read_stats_log(path: Path) -> list[tuple[str, bool]]:
    """(source, served from the cache) per compilation ccache logged, in order; none for an absent log."""
    if not path.exists():
        return []
    outcomes: list[tuple[str, bool]] = []
    source: str | None = None
    counters: set[str] = set()
    for line in [*path.read_text(encoding="utf-8", errors="surrogateescape").splitlines(), "# "]:
        if line.startswith("#"):
            if source is not None:
                outcomes.append((source, bool(counters & HIT_COUNTERS)))
            source, counters = line[1:].strip() or None, set()
        elif line.strip():
            counters.add(line.strip())
    return outcomes


def compile_sources(build_dir: Path, env: Mapping[str, str]) -> dict[str, str]:
    """Every compiled object of the build (as .ninja_log names it, relative to the build directory) and the
    absolute path of its source, from ``ninja -t compdb``."""
    try:
        result = subprocess.run(
            ["ninja", "-C", str(build_dir), "-t", "compdb"],
            env=dict(env),
            capture_output=True,
            text=True,
            check=False,
        )
        entries = json.loads(result.stdout) if result.returncode == 0 else None
    except (OSError, ValueError) as exc:
        raise MegabuildError(f"`ninja -t compdb` in {build_dir} failed ({exc})") from None
    if not isinstance(entries, list):
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise MegabuildError(f"`ninja -C {build_dir} -t compdb` failed: {last}")
    return sources_of(entries, build_dir)


def sources_of(entries: Sequence[Mapping[str, str]], build_dir: Path) -> dict[str, str]:
    """A compile database's objects (relative to ``build_dir``, as .ninja_log names them) and the absolute
    paths of their sources."""
    sources = {}
    for entry in entries:
        directory = Path(entry.get("directory", build_dir))
        output, source = entry.get("output"), entry.get("file")
        if output and source:
            absolute_output = os.path.normpath(directory / output)
            relative = os.path.relpath(absolute_output, os.path.normpath(build_dir))
            sources[relative] = os.path.normpath(directory / source)
    return sources


def served_from_cache(
    objects: Sequence[str], logged: Sequence[tuple[str, bool]], sources: Mapping[str, str]
) -> list[str]:
    """The objects of ``objects`` (what ninja ran) that ccache took from the cache. An object whose source
    ccache did not log (not launched through it) was compiled; a source compiled twice in one pass has its
    outcomes matched to its objects in order."""
    by_source: dict[str, list[bool]] = {}
    for source, hit in logged:
        by_source.setdefault(os.path.normpath(source), []).append(hit)
    hits = []
    for obj in objects:
        outcomes = by_source.get(sources.get(obj, ""), [])
        if outcomes and outcomes.pop(0):
            hits.append(obj)
    return hits
