"""A real conda builder builds the recipe, offline, for one linux-64 .ci_support configuration, against the
upstream stand-in, from the local channel (local_channel.py): py-rattler-build builds recipe-v1/recipe.yaml
(the default), or the real conda-build named by ``--conda-tools``/``$CONDA_TOOLS`` builds recipe/meta.yaml
(``--builder conda-build``, real_build_conda.py); then py-rattler solves and installs the metapackage from
the built packages + that channel into a fresh prefix, where ``import torch`` (the stand-in) must work and
CMake must find Torch.

    python -m feedstock_tools real-build                       # linux-64's CPU job (both BLAS), 2 Pythons
    python -m feedstock_tools real-build 'linux_64_*12.9*'     # linux-64's CUDA 12.9 job
    python -m feedstock_tools real-build --python all          # every Python of the configuration here
    python -m feedstock_tools real-build --builder conda-build --compare     # meta.yaml, then both compared

What differs from a conda-forge build, and why: the recipe's tarball source is replaced by the stand-in's
path (its patches are for the real tarball); ``build_recipes`` is py-rattler-build's entry point that builds a
recipe's outputs in one build directory as the ``rattler-build`` command does (its per-variant
``run_build`` gives every output its own directory, and each then runs the staging output again: measured
4 staging runs for 2 outputs x 2 Pythons with 0.73.0); the packages' own tests run, less the commands
that need real PyTorch (``TESTS_THAT_NEED_REAL_PYTORCH``, printed with their reasons); every build has a
package cache of its own. Either builder runs in a process group of its own (build_watch.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from feedstock_tools.common import interruption, user_cache
from feedstock_tools.common.config_selector import resolve_one
from feedstock_tools.common.configuration import Configuration, read_configuration, version_key
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.feedstock import Feedstock
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.common.run_lock import RunLock
from feedstock_tools.conda import rattler_render
from feedstock_tools.conda.yaml_load import safe_load
from feedstock_tools.proofs.builders import local_channel, package_diff, real_build_conda
from feedstock_tools.proofs.builders.build_watch import BuildWatch
from feedstock_tools.proofs.rehearsal import compile_work
from feedstock_tools.proofs.rehearsal.compile_work import WorkRatio
from feedstock_tools.proofs.solve.solve_check import Machine, machine_of, virtual_packages
from megabuild import atomic_file, compiler_cache, package_files, python_target

STANDIN = REPO_ROOT / "tests" / "upstream_standin"
BUILDERS = ("rattler-build", "conda-build")
WORK_DIRS = {"rattler-build": REPO_ROOT / ".rattler-build", "conda-build": REPO_ROOT / ".conda-build"}
DEFAULT_CONFIG = "linux_64_*cuda_compiler_versionNone*"
CUDA_CONFIG = "linux_64_*cuda_compiler_version12.9*"
# rattler-build empties the subdirectories beside its work directory between builds, so the driver refuses to
# keep its compiler cache there (megabuild/compiler_cache.py): a build names one in its own work directory.
# conda-build keeps the driver's own place ($SRC_DIR/..), the one a CI job uses.
COMPILER_CACHE_DIR = "compiler-cache"
STRICT_VARIABLE = "MEGABUILD_STRICT"
# The channels are kept beside the rehearsal's venv templates (a cache shared by checkouts, flock-protected)
DEFAULT_CACHE = user_cache.rehearsal_cache() / "local-channel"
V1_DIR = REPO_ROOT / "recipe-v1"
# recipe/ entries the v1 recipe reaches as ../recipe/... for the build and the packages' tests (the patches
# are for the real tarball only)
RECIPE_ENTRIES = ("build.sh", "bld.bat", "megabuild", "tests", "cmake_test")
# The package tests' commands that need real PyTorch, which the stand-in does not model: the real build
# leaves out exactly these (each fragment must match a command of that output's tests, or the build
# refuses to start), prints them with the reason, and runs every other test of the recipe unchanged.
# docs/reference/real-build.md lists them.
TESTS_THAT_NEED_REAL_PYTORCH: dict[str, tuple[tuple[str, str], ...]] = {
    package_files.LIBTORCH: (
        ("caffe2_nvrtc", "the stand-in builds no caffe2_nvrtc (the CUDA wheel's torch/lib has one)"),
        ("cmake_test_build", "recipe/cmake_test computes with tensors and autograd (ATen's API)"),
    ),
    package_files.PYTORCH: (
        ("check_torch_config.py", "torch.__config__.show() (the build's BLAS_INFO) is not modelled"),
        ("check_build_features.py", "complex BLAS dots and torch.backends are real PyTorch"),
        ("check_cuda_extension.py", "torch.utils.cpp_extension builds a CUDA kernel"),
        ("check_cuda_arch_list.py", "torch.cuda.get_arch_list() and the GPUs' kernels are real PyTorch"),
        ("cmake_test_build", "recipe/cmake_test computes with tensors and autograd (ATen's API)"),
        ("run_upstream_tests.py", "upstream's own test suite"),
    ),
}
# The driver's per-pass table (megabuild/report.py `table`): "<pass>  <targets>  <objects>  <seconds>"


@dataclass
class BuildOutcome:
    config: str
    channel: Path
    channel_seconds: float
    channel_bytes: int
    build_seconds: float
    packages: list[Path]
    # every output's own pass, in the builder's order, as the report wrapper kept it (read_reports)
    passes: list[PassReport] = field(default_factory=list)
    log: Path | None = None
    skipped_tests: list[SkippedTest] = field(default_factory=list)  # left out of the packages' tests
    package_cache: Path | None = None  # the build's own package cache (run_build)
    builder: str = "rattler-build"


# ---- what the channel must hold ----------------------------------------------------------------------


def _requirement_lists(stage1: Mapping[str, Any]) -> list[list[Any]]:
    lists = []
    for section in [stage1.get("requirements", {})] + [
        c.get("requirements", {}) for c in stage1.get("staging_caches", [])
    ]:
        lists += [section.get(key, []) for key in ("build", "host", "run")]
    for test in stage1.get("tests", []):
        lists += [test.get("requirements", {}).get(key, []) for key in ("build", "run")]
    return lists


def channel_plan(
    outputs: Sequence[rattler_render.V1Output], config: Configuration, pythons: Sequence[str] | None = None
) -> local_channel.ChannelPlan:
    """Every package name the rendered outputs need, with their specs, the configuration's pins (a bare
    name that is a variant key gets the variant's value, with ``-`` read as ``_``), the compiler packages
    and the Pythons (those whose ``3.X`` is in ``pythons``; all without it)."""
    built = {o.name for o in outputs}
    needs: dict[str, set[str]] = {}
    for output in outputs:
        for specs in _requirement_lists(output.recipe):
            for spec in specs:
                if not isinstance(spec, str):
                    continue  # pin_subpackage: one of the outputs themselves
                name = spec.split()[0]
                if name not in built:
                    needs.setdefault(name, set()).add(spec)
    pins = {}
    for name, specs in needs.items():
        value = config.first(name.replace("-", "_"))
        if value and name != "python":
            pins[name] = value.split()[0]
            specs.add(f"{name} {value}" if " " in value else name)
    subdir = config.target_platform
    compilers = {
        lang: f"{compiler}_{subdir}"
        for lang in ("c", "cxx")
        if (compiler := config.first(f"{lang}_compiler"))
    }
    stdlib = config.first("c_stdlib")
    return local_channel.ChannelPlan(
        needs={k: tuple(sorted(v)) for k, v in needs.items()},
        compilers=compilers,
        stdlib=f"{stdlib}_{subdir}" if stdlib else None,
        pins=pins,
        pythons={
            python.version: python.build or "*"
            for python in config.pythons
            if pythons is None or python.version in pythons
        },
        standin=STANDIN,
    )


# ---- the build ---------------------------------------------------------------------------------------


# Measurement only: the copy's build.sh runs the recipe's own build.sh, then keeps the driver's per-pass
# report (build/megabuild-report.json, from build/.ninja_log), the ninja log of this output, pass 1's saved
# state (the BLAS of its work directory) and ninja's compile database (each object's source): every output
# starts from a fresh copy of the staging output's work directory, and rattler-build keeps only the last.
REPORT_WRAPPER = """#!/usr/bin/env bash
# written by `python -m feedstock_tools real-build`: the recipe's build.sh, then a copy of the pass's report
set -euo pipefail
bash "${{RECIPE_DIR}}/build.recipe.sh" "$@"
stamp="$(date +%s%N)"
reports={reports}
cp "${{SRC_DIR}}/build/megabuild-report.json" "${{reports}}/${{stamp}}.json"
cp "${{SRC_DIR}}/build/.ninja_log" "${{reports}}/${{stamp}}.ninja_log"
cp "${{SRC_DIR}}/build/megabuild/pass1.json" "${{reports}}/${{stamp}}.pass1"
ninja -C "${{SRC_DIR}}/build" -t compdb > "${{reports}}/${{stamp}}.compdb"
"""


@dataclass(frozen=True)
class SkippedTest:
    output: str
    command: str
    reason: str


def _without(items: Any, fragment: str, dropped: list[str]) -> Any:
    """A test's script (a command, a list, an ``if``/``then``/``else`` item) without the commands that
    contain ``fragment``; None when nothing is left."""
    if isinstance(items, str) and fragment in items:
        dropped.append(items)
        return None
    if isinstance(items, list):
        kept = [k for k in (_without(i, fragment, dropped) for i in items) if k is not None]
        return kept or None
    if isinstance(items, dict) and "if" in items:
        then = _without(items.get("then"), fragment, dropped)
        other = _without(items.get("else"), fragment, dropped)
        if then is None and other is None:
            return None
        if then is None:
            return {"if": f"not ({items['if']})", "then": other}
        return {"if": items["if"], "then": then, **({"else": other} if other is not None else {})}
    return items


def leave_out_tests(
    recipe: dict[str, Any], skips: Mapping[str, Sequence[tuple[str, str]]]
) -> list[SkippedTest]:
    """Removes from ``recipe`` (a loaded v1 recipe) the test commands ``skips`` names per output; a fragment
    that matches no command is a ToolError (the list would be stale)."""
    outputs = {o.get("package", {}).get("name"): o for o in recipe.get("outputs", [])}
    skipped = []
    for name, fragments in skips.items():
        if name not in outputs:
            raise ToolError(f"real-build: the recipe has no output {name} whose tests to leave out")
        for fragment, reason in fragments:
            dropped: list[str] = []
            tests = []
            for test in outputs[name].get("tests", []):
                script = _without(test.get("script"), fragment, dropped)
                if "script" not in test:
                    tests.append(test)
                elif script is not None:
                    tests.append({**test, "script": script})
            if not dropped:
                raise ToolError(
                    f"real-build: no test command of {name} contains {fragment!r}; "
                    "remove it from real_build.TESTS_THAT_NEED_REAL_PYTORCH"
                )
            outputs[name]["tests"] = tests
            skipped += [SkippedTest(name, command, reason) for command in dropped]
    return skipped


def prepare_recipe(
    v1_dir: Path,
    destination: Path,
    source: Path,
    reports: Path | None = None,
    skipped: list[SkippedTest] | None = None,
) -> Path:
    """A copy of the v1 recipe and of the recipe/ files it reaches as ``../recipe/...`` (the same layout
    under ``destination``), whose tarball source is ``source`` (a local path): everything else as committed
    (with ``reports``, build.sh also keeps each pass's report there), less the test commands that need real
    PyTorch (``TESTS_THAT_NEED_REAL_PYTORCH``; appended to ``skipped``)."""
    shared, v1 = destination / "recipe", destination / v1_dir.name
    shared.mkdir(parents=True)
    v1.mkdir()
    for entry in RECIPE_ENTRIES:
        path = v1_dir.parent / "recipe" / entry
        if path.is_dir():
            shutil.copytree(path, shared / entry, ignore=shutil.ignore_patterns("__pycache__"))
        elif path.exists():
            shutil.copy2(path, shared / entry)
    if reports is not None:
        reports.mkdir(parents=True, exist_ok=True)
        wrap_build_script(shared, reports)
    recipe = safe_load((v1_dir / "recipe.yaml").read_text())
    # the tarball (the entry with a url) becomes the stand-in; the path sources (recipe/'s test files) stay
    sources = recipe["source"] if isinstance(recipe["source"], list) else [recipe["source"]]
    recipe["source"] = [{"path": str(source)} if "url" in s else s for s in sources]
    # the stand-in is not PyTorch: none of PyTorch's license files, which rattler-build requires to exist
    recipe.get("about", {}).pop("license_file", None)
    left_out = leave_out_tests(recipe, TESTS_THAT_NEED_REAL_PYTORCH)
    if skipped is not None:
        skipped += left_out
    atomic_file.write_text(v1 / "recipe.yaml", yaml.safe_dump(recipe, sort_keys=False, width=200))
    return v1 / "recipe.yaml"


def run_build(
    config: Configuration,
    work_dir: Path,
    cache_dir: Path,
    pythons: Sequence[str] | None,
    *,
    builder: str = "rattler-build",
    v1_dir: Path = V1_DIR,
    test: str = "native",
    conda_tools: Path | None = None,
    hash_seed: int | None = None,
    progress: Callable[[str], None] = print,
    locked: bool = False,
) -> BuildOutcome:
    """Every output of ``config`` (restricted to ``pythons``) built by ``builder`` from the local
    channel against the stand-in, in a process group of its own (an interruption stops it at once), with
    progress all along. ``work_dir`` is emptied first, so it is built under its run lock
    (:func:`work_dir_lock`), taken here before anything else is done, unless ``locked`` (the caller holds
    it for longer: real-build installs into the work directory after the build)."""
    check_buildable(config)
    tools = real_build_conda.find_conda_tools(conda_tools) if builder == "conda-build" else None
    with contextlib.nullcontext() if locked else work_dir_lock(work_dir):
        return _build(
            config, work_dir, cache_dir, pythons,
            builder=builder, v1_dir=v1_dir, test=test, tools=tools, hash_seed=hash_seed, progress=progress,
        )  # fmt: skip


def work_dir_lock(work_dir: Path) -> RunLock:
    """The lock of a real-build work directory, beside it (as the rehearsal's): a second real-build of the
    same directory is refused in one line while this one runs, instead of removing it under the first."""
    return RunLock(work_dir.parent / f".{work_dir.name}.lock", f"real-build work directory {work_dir}")


def _build(
    config: Configuration,
    work_dir: Path,
    cache_dir: Path,
    pythons: Sequence[str] | None,
    *,
    builder: str,
    v1_dir: Path,
    test: str,
    tools: real_build_conda.CondaTools | None,
    hash_seed: int | None,
    progress: Callable[[str], None],
) -> BuildOutcome:
    subdir = config.target_platform
    chosen = [p.version for p in config.pythons if pythons is None or p.version in pythons]
    progress(f"real-build of {config.name} with {builder}, Python {', '.join(chosen)}: {work_dir}")
    if work_dir.exists():
        shutil.rmtree(work_dir)
    work_dir.mkdir(parents=True)
    reports = work_dir / "reports"
    reports.mkdir()
    progress("[1/3] the local channel (made once per set of requirements, then kept in the cache)")
    started = time.monotonic()
    outputs = rattler_render.render(v1_dir / "recipe.yaml", config, pythons)
    channel = local_channel.make_channel(
        channel_plan(outputs, config, pythons), cache_dir, work_dir / "channel.log", progress
    )
    channel_seconds = time.monotonic() - started
    progress(
        f"      {channel} ({local_channel.channel_size(channel) / 1e6:.1f} MB) in {channel_seconds:.1f} s"
    )
    variants = work_dir / "variants.yaml"
    atomic_file.write_text(variants, yaml.safe_dump(rattler_render.variant_config(config, pythons)))
    cuda = config.cuda
    # libtorch's run requirement __cuda reaches pytorch's host through pin_subpackage: the solver needs the
    # virtual package, which a GPU runner has (the linux jobs run on one, conda_build_config.yaml) and this
    # machine lacks; conda's override variable plays the driver, as docs/reference/recipe.md's
    # CONDA_OVERRIDE_CUDA
    env = {"CONDA_OVERRIDE_CUDA": os.environ.get("CONDA_OVERRIDE_CUDA", cuda)} if cuda is not None else {}
    # the compiler cache: the driver's own place under conda-build, this build's under rattler-build
    # (COMPILER_CACHE_DIR); never the caller's, whose other builds would count as this one's hits
    caller = {k: v for k, v in os.environ.items() if k != compiler_cache.LOCATION_VARIABLE}
    if tools is None:
        env[compiler_cache.LOCATION_VARIABLE] = str(work_dir / COMPILER_CACHE_DIR)
    # a proof: a pass that compiles or links outside its targets fails the build (the driver's --strict),
    # unless the caller says otherwise (the recipe passes MEGABUILD_STRICT through script_env)
    env.setdefault(STRICT_VARIABLE, os.environ.get(STRICT_VARIABLE, "1"))
    skipped: list[SkippedTest] = []
    out_dir = work_dir / "output"
    inputs = BuildInputs(work_dir, channel, variants, subdir, test)
    if tools is None:
        run = rattler_build_run(inputs, v1_dir, skipped)
    else:
        run = conda_build_run(inputs, tools, v1_dir.parent / "recipe", skipped, hash_seed)
    watch = BuildWatch(builder, reports, work_dir / f"{builder}.log", progress, lambda: _script_logs(out_dir))
    progress(f"[2/3] {builder} builds every output (log: {watch.log})")
    started = time.monotonic()
    returncode = watch.run(run.command, {**caller, **env, **run.env}, work_dir)
    build_seconds = time.monotonic() - started
    if returncode != 0:
        raise ToolError(watch.failure(config.path.name, out_dir / subdir))
    passes = read_reports(reports)
    return BuildOutcome(
        config=config.path.name,
        channel=channel,
        channel_seconds=channel_seconds,
        channel_bytes=local_channel.channel_size(channel),
        build_seconds=build_seconds,
        packages=sorted((out_dir / subdir).glob("*.conda")),
        passes=passes,
        log=watch.log,
        skipped_tests=skipped if test != "skip" else [],
        package_cache=run.package_cache,
        builder=builder,
    )


@dataclass(frozen=True)
class BuilderRun:
    """How to start one builder on a prepared recipe copy."""

    command: list[str]
    env: dict[str, str]  # set over the caller's environment
    package_cache: Path  # where the builder extracts packages (install_and_use installs from it too)


@dataclass(frozen=True)
class BuildInputs:
    """What either builder is given: its work directory, the local channel, the variant file."""

    work_dir: Path
    channel: Path
    variants: Path
    subdir: str
    test: str  # rattler-build's test mode: native or skip


def rattler_build_run(inputs: BuildInputs, v1_dir: Path, skipped: list[SkippedTest]) -> BuilderRun:
    """py-rattler-build's ``build_recipes`` on a copy of the v1 recipe (prepare_recipe), in a child."""
    work_dir = inputs.work_dir
    recipe = prepare_recipe(v1_dir, work_dir / "recipes", STANDIN, work_dir / "reports", skipped)
    arguments = {
        "recipes": [str(recipe)],
        "channel": [inputs.channel.as_uri()],
        "variant_config": [str(inputs.variants)],
        "output_dir": str(work_dir / "output"),
        "target_platform": inputs.subdir,
        "test": inputs.test,
        "no_include_recipe": True,
        "package_format": "conda",
    }
    # rattler's package cache is keyed by file name: a package rebuilt here with the same build string as one
    # built before (by any checkout on this machine) was tested from that earlier build's extracted copy in
    # ~/.cache/rattler/cache/pkgs (measured: a libtorch test ran the test commands of a package built five
    # minutes earlier); each build gets a package cache of its own
    cache = work_dir / "rattler-cache"
    # build_recipes is deprecated (see the module docstring)
    command = [sys.executable, "-W", "ignore::DeprecationWarning", "-c", RATTLER_CHILD, json.dumps(arguments)]
    return BuilderRun(command, {"RATTLER_CACHE_DIR": str(cache)}, cache / "pkgs")


def conda_build_run(
    inputs: BuildInputs,
    tools: real_build_conda.CondaTools,
    recipe_dir: Path,
    skipped: list[SkippedTest],
    hash_seed: int | None,
) -> BuilderRun:
    """The real conda-build on a copy of meta.yaml (real_build_conda.prepare_recipe), its package and
    environment directories the build's own."""
    work_dir = inputs.work_dir
    copy, left_out = real_build_conda.prepare_recipe(
        recipe_dir, work_dir / "recipe", STANDIN, TESTS_THAT_NEED_REAL_PYTORCH
    )
    wrap_build_script(copy, work_dir / "reports")
    skipped += [SkippedTest(o.output, o.line, _reason(o.output, o.line)) for o in left_out]
    cache = work_dir / "pkgs"
    env = {"CONDA_PKGS_DIRS": str(cache), "CONDA_ENVS_DIRS": str(work_dir / "envs")}
    if hash_seed is not None:
        env["PYTHONHASHSEED"] = str(hash_seed)
    arguments = [
        str(copy), "-m", str(inputs.variants), "-c", inputs.channel.as_uri(), "--override-channels",
        "--croot", str(work_dir / "croot"), "--output-folder", str(work_dir / "output"),
        "--no-anaconda-upload", "--no-include-recipe", *(["--no-test"] if inputs.test == "skip" else []),
    ]  # fmt: skip
    # the tool set's env.sh sets its own directories and PYTHONHASHSEED: ours are exported after it
    return BuilderRun(tools.invocation(arguments, env), {}, cache)


# py-rattler-build's entry point, run in a child process: in-process it keeps the interpreter from handling
# a signal until its Rust code returns (docs/reference/real-build.md), and its build scripts
# would not get the signal at all
RATTLER_CHILD = (
    "import json, sys\nfrom rattler_build import build_recipes\nbuild_recipes(**json.loads(sys.argv[1]))\n"
)


def default_pythons(config: Configuration) -> list[str]:
    """Pass 1's Python and the newest of the configuration that this machine has: every kind of pytorch
    pass (a new Python, the return to pass 1's) in two outputs."""
    here = [p.version for p in config.pythons if local_channel.prefixes.find_interpreter(p.version)]
    if config.python_min not in here or len(here) < 2:
        raise ToolError(
            f"real-build: {config.name} needs CPython {config.python_min} and one newer of "
            f"{', '.join(p.version for p in config.pythons)} on this machine (pyenv install them)"
        )
    return [config.python_min, max(here, key=version_key)]


def check_buildable(config: Configuration) -> None:
    """Refuses at once a configuration that targets another platform than the one the local channel holds
    packages for (this machine's tools)."""
    target = config.target_platform
    if target != local_channel.SUBDIR:
        raise ToolError(
            f"real-build: {config.name} targets {target}; the local channel holds {local_channel.SUBDIR} "
            f"packages of this machine's tools only: rehearse it instead (python -m feedstock_tools rehearse "
            f"{config.name})"
        )


def _script_logs(out_dir: Path) -> list[Path]:
    """rattler-build's logs of the build scripts, one per work directory, newest last (conda-build's are in
    its own output)."""
    found = [
        *out_dir.glob("bld/*/work/conda_build.log"),
        *out_dir.glob("build_cache/*/work_dir/conda_build.log"),
    ]
    return sorted(found, key=lambda path: path.stat().st_mtime)


def _reason(output: str, line: str) -> str:
    if line.startswith("source_files: "):
        return "the stand-in has none of it (real_build_conda.without_missing_source_files)"
    return next(reason for fragment, reason in TESTS_THAT_NEED_REAL_PYTORCH[output] if fragment in line)


def wrap_build_script(recipe_dir: Path, reports: Path) -> None:
    """build.sh becomes build.recipe.sh, run by a build.sh that keeps each pass's report (REPORT_WRAPPER)."""
    (recipe_dir / "build.sh").rename(recipe_dir / "build.recipe.sh")
    atomic_file.write_text(recipe_dir / "build.sh", REPORT_WRAPPER.format(reports=shlex.quote(str(reports))))


@dataclass(frozen=True)
class PassReport:
    """One output's own megabuild pass, as the report wrapper kept it (REPORT_WRAPPER)."""

    name: str  # the driver's pass name: "1 libtorch-split", "4 pytorch (py3.12)", ...
    blas: str  # the BLAS of its work directory's pass 1
    compiled: list[str]  # objects the compiler compiled (ninja's edges less the compiler cache's hits)
    by_target: dict[str, int]
    sources: Path  # ninja's compile database of its build directory

    @property
    def label(self) -> str:
        return f"{self.name} [{self.blas}]"


def read_reports(reports: Path) -> list[PassReport]:
    """Every output's own pass in the order the builder ran them (the wrapper's stamps are nanoseconds)."""
    kept = []
    for path in sorted(reports.glob("*.json")):
        last = json.loads(path.read_text())["passes"][-1]
        state = json.loads(path.with_suffix(".pass1").read_text())
        kept.append(
            PassReport(
                name=last["pass_name"],
                blas=str(state["blas"]),
                compiled=list(last["objects_compiled"]),
                by_target=dict(last["objects_by_target"]),
                sources=path.with_suffix(".compdb"),
            )
        )
    return kept


def compile_work_ratio(
    kept: Sequence[PassReport], python_linked: Sequence[str], first_python: str
) -> WorkRatio:
    """The build's real compiles against the job's limit (compile_work.py): the first pass 1's objects,
    MAGMA's linalg once, the Python-dependent objects once per pytorch Python but pass 1's (each pytorch
    output starts from its BLAS's pass 1 work directory), and every further BLAS's dependent objects. The
    dependence of each object is the stand-in's declaration, through the first pass 1's compile database."""
    first = next((r for r in kept if r.name.startswith("1 ")), None)
    if first is None:
        raise ToolError("the kept reports hold no pass 1: the build ran no top-level build")
    entries = json.loads(first.sources.read_text())
    build_dir = Path(entries[0]["directory"]) if entries else Path()  # ninja's -C, where it writes objects
    sources = compiler_cache.sources_of(entries, build_dir)
    # the driver's build directory is $SRC_DIR/build (megabuild/conda_env.py)
    depends = compile_work.dependence(sources, build_dir.parent, compile_work.read_declared(STANDIN))
    pythons = {r.name for r in kept if r.name.startswith("4 pytorch")} - {f"4 pytorch (py{first_python})"}
    return compile_work.limit(
        compiled=sum(len(r.compiled) for r in kept),
        pass1_objects=first.compiled,
        python_linked=python_linked,
        depends=depends,
        magma_ran=any("(magma)" in r.name for r in kept),
        extra_pythons=len(pythons),
        extra_blases=len({r.blas for r in kept}) - 1,
    )


# ---- install and use ---------------------------------------------------------------------------------


def install_and_use(
    outcome: BuildOutcome, spec: str, prefix: Path, machine: Machine, python: str | None = None
) -> list[str]:
    """Solve ``spec`` (+ ``python``) from the built packages and the channel on ``machine`` (its subdir and
    virtual packages), install into ``prefix``, then import torch there and build a CMake consumer with
    find_package(Torch); returns what it installed."""
    from rattler import MatchSpec, install, solve

    built_channel = outcome.packages[0].parent.parent
    specs = [spec] + ([f"python {python}.*"] if python else [])

    async def go() -> list[Any]:
        records = await solve(
            [built_channel.as_uri(), outcome.channel.as_uri()],
            [MatchSpec(s) for s in specs],
            platforms=[machine.subdir, "noarch"],
            virtual_packages=virtual_packages(machine),
        )
        await install(records, target_prefix=prefix, cache_dir=outcome.package_cache, show_progress=False)
        return records

    try:
        records = asyncio.run(go())
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ToolError(
            f"the solver refuses {' '.join(specs)} from {built_channel} and {outcome.channel.name} "
            f"(step: install): {first}; the built packages or the local channel lack what it names"
        ) from exc
    python_exe = prefix / "bin" / "python"
    # version, CUDA flag and (CUDA) whether the installed linalg library has MAGMA, through torch._C: they
    # must be the installed pytorch's version, and CUDA and MAGMA exactly when the solver installed a
    # libtorch-cuda-linalg, a MAGMA one
    check = (
        "import json, torch; cuda = torch.cuda.is_compiled(); print(json.dumps([torch.__version__, cuda, "
        "torch.cuda.has_magma() if cuda else None, torch.__file__]))"
    )
    run = subprocess.run([str(python_exe), "-c", check], check=True, capture_output=True, text=True)
    print(run.stdout.strip())
    version, cuda, magma, _ = json.loads(run.stdout.splitlines()[-1])
    linalg = [str(r.build) for r in records if r.name.normalized == package_files.LIBTORCH_CUDA_LINALG]
    expected = (
        next(str(r.version) for r in records if r.name.normalized == package_files.PYTORCH),
        bool(linalg),
        any("_magma_" in build for build in linalg) if linalg else None,
    )
    if (version.split("+")[0], cuda, magma) != expected:
        raise ToolError(
            f"import torch in {prefix} (step: import) reports version, CUDA, MAGMA "
            f"{(version, cuda, magma)}, the installed packages say {expected}; read {prefix}"
        )
    consumer = prefix.parent / f"{prefix.name}-cmake"
    shutil.rmtree(consumer, ignore_errors=True)
    steps = [
        [
            "cmake",
            "-S",
            str(STANDIN / "consumer"),
            "-B",
            str(consumer),
            "-G",
            "Ninja",
            f"-DCMAKE_PREFIX_PATH={prefix}",
        ],
        ["cmake", "--build", str(consumer)],
        [str(consumer / "torch_consumer")],
    ]
    for number, step in enumerate(steps, start=1):
        log = prefix.parent / f"{prefix.name}-cmake-{number}.log"
        status, said = interruption.run_logged(step, Path.cwd(), os.environ, log)
        if status:
            tail = "\n".join(said).strip().splitlines()[-1:] or ["(no output)"]
            raise ToolError(f"the CMake consumer failed in {prefix} at {step[0]} {step[1]}: {tail[0]}")
    return sorted(f"{r.name.normalized}-{r.version}-{r.build}" for r in records)


def metapackage_and_machine(config: Configuration) -> tuple[str, Machine]:
    """The metapackage users install for this configuration and a machine that takes it, solve-check's row
    of the target with a driver of the configuration's CUDA version (proofs/solve/solve_requests.yaml)."""
    machine = machine_of(config.target_platform, config.cuda)
    metapackage = package_files.PYTORCH_GPU if config.cuda is not None else package_files.PYTORCH_CPU
    return metapackage, machine


# ---- command line ------------------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "real-build",
        help="build the recipe for real, offline, from a local channel: rattler-build (recipe-v1/recipe.yaml)"
        " or conda-build (recipe/meta.yaml)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "config",
        nargs="?",
        default=DEFAULT_CONFIG,
        help="a .ci_support configuration: part of its name, a glob or a path (default: %(default)s)",
    )
    parser.add_argument(
        "--builder",
        choices=BUILDERS,
        default=BUILDERS[0],
        help="rattler-build (py-rattler-build, recipe-v1/recipe.yaml; the default) or conda-build (a real "
        "conda-build found with --conda-tools, recipe/meta.yaml)",
    )
    parser.add_argument(
        "--python",
        nargs="+",
        help="the Pythons to build for (3.X), or 'all' (every one of the configuration this machine has); "
        "default: pass 1's and the newest of the configuration this machine has (default_pythons)",
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        help="where the builds go, one directory per configuration (default: .rattler-build or .conda-build)",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=DEFAULT_CACHE,
        help="where the local channels and wheels are kept (default: %(default)s)",
    )
    parser.add_argument("--skip-tests", action="store_true", help="do not run the packages' tests")
    parser.add_argument(
        "--conda-tools",
        type=Path,
        help="conda-build: the offline tool set, a set-up copy of ../shared/tools/conda-tools (default "
        f"${real_build_conda.TOOLS_VARIABLE}; never looked for elsewhere: its env.sh is sourced)",
    )
    parser.add_argument(
        "--hash-seed",
        type=int,
        help="conda-build: its PYTHONHASHSEED, which decides the order of one output's variants "
        "(conda_build/variants.py sets of strings); the tool set's env.sh sets 0",
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="after the build, compare its packages with those the other builder made of the same "
        "configuration in its default work directory (build that one first)",
    )
    parser.set_defaults(func=_main, resume_hint="run the same command again: it starts that build over")


def _say(line: str) -> None:
    print(line, flush=True)


def _main(args: argparse.Namespace) -> int:
    if args.builder != "conda-build" and (args.conda_tools or args.hash_seed is not None):
        raise ToolError("--conda-tools and --hash-seed are conda-build's: add --builder conda-build")
    config = read_configuration(resolve_one(args.config, Feedstock(REPO_ROOT).ci_support))
    pythons = args.python or default_pythons(config)
    if pythons == ["all"]:
        # every Python of the configuration that this machine has (the rehearsal skips the others too)
        every = [python.version for python in config.pythons]
        pythons = [minor for minor in every if local_channel.prefixes.find_interpreter(minor)]
        for minor in sorted(set(every) - set(pythons)):
            _say(f"python {minor}: no CPython {minor} on this machine, its pytorch output is not built")
    name = config.name
    work_root = args.work_dir or WORK_DIRS[args.builder]
    # a refusal is one line with nothing written, not even the lock
    check_buildable(config)
    if args.builder == "conda-build":
        real_build_conda.find_conda_tools(args.conda_tools)
    # held to the end, taken before anything else: the build empties the work directory, the install step
    # writes into it
    with work_dir_lock(work_root / name):
        started = time.monotonic()
        outcome = run_build(
            config,
            work_root / name,
            args.cache_dir,
            pythons,
            builder=args.builder,
            test="skip" if args.skip_tests else "native",
            conda_tools=args.conda_tools,
            hash_seed=args.hash_seed,
            progress=_say,
            locked=True,
        )
        _say(f"built {len(outcome.packages)} packages in {outcome.build_seconds:.1f} s:")
        for package in outcome.packages:
            _say(f"  {package.name}")
        for left_out in outcome.skipped_tests:
            _say(f"  test of {left_out.output} left out: {left_out.command!r}: {left_out.reason}")
        _say(f"{args.builder}'s order of the passes:")
        for kept in outcome.passes:
            _say(f"  pass {kept.label}: {sum(kept.by_target.values())} objects {kept.by_target}")
        linked = python_target.python_linked_targets("linux-64")
        _say(f"compile-work ratio {compile_work_ratio(outcome.passes, linked, config.python_min).formula()}")
        meta, machine = metapackage_and_machine(config)
        _say(
            f"[3/3] {meta} installed by py-rattler's solver for each Python: import torch, the CMake consumer"
        )
        for minor in sorted(python.version for python in config.pythons if python.version in pythons):
            installed = install_and_use(outcome, meta, work_root / name / f"prefix-{minor}", machine, minor)
            _say(f"python {minor}: import torch and the CMake consumer work with " + ", ".join(installed))
        if args.compare:
            other = next(b for b in BUILDERS if b != args.builder)
            theirs = sorted((WORK_DIRS[other] / name / "output" / local_channel.SUBDIR).glob("*.conda"))
            if not theirs:
                raise ToolError(
                    f"--compare: no {other} packages of {name} in {WORK_DIRS[other]}: build them first"
                )
            _say(f"the packages of {args.builder} ({len(outcome.packages)}) and {other} ({len(theirs)}):")
            for line in package_diff.describe(
                package_diff.compare(outcome.packages, theirs), args.builder, other
            ):
                _say(f"  {line}")
        _say(f"done in {time.monotonic() - started:.0f} s")
        return 0
