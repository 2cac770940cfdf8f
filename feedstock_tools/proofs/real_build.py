"""A real conda builder builds the recipe: py-rattler-build builds recipe/recipe.yaml offline, for one
.ci_support configuration, against the upstream stand-in, from the local channel (local_channel.py); then
py-rattler solves and installs the metapackage from the built packages + that channel into a fresh prefix,
where ``import torch`` (the stand-in) must work and CMake must find Torch.

    python -m feedstock_tools real-build                       # linux-64 CPU generic, Python 3.10 + 3.12
    python -m feedstock_tools real-build 'linux_64_blas_implgeneric*12.9*'   # a linux-64 CUDA one
    python -m feedstock_tools real-build --python all          # every Python of the configuration here

What differs from a conda-forge build, and why: the recipe's ``source`` is replaced by the stand-in's path
(its patches are for the real tarball); ``build_recipes`` is py-rattler-build's entry point that builds a
recipe's outputs in one build directory as the ``rattler-build`` command does (its per-variant
``run_build`` gives every output its own directory, and each then runs the staging output again: measured
4 staging runs for 2 outputs x 2 Pythons with 0.73.0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from feedstock_tools.common.config_selector import resolve_one
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.conda import rattler_render
from feedstock_tools.proofs import local_channel

STANDIN = REPO_ROOT / "tests" / "upstream_standin"
DEFAULT_PYTHONS = ("3.10", "3.12")
DEFAULT_CONFIG = "linux_64_blas_implgeneric*cuda_compiler_versionNone*"
CUDA_CONFIG = "linux_64_blas_implgeneric*cuda_compiler_version12.9*"
# recipe/ entries the build and the packages' tests read (the patches are for the real tarball only)
RECIPE_ENTRIES = ("recipe.yaml", "build.sh", "bld.bat", "megabuild", "tests", "cmake_test")
# The driver's per-pass table (megabuild/report.py `table`): "<pass>  <targets>  <objects>  <seconds>"
_PASS_ROW = re.compile(r"^\s*(?:│\s*)*(\d [\w-]+(?: \([^)]*\))?)\s+(\d+)\s+(\d+)\s+([\d.]+)\s*$")


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


# ---- what the channel must hold ----------------------------------------------------------------------


def _requirement_lists(stage1: Mapping[str, Any]) -> list[list[Any]]:
    lists = []
    for section in [stage1.get("requirements", {})] + [c.get("requirements", {}) for c in stage1.get("staging_caches", [])]:
        lists += [section.get(key, []) for key in ("build", "host", "run")]
    for test in stage1.get("tests", []):
        lists += [test.get("requirements", {}).get(key, []) for key in ("build", "run")]
    return lists


def channel_plan(outputs: Sequence[rattler_render.V1Output], variant: Mapping[str, Any]) -> local_channel.ChannelPlan:
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
    for name in needs:
        value = variant.get(name.replace("-", "_"))
        if value and name != "python":
            pins[name] = str(value[0]).split()[0]
            needs[name].add(f"{name} {value[0]}" if " " in str(value[0]) else name)
    subdir = variant["target_platform"][0]
    compilers = {
        lang: f"{variant[f'{lang}_compiler'][0]}_{subdir}" for lang in ("c", "cxx") if f"{lang}_compiler" in variant
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


def prepare_recipe(recipe_dir: Path, destination: Path, source: Path) -> Path:
    """A copy of the recipe whose source is ``source`` (a local path): everything else as committed."""
    destination.mkdir(parents=True)
    for entry in RECIPE_ENTRIES:
        path = recipe_dir / entry
        if path.is_dir():
            shutil.copytree(path, destination / entry, ignore=shutil.ignore_patterns("__pycache__"))
        elif path.exists():
            shutil.copy2(path, destination / entry)
    recipe = yaml.safe_load((recipe_dir / "recipe.yaml").read_text())
    recipe["source"] = {"path": str(source)}
    # the stand-in is not PyTorch: it has none of PyTorch's license files, which rattler-build requires to exist
    recipe.get("about", {}).pop("license_file", None)
    (destination / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False, width=200))
    return destination / "recipe.yaml"


def run_build(
    ci_support: Path,
    work_dir: Path,
    cache_dir: Path,
    pythons: Sequence[str] | None,
    recipe_dir: Path = REPO_ROOT / "recipe",
    test: str = "native",
) -> BuildOutcome:
    from rattler_build import build_recipes

    if work_dir.exists():
        shutil.rmtree(work_dir)
    work_dir.mkdir(parents=True)
    log = work_dir / "channel.log"
    recipe = prepare_recipe(recipe_dir, work_dir / "recipe", STANDIN)
    outputs = rattler_render.render(recipe, ci_support, pythons)
    config = rattler_render.variant_config(ci_support, pythons)
    started = time.monotonic()
    channel = local_channel.make_channel(channel_plan(outputs, config), cache_dir, log)
    channel_seconds = time.monotonic() - started
    variants = work_dir / "variants.yaml"
    variants.write_text(yaml.safe_dump(config))
    out_dir = work_dir / "output"
    started = time.monotonic()
    with warnings.catch_warnings():
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
            last = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            raise ToolError(
                f"rattler-build failed building {recipe} for {ci_support.name}: {last} "
                f"(whole log: {out_dir / 'rattler-build-log.txt'})"
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
        passes=passes_from_log(build_log),
        log=build_log,
    )


def passes_from_log(log: Path) -> dict[str, int]:
    """Objects compiled per megabuild pass, from the tables the driver printed (it reads each pass's
    build/.ninja_log inside the real builder); the last table of each pass wins."""
    passes: dict[str, int] = {}
    if not log.exists():
        return passes
    for line in log.read_text(errors="replace").splitlines():
        match = _PASS_ROW.match(line.split(" │ ")[-1] if " │ " in line else line)
        if match:
            passes[match.group(1)] = int(match.group(3))
    return passes


# ---- install and use ---------------------------------------------------------------------------------


def install_and_use(
    outcome: BuildOutcome, spec: str, prefix: Path, virtual: Sequence[str] = (), python: str | None = None
) -> list[str]:
    """Solve ``spec`` (+ ``python``) from the built packages and the channel, install into ``prefix``,
    then import torch there and build a CMake consumer with find_package(Torch). Returns what was installed."""
    from rattler import GenericVirtualPackage, Platform, Version, install, solve
    from rattler.match_spec import MatchSpec
    from rattler.package_name import PackageName

    built_channel = outcome.packages[0].parent.parent
    specs = [spec] + ([f"python {python}.*"] if python else [])
    virtual_packages = [
        GenericVirtualPackage(PackageName(name), Version(version), "0")
        for name, version in (v.split("=") for v in virtual)
    ]

    async def go() -> list[Any]:
        records = await solve(
            [built_channel.as_uri(), outcome.channel.as_uri()],
            [MatchSpec(s) for s in specs],
            platforms=[Platform("linux-64"), Platform("noarch")],
            virtual_packages=virtual_packages,
        )
        await install(records, target_prefix=prefix)
        return records

    try:
        records = asyncio.run(go())
    except Exception as exc:
        raise ToolError(f"the solver refuses {' '.join(specs)} from {built_channel}: {exc}") from exc
    python_exe = prefix / "bin" / "python"
    check = (
        "import torch; print(torch.__version__, torch.cuda.is_compiled(), torch.__file__)"
    )
    subprocess.run([str(python_exe), "-c", check], check=True)
    consumer = prefix.parent / f"{prefix.name}-cmake"
    shutil.rmtree(consumer, ignore_errors=True)
    subprocess.run(
        ["cmake", "-S", str(REPO_ROOT / "recipe" / "cmake_test"), "-B", str(consumer), "-G", "Ninja",
         f"-DCMAKE_PREFIX_PATH={prefix}"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    subprocess.run(["cmake", "--build", str(consumer)], check=True, capture_output=True, text=True)
    subprocess.run([str(consumer / "torch_consumer")], check=True)
    return sorted(f"{r.name.normalized}-{r.version}-{r.build}" for r in records)


# ---- command line ------------------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "real-build",
        help="build recipe/recipe.yaml for real with rattler-build, offline, from a local channel",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "config",
        nargs="?",
        default=DEFAULT_CONFIG,
        help="a .ci_support configuration: a unique part of its name, a glob or a path (default: %(default)s)",
    )
    parser.add_argument(
        "--python", nargs="+", default=list(DEFAULT_PYTHONS), help="the Pythons to build for (3.X), or 'all'"
    )
    parser.add_argument("--work-dir", type=Path, default=REPO_ROOT / ".rattler-build")
    parser.add_argument("--cache-dir", type=Path, default=REPO_ROOT / ".rattler-build" / "cache")
    parser.add_argument("--skip-tests", action="store_true", help="do not run the packages' tests")
    parser.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    ci_support = resolve_one(args.config, REPO_ROOT / ".ci_support")
    pythons = None if args.python == ["all"] else args.python
    name = ci_support.stem
    outcome = run_build(
        ci_support, args.work_dir / name, args.cache_dir, pythons, test="skip" if args.skip_tests else "native"
    )
    print(f"channel {outcome.channel} ({outcome.channel_bytes / 1e6:.1f} MB) in {outcome.channel_seconds:.1f} s")
    print(f"built {len(outcome.packages)} packages in {outcome.build_seconds:.1f} s:")
    for package in outcome.packages:
        print(f"  {package.name}")
    for pass_name, objects in outcome.passes.items():
        print(f"  pass {pass_name}: {objects} objects")
    meta = "pytorch-gpu" if "cuda_compiler_version" in name and "None" not in name else "pytorch-cpu"
    virtual = ["__cuda=13.0", "__glibc=2.36", "__unix=0", "__linux=6.1"] if meta == "pytorch-gpu" else ["__glibc=2.36", "__unix=0", "__linux=6.1"]
    installed = install_and_use(outcome, meta, args.work_dir / name / "prefix", virtual)
    print("installed: " + ", ".join(installed))
    json.dump({"packages": [p.name for p in outcome.packages], "passes": outcome.passes}, sys.stdout)
    print()
    return 0
