"""``anchor-parity``: every build setting of conda-forge's 2.13.0 recipe held against this feedstock's.

The table is data (``anchor_parity.yaml``): per setting of pytorch-cpu-feedstock 74dd3d46's ``build.sh``,
``bld.bat`` and ``meta.yaml``, the anchor's value with its source line or commit, the platform families it
applies to, this feedstock's value and the decision (same / different / not needed / fixed now). This module
computes this feedstock's actual value for each family: the driver's environment
(``megabuild.environment.upstream_environment`` on a conda-build environment of that family, the recipe's
script_env included) and the rendered recipe (:func:`feedstock_tools.conda.recipe_render.render_recipe` of
the family's ``.ci_support`` file).
``--check`` fails where they disagree with the table; ``--write`` renders ``docs/anchor-parity.md``.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PureWindowsPath
from typing import Any

import yaml

from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.recipe_imports import REPO_ROOT, import_megabuild
from feedstock_tools.conda.recipe_render import RenderedOutput, load_variant_config, render_recipe
from feedstock_tools.conda.script_env import script_environment

TABLE_FILE = Path(__file__).with_name("anchor_parity.yaml")
DOC_FILE = REPO_ROOT / "docs" / "anchor-parity.md"
DECISIONS = ("same", "different", "not needed", "fixed now")
CHECKS = ("env", "cmake_arg", "flag", "max_jobs", "requirement", "ignore_from", "runner", "function", "none")


@dataclass(frozen=True)
class Family:
    name: str
    config: str  # a glob of .ci_support/ naming exactly one configuration
    cpu_count: int  # the runner's CPUs (conda-build's CPU_COUNT there)
    memory_gib: int  # the runner's memory, for the driver's CUDA job rule


@dataclass(frozen=True)
class Row:
    setting: str
    anchor: str  # the anchor's value, as its recipe writes it
    source: str  # file:line or commit of the anchor
    families: tuple[str, ...]
    check: Mapping[str, Any]
    ours: Any  # the value the check must compute for every family of the row
    decision: str
    why: str
    verify: str  # where a real job settles what cannot be checked here ("" when the check settles it)


@dataclass(frozen=True)
class Table:
    families: dict[str, Family]
    groups: dict[str, tuple[str, ...]]
    caller: dict[str, dict[str, str]]  # the activation's flags per platform kind (linux, osx, win)
    rows: tuple[Row, ...]


def load_table(path: Path = TABLE_FILE) -> Table:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        families = {
            name: Family(name, str(f["config"]), int(f["cpu_count"]), int(f["memory_gib"]))
            for name, f in data["families"].items()
        }
        groups = {name: tuple(members) for name, members in data["groups"].items()}
        rows = tuple(
            Row(
                str(r["setting"]),
                str(r["anchor"]),
                str(r["source"]),
                _families(r["families"], groups, families),
                dict(r["check"]),
                r.get("ours"),
                str(r["decision"]),
                str(r["why"]),
                str(r.get("verify") or ""),
            )
            for r in data["rows"]
        )
        caller = {kind: {str(k): str(v) for k, v in flags.items()} for kind, flags in data["caller"].items()}
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
        raise ToolError(
            f"cannot read {path}: {type(exc).__name__} {exc}; each row needs setting, anchor, source, "
            "families, check, ours, decision and why"
        ) from exc
    for row in rows:
        if row.decision not in DECISIONS or row.check.get("kind") not in CHECKS:
            raise ToolError(
                f"{path.name}: row {row.setting!r}: decision must be one of {', '.join(DECISIONS)} and "
                f"check.kind one of {', '.join(CHECKS)}"
            )
        if row.check["kind"] == "none" and not row.verify:
            raise ToolError(
                f"{path.name}: row {row.setting!r} checks nothing here: name the job log line (verify)"
            )
    return Table(families, groups, caller, rows)


def _families(
    value: Any, groups: Mapping[str, tuple[str, ...]], known: Mapping[str, Family]
) -> tuple[str, ...]:
    names: list[str] = []
    for item in [value] if isinstance(value, str) else value:
        names += groups.get(str(item), (str(item),))
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"unknown family or group {unknown[0]!r}")
    return tuple(dict.fromkeys(names))


# ---- this feedstock's actual settings ----------------------------------------------------------------------


def config_path(family: Family, ci_support: Path) -> Path:
    found = sorted(ci_support.glob(family.config))
    if len(found) != 1:
        raise ToolError(
            f"family {family.name}: {family.config!r} matches {len(found)} files of {ci_support}; "
            "make it name exactly one (python -m feedstock_tools render-ci --list)"
        )
    return found[0]


def conda_environ(family: Family, variant: Mapping[str, Any], caller: Mapping[str, str]) -> dict[str, str]:
    """What conda-build exports to pass 1's build script for ``family`` (paths are placeholders)."""
    target = str(variant["target_platform"][0])
    windows = target.startswith("win-")
    env = {
        "PKG_NAME": "libtorch-split",
        "PKG_VERSION": _recipe_version(),
        "PREFIX": "C:\\p" if windows else "/p",
        "BUILD_PREFIX": "C:\\b" if windows else "/b",
        "SRC_DIR": "C:\\w" if windows else "/w",
        "RECIPE_DIR": "C:\\r" if windows else "/r",
        "CPU_COUNT": str(family.cpu_count),
        "target_platform": target,
        "build_platform": _build_platform(target),
        **{
            key: str(values[0]) for key, values in variant.items() if key in ("blas_impl", "arm_variant_type")
        },
        "cuda_compiler_version": str(variant.get("cuda_compiler_version", ["None"])[0]),
        **caller,
    }
    if windows:
        env["LIBRARY_PREFIX"] = "C:\\p\\Library"
    return env


def _build_platform(target: str) -> str:
    forge = yaml.safe_load((REPO_ROOT / "conda-forge.yml").read_text(encoding="utf-8"))
    key = target.replace("-", "_")
    return str((forge.get("build_platform") or {}).get(key, key)).replace("_", "-")


@cache
def _recipe_version() -> str:
    config = sorted((REPO_ROOT / ".ci_support").glob("linux_64_*.yaml"))[0]
    return render_recipe(REPO_ROOT / "recipe", config).outputs[0].version


@dataclass(frozen=True)
class Actual:
    """One family's computed settings."""

    env: dict[str, str]
    cmake_args: list[str]
    max_jobs: str
    outputs: tuple[RenderedOutput, ...]
    runner: list[str]


def actual(family: Family, table: Table, ci_support: Path) -> Actual:
    environment = import_megabuild("environment")
    conda_env = import_megabuild("conda_env")
    windows = import_megabuild("windows")
    path = config_path(family, ci_support)
    variant = load_variant_config(path)
    target = str(variant["target_platform"][0])
    kind = target.split("-", maxsplit=1)[0]
    rendered = _render(path, _build_platform(target))
    # the recipe's own values for pass 1's script (its GPU architectures), as conda-build passes them
    script_env = (rendered.top_level.build if rendered.top_level else {}).get("script_env") or ()
    caller = conda_environ(family, variant, {**table.caller[kind], **script_environment(script_env, {})})
    build = conda_env.CondaBuild.from_environ(caller)
    env, _ = environment.upstream_environment(build, caller)
    memory = family.memory_gib * 1024**3
    return Actual(
        env=env,
        cmake_args=windows.split_cmake_args(env.get("CMAKE_ARGS", ""), build.windows),
        max_jobs=environment.max_jobs(build, {}, memory=memory),
        outputs=rendered.outputs,
        runner=[str(label) for label in variant.get("github_actions_labels") or []],
    )


@cache
def _render(path: Path, build_subdir: str) -> Any:
    """The rendered recipe of one configuration (rendered once per process: the driver's part is cheap)."""
    return render_recipe(REPO_ROOT / "recipe", path, build_subdir=build_subdir)


def _cmake_arg(check: Mapping[str, Any], found: Actual) -> str | None:
    prefix = f"-D{check['define']}="
    values = [arg[len(prefix) :] for arg in found.cmake_args if arg.startswith(prefix)]
    return values[-1] if values else None


def _names_in(check: Mapping[str, Any], found: Actual) -> bool | None:
    outputs = [o for o in found.outputs if o.name == check["output"]]
    if not outputs:
        return None
    if check["kind"] == "ignore_from":
        specs = [str(s) for s in outputs[0].build.get("ignore_run_exports_from") or ()]
    else:
        specs = list(getattr(outputs[0].requirements, check["section"]))
    return any(spec.split()[0] == check["name"] for spec in specs if spec.split())


_VALUE = {
    "env": lambda check, found: found.env.get(check["var"]),
    "cmake_arg": _cmake_arg,
    "flag": lambda check, found: check["word"] in found.env.get(check["var"], "").split(),
    "max_jobs": lambda check, found: found.max_jobs,
    "requirement": _names_in,
    "ignore_from": _names_in,
    "runner": lambda check, found: found.runner,
    "function": lambda check, found: callable(
        getattr(import_megabuild(check["module"]), check["name"], None)
    ),
}


def value_of(row: Row, found: Actual) -> Any:
    """The row's setting as this feedstock makes it for one family ("none": the row's own value, which
    the job named in its verify column settles)."""
    compute = _VALUE.get(row.check["kind"])
    return row.ours if compute is None else compute(row.check, found)


def expected(row: Row, family: Family) -> Any:
    """The row's ``ours`` with the family's placeholders filled in."""
    if not isinstance(row.ours, str):
        return row.ours
    windows = family.name.startswith("win-64")
    return row.ours.format(
        prefix="C:\\p" if windows else "/p",
        build_prefix="C:\\b" if windows else "/b",
        library="C:\\p\\Library",
        library_posix=PureWindowsPath("C:\\p\\Library").as_posix(),
    )


def disagreements(table: Table, ci_support: Path) -> list[str]:
    """One line per (row, family) whose computed value differs from the table's."""
    found = {name: actual(family, table, ci_support) for name, family in table.families.items()}
    problems = []
    for row in table.rows:
        for name in row.families:
            got, want = value_of(row, found[name]), expected(row, table.families[name])
            if got != want:
                problems.append(
                    f"{row.setting} [{name}]: the table says {want!r}, this feedstock has {got!r}"
                )
    return problems


# ---- the document ----------------------------------------------------------------------------------------


def summary(table: Table) -> Counter[str]:
    return Counter(row.decision for row in table.rows)


def render_markdown(table: Table) -> str:
    counts = summary(table)
    lines = [
        "# This feedstock held against conda-forge's 2.13.0 recipe",
        "",
        "Generated from `feedstock_tools/proofs/anchor_parity.yaml` by `python -m feedstock_tools "
        "anchor-parity --write`; `tests/test_anchor_parity.py` fails when the driver's environment or the "
        "rendered recipe of any family disagrees with the table, or when this file is not the table's "
        "rendering. The anchor is conda-forge/pytorch-cpu-feedstock at 74dd3d46 (`recipe/build.sh`, "
        "`recipe/bld.bat`, `recipe/meta.yaml`); its sources are given as file:line or commit.",
        "",
        "Families (each a `.ci_support` configuration; the runner's CPUs and memory feed the driver's job "
        "rule):",
        "",
        "| family | configuration | CPUs | memory (GiB) |",
        "|---|---|---:|---:|",
    ]
    lines += [
        f"| {f.name} | `{f.config}` | {f.cpu_count} | {f.memory_gib} |" for f in table.families.values()
    ]
    lines += [
        "",
        f"**Summary**: {len(table.rows)} settings: "
        + ", ".join(f"{counts[d]} {d}" for d in DECISIONS)
        + ". Rows whose check is `none` cannot be verified here; their last column names the first real "
        "job's log line that settles them.",
        "",
        "| setting | anchor | source | families | ours | decision | why | settled by |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in table.rows:
        ours = "-" if row.ours is None else row.ours
        families = _family_label(row.families, table)
        cells = [row.setting, f"`{row.anchor}`", row.source, families, f"`{ours}`", row.decision, row.why]
        cells.append(row.verify or f"this table's test ({row.check['kind']})")
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _family_label(families: Sequence[str], table: Table) -> str:
    for group, members in table.groups.items():
        if tuple(families) == members:
            return group
    return ", ".join(families)


# ---- command line ------------------------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "anchor-parity",
        help="every build setting held against conda-forge's 2.13.0 recipe (the table and its check)",
        description=(
            "Compute this feedstock's value of every setting in feedstock_tools/proofs/anchor_parity.yaml "
            "for each platform family (the driver's environment, the rendered recipe), compare it with the "
            "table; print the disagreements (exit 1 if any). --write renders docs/anchor-parity.md."
        ),
    )
    parser.add_argument("--write", action="store_true", help="write docs/anchor-parity.md from the table")
    parser.add_argument(
        "--ci-support",
        type=Path,
        default=REPO_ROOT / ".ci_support",
        help="configurations (default .ci_support/)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    table = load_table()
    problems = disagreements(table, args.ci_support)
    for line in problems:
        print(line)
    counts = summary(table)
    print(f"{len(table.rows)} settings: " + ", ".join(f"{counts[d]} {d}" for d in DECISIONS), file=sys.stderr)
    if args.write:
        DOC_FILE.write_text(render_markdown(table), encoding="utf-8")
        print(f"wrote {DOC_FILE.relative_to(REPO_ROOT)}", file=sys.stderr)
    return 1 if problems else 0
