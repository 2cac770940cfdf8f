"""``python -m feedstock_tools rehearse [CONFIG]``: the megabuild rehearsal (docs/reference/rehearsal.md).

Runs the recipe's real ``recipe/build.sh`` and build driver for every output of one ``.ci_support``
configuration against ``tests/upstream_standin`` (a test double of PyTorch's build interface), playing
conda-build's part: output order, per-output host prefixes at one ``PREFIX`` path, the environment.
Prints each step, the driver's per-pass table, the compile-work ratio and the wall time.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from feedstock_tools.common import config_selector, inputs, user_cache
from feedstock_tools.common.configuration import Configuration, read_configuration
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.feedstock import Feedstock
from feedstock_tools.proofs.rehearsal import harness, report
from megabuild import atomic_file

CI_SUPPORT = Feedstock(harness.REPO_ROOT).ci_support


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "rehearse",
        help="run the recipe's build scripts offline against a small stand-in of PyTorch's build",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "config",
        nargs="?",
        help="a .ci_support configuration: its name, a unique part of it, a glob matching one, or a path "
        "to a .yaml file; default: the first linux-64 CUDA configuration (the filters kept)",
    )
    parser.add_argument("--list", action="store_true", help="list the configurations and exit")
    parser.add_argument("--platform", help="with --list, or instead of CONFIG: only this target platform")
    parser.add_argument("--cuda", metavar="VERSION", help="likewise: a CUDA version, 'none' (CPU) or 'any'")
    parser.add_argument(
        "--blas",
        help="likewise: only the configurations that build this BLAS (mkl, generic); of a job that builds "
        "both, rehearse only this BLAS's top-level build and outputs",
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=harness.DEFAULT_WORK_ROOT,
        help="where the work trees, packages and logs go (default: %(default)s)",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        help="venv templates per Python and the stand-in's libmagma, made once, checked on every reuse and "
        f"kept between runs (default: {user_cache.rehearsal_cache()}, shared by every checkout on this "
        f"machine; ${user_cache.CACHE_ENV}/rehearsal when that is set; 'python -m feedstock_tools cache "
        "list' shows it, 'cache prune' empties it)",
    )
    parser.add_argument("--recipe-dir", type=Path, default=harness.DEFAULT_RECIPE_DIR, help=argparse.SUPPRESS)
    parser.add_argument(
        "--standin",
        metavar="{setuptools,skbuild}",
        help="the upstream stand-in: setuptools (tests/upstream_standin, shaped like 2.13.0's setup.py) or "
        "skbuild (tests/upstream_standin_skbuild, shaped like 2.15.0's scikit-build-core build); default: "
        "the one the recipe's host requirements call for (scikit-build-core among them: skbuild)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="stream every build script's output")
    parser.add_argument(
        "--fresh-work-dir",
        action="store_true",
        help="give every output a fresh copy of the work directory as the top-level build left it "
        "(conda-build's documented behaviour) instead of the shared one (its actual behaviour)",
    )
    parser.add_argument(
        "--variant-seed",
        type=_seed,
        default=0,
        metavar="N|none",
        help="the order of each output's variants, which conda-build leaves to Python's string hashing: a "
        "permutation of its own for seed N (default 0: pass 1's Python after the others, as conda-build "
        "26.7.1 with PYTHONHASHSEED 0), or 'none' for the render's order (ascending Python, magma first)",
    )
    parser.add_argument(
        "--python",
        dest="pythons",
        action="append",
        metavar="X.Y",
        help="rehearse only this Python's pytorch output (repeatable; default: every Python of the "
        "configuration this machine has); pass 1's Python and one other show every kind of pass",
    )
    parser.add_argument(
        "--reverse-variants",
        action="store_true",
        help="then reverse the variants of each output: the passes must not depend on an order conda-build "
        "may change",
    )
    parser.set_defaults(
        func=run,
        resume_hint="run the same command again: it starts over in a fresh work directory (the cache's "
        "venv templates are kept; one a killed maker left half-made is made again)",
    )


def _seed(text: str) -> int | None:
    if text == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a number nor 'none'") from None


def resolve_config(name: str | None, only: config_selector.ConfigFilter | None = None) -> Configuration:
    """CONFIG by the one selector (a name, a unique part, a glob matching one, a .yaml path anywhere)
    among the configurations the filters keep; none: the first linux-64 CUDA one of them."""
    only = only or config_selector.ConfigFilter()
    if name is not None and config_selector.is_path(name):
        if only:
            raise ToolError(f"{name} names one file: --platform/--cuda/--blas apply to configuration names")
        return read_configuration(config_selector.resolve_one(name, CI_SUPPORT, outside=True))
    configs = {config.name: config for config in config_selector.kept(CI_SUPPORT, only)}
    if name is not None:
        return configs[config_selector.select_one(list(configs), name)]
    linux_64_cuda = (c for c in configs.values() if c.target_platform == "linux-64" and c.cuda is not None)
    return next(linux_64_cuda, next(iter(configs.values())))


def run(args: argparse.Namespace) -> int:
    only = config_selector.ConfigFilter(args.platform, args.cuda, args.blas)
    if args.list and args.config is not None:
        raise ToolError("--list takes no CONFIG: narrow the list with --platform, --cuda, --blas")
    inputs.work_dir(args.work_dir, "--work-dir")
    if args.cache_dir is not None:
        inputs.work_dir(args.cache_dir, "--cache-dir")
    if args.list:
        for config in config_selector.kept(CI_SUPPORT, only):
            print(config.name)
        return 0
    started = time.monotonic()
    config = resolve_config(args.config, only)
    if args.blas is not None and len(config.blases) > 1:
        config = config.for_blas(args.blas)
    rehearsal = harness.Rehearsal(
        config.path,
        configuration=config,
        work_root=args.work_dir,
        recipe_dir=args.recipe_dir,
        standin=args.standin,
        verbose=args.verbose,
        variant_seed=args.variant_seed,
        reverse_variants=args.reverse_variants,
        fresh_work_dir=args.fresh_work_dir,
        cache_root=args.cache_dir,
        pythons=frozenset(args.pythons) if args.pythons else None,
    )
    print(f"rehearsal of {config.path.name}: work directory {rehearsal.dir}")
    target = rehearsal.target
    if target.subdir != harness.local_subdir():
        print(
            f"   target_platform {target.subdir} (built on {target.build_subdir}"
            f"{', cross-compiled' if target.cross else ''}) is simulated on this machine: SHLIB_EXT "
            f"{target.shlib_ext}, {target.soabi_tail} Python, this machine's compilers "
            "(docs/reference/rehearsal.md)"
        )
    phases: dict[str, float] = {"render of recipe/meta.yaml": time.monotonic() - started}
    with timed(phases, "setup (work directory, venv templates)"):
        rehearsal.prepare()
    for step in rehearsal.left_out:
        print(f"   left out {step.label}: not asked for (--python)")
    for step in rehearsal.skipped:
        print(f"   skipped {step.label}: CPython {step.python} is not on this machine")
    with timed(phases, "build scripts"):
        rehearsal.run()
    outcome = conclude(rehearsal, phases)
    if outcome.exit_status != 0:
        first, more = outcome.problems[0], len(outcome.problems) - 1
        raise ToolError(
            first + (f" (and {more} more problem(s) above; work directory {rehearsal.dir})" if more else "")
        )
    return 0


def conclude(rehearsal: harness.Rehearsal, phases: dict[str, float]) -> report.Outcome:
    """After the builds: the import and linkage checks, the summary printed and written to
    ``summary.json``, and the verdicts the exit status is made of (the tests conclude their rehearsals
    here too)."""
    with timed(phases, "import checks"):
        checks = report.import_checks(rehearsal)
        rehearsal.remover.wait()
    with timed(phases, "linkage checks"):
        linkage_checks = report.linkage_checks(rehearsal)
    summary = print_summary(rehearsal, checks, phases, linkage_checks)
    summary_text = json.dumps(summary, indent=2) + "\n"
    atomic_file.write_text(rehearsal.dir / "summary.json", summary_text)
    return report.Outcome(
        [step.label for step in rehearsal.steps],
        list(rehearsal.results),
        checks,
        linkage_checks,
        report.work_ratio(rehearsal),
    )


@contextmanager
def timed(phases: dict[str, float], name: str) -> Iterator[None]:
    started = time.monotonic()
    try:
        yield
    finally:
        phases[name] = time.monotonic() - started


def print_summary(
    rehearsal: harness.Rehearsal,
    checks: list[report.ImportCheck],
    phases: dict[str, float],
    linkage_checks: list[report.LinkageCheck],
) -> dict:
    print("\nSteps (measured by the rehearsal from build/.ninja_log):")
    print(report.steps_table(rehearsal.results))
    for line in report.host_changes(rehearsal.results):
        print(f"   WARNING {line}: conda-build packages new files only, so that change is lost")
    driver = report.driver_report(rehearsal)
    print(f"\nThe driver's per-pass table ({report.DRIVER_REPORT}):")
    print(report.driver_table(driver) if driver is not None else "   (the driver wrote no report)")
    ratio = report.work_ratio(rehearsal)
    print(
        "\nCompile-work ratio: objects compiled / (pass 1 + MAGMA's linalg + Python-dependent x extra Pythons"
        " [+ extra BLAS x (BLAS-dependent + BLAS- and Python-dependent x Pythons)])"
    )
    print(f"   {ratio.formula()}   (target 1.00)")
    print("\nimport torch in prefixes made from the packages:")
    for check in checks:
        print(f"   {'ok  ' if check.ok else 'FAIL'} {check.label}: {check.detail}")
    for step in rehearsal.skipped:
        print(f"   skipped pytorch for Python {step.python}: not on this machine")
    print("\nLinkage of every package (feedstock_tools/proofs/wheels/linkage.py):")
    for linked in linkage_checks:
        print(f"   {'ok  ' if linked.ok else 'FAIL'} {linked.label}: {linked.binaries} binaries")
        for line in [*linked.errors, *(f"warning: {w}" for w in linked.warnings)]:
            print(f"        {line}")
    cpu = sum(result.cpu_seconds for result in rehearsal.results)
    print(f"\nCPU time of the build scripts: {cpu:.1f} s (user + system, not inflated by other load)")
    wall = sum(phases.values())
    print(f"\nWall time: {wall:.1f} s (" + ", ".join(f"{name} {s:.1f} s" for name, s in phases.items()) + ")")
    return {
        "config": rehearsal.name,
        "wall_seconds": round(wall, 2),
        "phase_seconds": {name: round(seconds, 2) for name, seconds in phases.items()},
        "steps": [
            {
                "label": r.step.label,
                "name": r.step.name,
                "returncode": r.returncode,
                "seconds": round(r.seconds, 2),
                "cpu_seconds": round(r.cpu_seconds, 2),
                "objects": r.objects,
                "compiled": r.compiles,
                "files": r.new_files,
                "modified_host_files": r.modified_host_files,
            }
            for r in rehearsal.results
        ],
        "skipped": [step.label for step in rehearsal.skipped],
        "left_out": [step.label for step in rehearsal.left_out],
        "ratio": {**asdict(ratio), "value": ratio.ratio},
        "import_checks": [asdict(check) for check in checks],
        "linkage_checks": [asdict(check) for check in linkage_checks],
        "driver_report": driver,
    }
