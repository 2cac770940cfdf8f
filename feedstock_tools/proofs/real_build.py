"""A real conda builder builds the recipe: py-rattler-build builds recipe-v1/recipe.yaml offline, for one
.ci_support configuration, against the upstream stand-in, from the local channel (local_channel.py); then
py-rattler solves and installs the metapackage from the built packages + that channel into a fresh prefix,
where ``import torch`` (the stand-in) must work and CMake must find Torch.

    python -m feedstock_tools real-build                       # linux-64 CPU generic, Python 3.10 + 3.12
    python -m feedstock_tools real-build 'linux_64_blas_implgeneric*12.9*'   # a linux-64 CUDA one
    python -m feedstock_tools real-build --python all          # every Python of the configuration here

What differs from a conda-forge build, and why: the recipe's tarball source is replaced by the stand-in's
path (its patches are for the real tarball); ``build_recipes`` is py-rattler-build's entry point that builds a
recipe's outputs in one build directory as the ``rattler-build`` command does (its per-variant
``run_build`` gives every output its own directory, and each then runs the staging output again: measured
4 staging runs for 2 outputs x 2 Pythons with 0.73.0); the packages' own tests run, less the commands
that need real PyTorch (``TESTS_THAT_NEED_REAL_PYTORCH``, printed with their reasons); every build has a
rattler package cache of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from feedstock_tools.common.config_selector import resolve_one
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.recipe_imports import REPO_ROOT, import_megabuild
from feedstock_tools.conda import rattler_render
from feedstock_tools.proofs import local_channel
from feedstock_tools.proofs.solve_check import Machine, machine_of, virtual_packages

STANDIN = REPO_ROOT / "tests" / "upstream_standin"
DEFAULT_PYTHONS = ("3.10", "3.12")
DEFAULT_CONFIG = "linux_64_blas_implgeneric*cuda_compiler_versionNone*"
CUDA_CONFIG = "linux_64_blas_implgeneric*cuda_compiler_version12.9*"
# The channels are kept beside the rehearsal's venv templates (a cache shared by checkouts, flock-protected)
DEFAULT_CACHE = REPO_ROOT / ".rehearsal" / ".cache" / "local-channel"
V1_DIR = REPO_ROOT / "recipe-v1"
# recipe/ entries the v1 recipe reaches as ../recipe/... for the build and the packages' tests (the patches
# are for the real tarball only)
RECIPE_ENTRIES = ("build.sh", "bld.bat", "megabuild", "tests", "cmake_test")
# The package tests' commands that need real PyTorch, which the stand-in does not model: the real build
# leaves out exactly these (each fragment must match a command of that output's tests, or the build
# refuses to start), prints them with the reason, and runs every other test of the recipe unchanged.
# docs/rattler-build.md lists them.
TESTS_THAT_NEED_REAL_PYTORCH: dict[str, tuple[tuple[str, str], ...]] = {
    "libtorch": (
        ("libcaffe2_nvrtc", "the stand-in builds no caffe2_nvrtc (the CUDA wheel's torch/lib has one)"),
        ("cmake_test_build", "recipe/cmake_test computes with tensors and autograd (ATen's API)"),
    ),
    "pytorch": (
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
    passes: dict[str, int] = field(default_factory=dict)  # pass name -> objects compiled
    log: Path | None = None
    skipped_tests: list[SkippedTest] = field(default_factory=list)  # left out of the packages' tests
    package_cache: Path | None = None  # the build's own rattler package cache (run_build)


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
    outputs: Sequence[rattler_render.V1Output], variant: Mapping[str, Any]
) -> local_channel.ChannelPlan:
    """Every package name the rendered outputs need, with their specs, the variant's pins (a bare name
    that is a variant key gets the variant's value, with ``-`` read as ``_``), the compiler packages and
    the Pythons."""
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
        value = variant.get(name.replace("-", "_"))
        if value and name != "python":
            pins[name] = str(value[0]).split()[0]
            specs.add(f"{name} {value[0]}" if " " in str(value[0]) else name)
    subdir = variant["target_platform"][0]
    compilers = {
        lang: f"{variant[f'{lang}_compiler'][0]}_{subdir}"
        for lang in ("c", "cxx")
        if f"{lang}_compiler" in variant
    }
    pythons = {}
    for value in variant.get("python", []):
        version, _, glob = str(value).partition(" ")
        pythons[version.removesuffix(".*")] = glob or "*"
    return local_channel.ChannelPlan(
        needs={k: tuple(sorted(v)) for k, v in needs.items()},
        compilers=compilers,
        stdlib=f"{variant['c_stdlib'][0]}_{subdir}" if "c_stdlib" in variant else None,
        pins=pins,
        pythons=pythons,
        standin=STANDIN,
    )


# ---- the build ---------------------------------------------------------------------------------------


# Measurement only: the copy's build.sh runs the recipe's own build.sh, then keeps the driver's per-pass
# report (build/megabuild-report.json, from build/.ninja_log) and the ninja log of this output: every output
# starts from a fresh copy of the staging output's work directory, and rattler-build keeps only the last.
REPORT_WRAPPER = """#!/usr/bin/env bash
# written by `python -m feedstock_tools real-build`: the recipe's build.sh, then a copy of the pass's report
set -euo pipefail
bash "${{RECIPE_DIR}}/build.recipe.sh" "$@"
stamp="$(date +%s%N)"
cp "${{SRC_DIR}}/build/megabuild-report.json" "{reports}/${{stamp}}.json"
cp "${{SRC_DIR}}/build/.ninja_log" "{reports}/${{stamp}}.ninja_log"
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
        (shared / "build.sh").rename(shared / "build.recipe.sh")
        (shared / "build.sh").write_text(REPORT_WRAPPER.format(reports=reports))
    recipe = yaml.safe_load((v1_dir / "recipe.yaml").read_text())
    # the tarball (the entry with a url) becomes the stand-in; the path sources (recipe/'s test files) stay
    sources = recipe["source"] if isinstance(recipe["source"], list) else [recipe["source"]]
    recipe["source"] = [{"path": str(source)} if "url" in s else s for s in sources]
    # the stand-in is not PyTorch: none of PyTorch's license files, which rattler-build requires to exist
    recipe.get("about", {}).pop("license_file", None)
    left_out = leave_out_tests(recipe, TESTS_THAT_NEED_REAL_PYTORCH)
    if skipped is not None:
        skipped += left_out
    (v1 / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False, width=200))
    return v1 / "recipe.yaml"


def run_build(
    ci_support: Path,
    work_dir: Path,
    cache_dir: Path,
    pythons: Sequence[str] | None,
    *,
    v1_dir: Path = V1_DIR,
    test: str = "native",
) -> BuildOutcome:
    from rattler_build import build_recipes

    if work_dir.exists():
        shutil.rmtree(work_dir)
    work_dir.mkdir(parents=True)
    log = work_dir / "channel.log"
    reports = work_dir / "reports"
    skipped: list[SkippedTest] = []
    recipe = prepare_recipe(v1_dir, work_dir / "recipes", STANDIN, reports, skipped)
    outputs = rattler_render.render(recipe, ci_support, pythons)
    config = rattler_render.variant_config(ci_support, pythons)
    started = time.monotonic()
    channel = local_channel.make_channel(channel_plan(outputs, config), cache_dir, log)
    channel_seconds = time.monotonic() - started
    variants = work_dir / "variants.yaml"
    variants.write_text(yaml.safe_dump(config))
    out_dir = work_dir / "output"
    started = time.monotonic()
    cuda = config.get("cuda_compiler_version", ["None"])[0]
    # libtorch's run requirement __cuda reaches pytorch's host through pin_subpackage: the solver needs the
    # virtual package, which a GPU runner has (the linux jobs run on one, conda_build_config.yaml) and this
    # machine lacks; conda's override variable plays the driver, as docs/recipe.md's CONDA_OVERRIDE_CUDA
    override = (
        {"CONDA_OVERRIDE_CUDA": cuda} if cuda != "None" and "CONDA_OVERRIDE_CUDA" not in os.environ else {}
    )
    # rattler's package cache is keyed by file name: a package rebuilt here with the same build string as
    # one built before (by any checkout on this machine) was tested from that earlier build's extracted
    # copy in ~/.cache/rattler/cache/pkgs (measured: a libtorch test ran the test commands of a package
    # built five minutes earlier); each build gets a package cache of its own
    override["RATTLER_CACHE_DIR"] = str(work_dir / "rattler-cache")
    with warnings.catch_warnings(), _environment(override):
        warnings.simplefilter("ignore", DeprecationWarning)  # build_recipes: see the module docstring
        try:
            build_recipes(
                [recipe],
                channel=[channel.as_uri()],
                variant_config=[str(variants)],
                output_dir=out_dir,
                target_platform=config["target_platform"][0],
                test=test,
                no_include_recipe=True,
                package_format="conda",
            )
        except Exception as exc:  # py-rattler-build's errors carry rattler-build's message
            raise ToolError(
                build_failure(exc, out_dir, config["target_platform"][0], ci_support.name)
            ) from exc
    build_seconds = time.monotonic() - started
    build_log = out_dir / "rattler-build-log.txt"
    return BuildOutcome(
        config=ci_support.name,
        channel=channel,
        channel_seconds=channel_seconds,
        channel_bytes=local_channel.channel_size(channel),
        build_seconds=build_seconds,
        packages=sorted((out_dir / config["target_platform"][0]).glob("*.conda")),
        passes=passes_from_reports(reports),
        log=build_log,
        skipped_tests=skipped if test != "skip" else [],
        package_cache=work_dir / "rattler-cache" / "pkgs",
    )


def build_failure(exc: BaseException, out_dir: Path, subdir: str, config: str) -> str:
    """One line: which output failed (the last work directory's log names it), rattler-build's last
    message, the log to read. The packages already built are removed: nothing half-made is left."""
    text = str(exc).strip()
    last = text.splitlines()[-1] if text else type(exc).__name__
    logs = sorted(
        [
            *out_dir.glob("bld/*/work/conda_build.log"),
            *out_dir.glob("build_cache/*/work_dir/conda_build.log"),
        ],
        key=lambda p: p.stat().st_mtime,
    )
    output = "?"
    if logs:
        found = re.findall(r"PKG_NAME=(\S+)", logs[-1].read_text(errors="replace"))
        output = found[-1] if found else output
    shutil.rmtree(out_dir / subdir, ignore_errors=True)
    where = logs[-1] if logs else out_dir
    return (
        f"rattler-build failed on output {output} of {config} (step: build): {last}; "
        f"read {where}, fix the recipe or the driver and run again"
    )


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def passes_from_reports(reports: Path) -> dict[str, dict[str, int]]:
    """Objects compiled per target in each megabuild pass, as the driver read them from that output's
    build/.ninja_log inside rattler-build (each report's last pass is the output's own)."""
    passes: dict[str, dict[str, int]] = {}
    for path in sorted(reports.glob("*.json")):
        last = json.loads(path.read_text())["passes"][-1]
        passes[last["pass_name"]] = dict(last["objects_by_target"])
    return passes


def compile_work_ratio(
    passes: Mapping[str, Mapping[str, int]], python_linked: Sequence[str], first_python: str
) -> tuple[int, int]:
    """(objects compiled over all passes, the minimum): pass 1's objects, torch_cuda_linalg's once more
    for the MAGMA pass, and the Python-linked targets' once for every pytorch pass whose Python is not
    pass 1's (each pytorch output starts from pass 1's work directory)."""
    first = next(v for k, v in passes.items() if k.startswith("1 "))
    minimum = sum(first.values())
    for name in passes:
        if "(magma)" in name:
            minimum += first.get("torch_cuda_linalg", 0)
        elif name.startswith("4 pytorch") and f"(py{first_python})" not in name:
            minimum += sum(first.get(t, 0) for t in python_linked)
    return sum(sum(v.values()) for v in passes.values()), minimum


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
    linalg = [str(r.build) for r in records if r.name.normalized == "libtorch-cuda-linalg"]
    expected = (
        next(str(r.version) for r in records if r.name.normalized == "pytorch"),
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
    for step in steps:
        run = subprocess.run(step, check=False, capture_output=True, text=True)
        if run.returncode:
            tail = (run.stdout + run.stderr).strip().splitlines()[-1:] or ["(no output)"]
            raise ToolError(f"the CMake consumer failed in {prefix} at {step[0]} {step[1]}: {tail[0]}")
    return sorted(f"{r.name.normalized}-{r.version}-{r.build}" for r in records)


def metapackage_and_machine(variant: Mapping[str, Any]) -> tuple[str, Machine]:
    """The metapackage users install for this configuration and a machine that takes it, solve-check's row
    of the target with a driver of the configuration's CUDA version (proofs/solve_requests.yaml)."""
    cuda = str(variant.get("cuda_compiler_version", ["None"])[0])
    machine = machine_of(str(variant["target_platform"][0]), cuda)
    return ("pytorch-gpu" if cuda != "None" else "pytorch-cpu"), machine


# ---- command line ------------------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "real-build",
        help="build recipe-v1/recipe.yaml for real with rattler-build, offline, from a local channel",
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
        "--python",
        nargs="+",
        default=list(DEFAULT_PYTHONS),
        help="the Pythons to build for (3.X), or 'all' (every one of the configuration this machine has)",
    )
    parser.add_argument("--work-dir", type=Path, default=REPO_ROOT / ".rattler-build")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=DEFAULT_CACHE,
        help="where the local channels and wheels are kept (default: %(default)s)",
    )
    parser.add_argument("--skip-tests", action="store_true", help="do not run the packages' tests")
    parser.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    ci_support = resolve_one(args.config, REPO_ROOT / ".ci_support")
    pythons = args.python
    if pythons == ["all"]:
        # every Python of the configuration that this machine has (the rehearsal skips the others too)
        every = [v.split(".*")[0] for v in rattler_render.variant_config(ci_support)["python"]]
        pythons = [minor for minor in every if local_channel.prefixes.find_interpreter(minor)]
        for minor in sorted(set(every) - set(pythons)):
            print(f"python {minor}: no CPython {minor} on this machine, its pytorch output is not built")
    name = ci_support.stem
    outcome = run_build(
        ci_support,
        args.work_dir / name,
        args.cache_dir,
        pythons,
        test="skip" if args.skip_tests else "native",
    )
    print(
        f"channel {outcome.channel} ({outcome.channel_bytes / 1e6:.1f} MB) in {outcome.channel_seconds:.1f} s"
    )
    print(f"built {len(outcome.packages)} packages in {outcome.build_seconds:.1f} s:")
    for package in outcome.packages:
        print(f"  {package.name}")
    for left_out in outcome.skipped_tests:
        print(f"  test of {left_out.output} left out: {left_out.command!r}: {left_out.reason}")
    for pass_name, targets in outcome.passes.items():
        print(f"  pass {pass_name}: {sum(targets.values())} objects {targets}")
    python_min = rattler_render.variant_config(ci_support)["python_min"][0]
    linked = import_megabuild("python_target").python_linked_targets("linux-64")
    done, minimum = compile_work_ratio(outcome.passes, linked, python_min)
    print(f"compile-work ratio {done} / {minimum} = {done / minimum:.2f}")
    meta, machine = metapackage_and_machine(rattler_render.variant_config(ci_support))
    for python in sorted(rattler_render.variant_config(ci_support, pythons)["python"]):
        minor = python.split(".*")[0]
        installed = install_and_use(outcome, meta, args.work_dir / name / f"prefix-{minor}", machine, minor)
        print(f"python {minor}: import torch and the CMake consumer work with " + ", ".join(installed))
    return 0
