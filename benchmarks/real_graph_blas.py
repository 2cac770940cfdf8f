"""The accounting and the wall-time model of ``megabuild_real_graph.py --blas-switch``: pure logic, no build.

One BLAS build of the real graph (``BlasBuild``) is what ninja ran, which of its compiles ccache served
(the driver's own stats-log accounting, megabuild/compiler_cache.py) and the CPU time each compile cost
through ccache (the timing launcher's log). ``switch_figures`` compares the two builds of one run; ``model``
projects a merged job (both BLAS, one runner) against two separate jobs from those figures and the
yardstick of a real compile, with every assumption a named parameter.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from megabuild.ninja_log import target_of_object

# CPU seconds GCC 12 spent per object of a real per-Python pass of the same graph, -O2 (154 objects,
# docs/records/2026-11-25-real-graph.md): the yardstick a cache hit is set against.
REAL_COMPILE_CPU_SECONDS = 22.9


@dataclass
class BlasBuild:
    """One BLAS's configure and build of the real graph, through ccache with the compile faked."""

    blas: str
    objects_in_graph: list[str]  # every object of the configured graph
    objects_ran: list[str]  # the objects ninja compiled in the build (through ccache)
    served: list[str]  # of those, what ccache took from the cache
    linked: list[str]  # libraries and executables ninja linked
    generator_outputs: int  # code generator outputs (run before the build, with the real tools)
    config_h_mkl_enabled: str  # AT_MKL_ENABLED() in the ATen/Config.h configure wrote into the source tree
    configure_seconds: float  # setup.py build --cmake-only and the driver's settle, wall
    settle_reconfigures: int
    build_wall_seconds: float
    build_cpu_seconds: float  # ninja and all its children: ccache, the real preprocessor, the stand-in
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # per object: ccache and its children
    outcomes: dict[str, int] = field(default_factory=dict)  # ccache's result counters (ccache_outcomes)

    @property
    def compiled(self) -> list[str]:
        """The objects ccache missed: a real build compiles these."""
        served = set(self.served)
        return [obj for obj in self.objects_ran if obj not in served]


def read_timing_log(lines: Iterable[str]) -> dict[str, float]:
    """``object<TAB>cpu seconds`` per line (the timing launcher's log) -> CPU seconds per object; an object
    compiled twice keeps its last figure, a malformed line (a launcher killed mid-write) is skipped."""
    seconds: dict[str, float] = {}
    for line in lines:
        parts = line.rstrip("\n").split("\t")
        if len(parts) < 2 or not parts[0]:
            continue
        try:
            seconds[parts[0]] = float(parts[1])
        except ValueError:
            continue
    return seconds


# ccache's counters that say what became of one compilation (the others count storage reads and writes,
# or the mode tried first); one of these per block of the stats log (ccache 4.7.5 here, measured)
RESULTS = ("direct_cache_hit", "preprocessed_cache_hit", "cache_miss")


def ccache_outcomes(lines: Iterable[str]) -> dict[str, int]:
    """How many compilations of a stats log ended how: a hit of either mode, a miss, or the counter ccache
    wrote instead (an error such as ``preprocessor_error``: the compile did not go through the cache)."""
    counts: Counter[str] = Counter()
    block: list[str] | None = None
    for line in [*lines, "#"]:
        if line.startswith("#"):
            if block is not None:
                results = [c for c in block if c in RESULTS]
                ignored = ("direct_cache_miss", "preprocessed_cache_miss")
                other = [c for c in block if not c.startswith("local_storage") and c not in ignored]
                counts.update(results or other or ["nothing logged"])
            block = []
        elif block is not None and line.strip():
            block.append(line.strip())
    return dict(sorted(counts.items()))


def mean_cpu(objects: Sequence[str], cpu_seconds: Mapping[str, float]) -> float | None:
    """The mean CPU seconds of the objects that have a figure; None when none has."""
    figures = [cpu_seconds[obj] for obj in objects if obj in cpu_seconds]
    return round(statistics.fmean(figures), 4) if figures else None


def by_target(objects: Iterable[str]) -> dict[str, int]:
    """How many of ``objects`` each CMake target holds (``?`` for a name CMake's layout does not give)."""
    counts = Counter(target_of_object(obj) or "?" for obj in objects)
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def build_figures(build: BlasBuild) -> dict:
    """One build's counts and costs, for the report."""
    compiled = build.compiled
    return {
        "blas": build.blas,
        "config_h_mkl_enabled": build.config_h_mkl_enabled,
        "objects_in_graph": len(build.objects_in_graph),
        "objects_ran": len(build.objects_ran),
        "objects_compiled": len(compiled),
        "objects_from_cache": len(build.served),
        "linked": len(build.linked),
        "generator_outputs": build.generator_outputs,
        "configure_seconds": build.configure_seconds,
        "settle_reconfigures": build.settle_reconfigures,
        "build_wall_seconds": build.build_wall_seconds,
        "build_cpu_seconds": build.build_cpu_seconds,
        "ccache_outcomes": build.outcomes,
        "objects_timed": sum(1 for obj in build.objects_ran if obj in build.cpu_seconds),
        "cpu_seconds_per_miss": mean_cpu(compiled, build.cpu_seconds),
        "cpu_seconds_per_hit": mean_cpu(build.served, build.cpu_seconds),
    }


def switch_figures(first: BlasBuild, second: BlasBuild) -> dict:
    """What the second BLAS compiled (ccache's misses) and why: an object only its graph has, or one both
    graphs have whose preprocessed input its BLAS changes; what it took from the cache; what it linked."""
    first_graph, second_graph = set(first.objects_in_graph), set(second.objects_in_graph)
    compiled = second.compiled
    return {
        "objects_only_first": sorted(first_graph - second_graph),
        "objects_only_second": sorted(second_graph - first_graph),
        "second_compiled": compiled,
        "second_compiled_in_both_graphs": [obj for obj in compiled if obj in first_graph],
        "second_compiled_by_target": by_target(compiled),
        "second_served": len(second.served),
        "second_linked": second.linked,
        "hit_share": round(len(second.served) / len(second.objects_ran), 4) if second.objects_ran else None,
    }


@dataclass(frozen=True)
class Assumptions:
    """The model's inputs that this benchmark does not measure, each named (docs/records say where each
    comes from)."""

    cores: int = 16  # conda-forge's Linux runners for pytorch
    compile_cpu_seconds: float = REAL_COMPILE_CPU_SECONDS  # per real compile (the yardstick)
    later_pythons: int = 4  # Pythons after pass 1's in a CPU job (the recipe's 5 Pythons)
    python_linked_objects: int = 154  # what each later Python's pass compiles (the 2026-11-25 record)
    link_seconds: float = 0.0  # one BLAS's links, wall: not measured (the stand-in links nothing)
    test_seconds: float = 0.0  # one BLAS's package tests, wall: not measured here


def model(first: Mapping, second: Mapping, python_objects_compiled: int, given: Assumptions) -> dict:
    """Wall seconds of one merged job (both BLAS one after the other on one runner) against two separate
    jobs (one BLAS each, in parallel on two runners), and the runner time of each, from two builds'
    ``build_figures`` (so a report can be modelled again with other assumptions).

    Per BLAS in a job: configure (measured here, serial), compile CPU spread over ``cores`` (perfect
    scaling assumed), links and tests (given). A compile through ccache costs the yardstick plus ccache's
    miss overhead (measured: the first build's CPU per miss, the compile faked); a hit costs the second
    build's measured CPU per hit. In the merged job the second BLAS's later-Python passes compile only
    ``python_objects_compiled`` of the Python-linked objects (those among its misses) and take the rest
    from the cache; a separate job compiles them all, as the first BLAS does."""
    miss_overhead = first["cpu_seconds_per_miss"] or 0.0
    hit = second["cpu_seconds_per_hit"] or 0.0
    per_compile = given.compile_cpu_seconds + miss_overhead
    pythons_cpu = given.later_pythons * given.python_linked_objects * per_compile

    def job_seconds(build: Mapping, compile_cpu: float) -> float:
        return (
            build["configure_seconds"] + compile_cpu / given.cores + given.link_seconds + given.test_seconds
        )

    first_cpu = first["objects_in_graph"] * per_compile + pythons_cpu
    separate_second_cpu = second["objects_in_graph"] * per_compile + pythons_cpu
    python_hits = given.python_linked_objects - python_objects_compiled
    merged_second_cpu = (
        second["objects_compiled"] * per_compile
        + second["objects_from_cache"] * hit
        + given.later_pythons * (python_objects_compiled * per_compile + python_hits * hit)
    )
    first_job = job_seconds(first, first_cpu)
    separate_second = job_seconds(second, separate_second_cpu)
    merged_second = job_seconds(second, merged_second_cpu)
    return {
        "assumptions": asdict(given),
        "cpu_seconds_per_hit": hit,
        "ccache_cpu_seconds_per_miss_beside_the_compile": miss_overhead,
        "python_objects_compiled_per_later_python": python_objects_compiled,
        "compile_cpu_seconds": {
            "first_blas": round(first_cpu),
            "second_blas_separate_job": round(separate_second_cpu),
            "second_blas_in_merged_job": round(merged_second_cpu),
        },
        "second_blas_compile_share": round(merged_second_cpu / separate_second_cpu, 4),
        "wall_seconds": {
            "separate_jobs": round(max(first_job, separate_second)),
            "merged_job": round(first_job + merged_second),
        },
        "runner_seconds": {
            "separate_jobs": round(first_job + separate_second),
            "merged_job": round(first_job + merged_second),
        },
    }


def python_objects_compiled(switch: Mapping, python_targets: Iterable[str]) -> int:
    """The second BLAS's misses in the Python-linked targets: what each later Python's pass recompiles."""
    targets = set(python_targets)
    return sum(1 for obj in switch["second_compiled"] if target_of_object(obj) in targets)


# What GCC's #pragma once leaves of a generated ``ops/*_native.h`` stub that declares nothing (preprocessed
# with -P): 2.6.0's torchgen writes ten byte-identical ones (md5sum here), and GCC 12 takes two files with the
# same content, size and modification time (seconds) for one, so which stubs an object's preprocessed input
# holds depends on when codegen wrote them (measured with two such headers and `touch`).
STUB_LINES = frozenset({"namespace at {", "namespace native {", "}"})


def classify_difference(first: Iterable[str], second: Iterable[str]) -> tuple[str, list[str]]:
    """Why two preprocessed inputs (``-E -P``) of one object differ: ``same lines`` (none more often in
    one than in the other); ``pragma once`` when
    the only lines one has more of than the other are empty stubs' (STUB_LINES); else ``content``, with up
    to 5 of the lines that differ (each prefixed by the side that has it)."""

    def lines(text: Iterable[str]) -> Counter[str]:
        return Counter(line.strip() for line in text if line.strip())

    left, right = lines(first), lines(second)
    only = [f"- {line}" for line in left - right] + [f"+ {line}" for line in right - left]
    if not only:
        return "same lines", []
    if all(line[2:] in STUB_LINES for line in only):
        return "pragma once", []
    return "content", [line for line in only if line[2:] not in STUB_LINES][:5]
