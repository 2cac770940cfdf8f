"""``anchor-parity``: every build setting of conda-forge's 2.13.0 recipe held against this feedstock's.

The table is data (``anchor_parity.yaml``): per setting of pytorch-cpu-feedstock 74dd3d46's ``build.sh``,
``bld.bat`` and ``meta.yaml``, the anchor's value with its source line or commit, the platform families it
applies to, this feedstock's value and the decision (same / different / not needed / fixed now). This module
computes this feedstock's actual value for each family: the driver's environment
(``megabuild.environment.upstream_environment`` on a conda-build environment of that family, the recipe's
script_env included) and the rendered recipe (:func:`feedstock_tools.conda.recipe_render.render_recipe` of
the family's ``.ci_support`` file).
The command fails where they disagree with the table, where a row's decision contradicts its own values
(:func:`contradictions`) and where the document is stale; ``--write`` renders
``docs/reference/anchor-parity.md``.
A requirement row's "ours" in the document is the rendered recipe's spec, so a version a release bump
changes (triton's series) is read from the recipe, never restated in the table. ``check`` runs the same.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PureWindowsPath
from typing import Any

import yaml

from feedstock_tools.ci.forge_config import read_forge_settings
from feedstock_tools.common.configuration import NO_CUDA, Configuration
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.feedstock import Feedstock, configuration_files
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.conda.recipe_render import RenderedOutput, render_recipe
from feedstock_tools.conda.script_env import script_environment
from feedstock_tools.conda.yaml_load import safe_load
from megabuild import atomic_file, package_files
from megabuild import errors as megabuild_errors

TABLE_FILE = Path(__file__).with_name("anchor_parity.yaml")
RECIPE = "recipe"  # ours_from: the row's value is the recipe's
TABLE_NAME = "feedstock_tools/maintainer/anchor_parity.yaml"  # relative to a feedstock root
DOC_NAME = "docs/reference/anchor-parity.md"
DOC_FILE = REPO_ROOT / DOC_NAME
DECISIONS = ("same", "different", "not needed", "fixed now")
CHECKS = ("env", "cmake_arg", "flag", "max_jobs", "requirement", "ignore_from", "runner", "function", "none")


@dataclass(frozen=True)
class Family:
    name: str
    config: str  # a glob of .ci_support/ naming exactly one configuration
    cpu_count: int  # the runner's CPUs (conda-build's CPU_COUNT there)
    memory_gib: int  # the runner's memory, for the driver's CUDA job rule
    blas: str | None = None  # the BLAS of that job the family stands for, where the job builds several


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
    # "ours_from: recipe": ours is the value the recipe gives (its GPU architecture lists), computed, never
    # restated here; the decision is still held against the anchor's value
    from_recipe: bool = False


@dataclass(frozen=True)
class Table:
    families: dict[str, Family]
    groups: dict[str, tuple[str, ...]]
    caller: dict[str, dict[str, str]]  # the activation's flags per platform kind (linux, osx, win)
    rows: tuple[Row, ...]


def load_table(path: Path = TABLE_FILE) -> Table:
    try:
        data = safe_load(path.read_text(encoding="utf-8"))
        families = {
            name: Family(
                name,
                str(f["config"]),
                int(f["cpu_count"]),
                int(f["memory_gib"]),
                f.get("blas") and str(f["blas"]),
            )
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
                str(r.get("ours_from") or "") == RECIPE,
            )
            for r in data["rows"]
        )
        caller = {kind: {str(k): str(v) for k, v in flags.items()} for kind, flags in data["caller"].items()}
    except FileNotFoundError:
        raise ToolError(f"{path} is missing: restore it with git checkout -- {TABLE_NAME}") from None
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ToolError(
            f"cannot read {path}: {type(exc).__name__} {str(exc).splitlines()[0]}; each row needs setting, "
            f"anchor, source, families, check, ours, decision and why (git diff -- {TABLE_NAME} shows what "
            "changed)"
        ) from exc
    for row in rows:
        if row.decision not in DECISIONS or row.check.get("kind") not in CHECKS:
            raise ToolError(
                f"{path.name}: row {row.setting!r}: decision must be one of {', '.join(DECISIONS)} and "
                f"check.kind one of {', '.join(CHECKS)}"
            )
        if row.from_recipe and (row.ours is not None or row.check["kind"] != "env"):
            raise ToolError(
                f"{path.name}: row {row.setting!r}: 'ours_from: recipe' computes ours from an env check; "
                "drop its 'ours' (the recipe holds the value)"
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
    found = configuration_files(ci_support, family.config)
    if len(found) != 1:
        raise ToolError(
            f"family {family.name}: {family.config!r} matches {len(found)} files of {ci_support}; "
            "make it name exactly one (python -m feedstock_tools render-ci --list)"
        )
    return found[0]


def table_file(root: Path) -> Path:
    """The parity table of the feedstock at ``root`` (this package's own where the root has none)."""
    own = root / TABLE_NAME
    return own if own.is_file() else TABLE_FILE


def conda_environ(
    family: Family, config: Configuration, caller: Mapping[str, str], root: Path = REPO_ROOT
) -> dict[str, str]:
    """What conda-build exports to pass 1's build script for ``family`` (paths are placeholders)."""
    target = config.target_platform
    windows = target.startswith("win-")
    env = {
        "PKG_NAME": package_files.TOP_LEVEL,
        "PKG_VERSION": _recipe_version(root),
        "PREFIX": "C:\\p" if windows else "/p",
        "BUILD_PREFIX": "C:\\b" if windows else "/b",
        "SRC_DIR": "C:\\w" if windows else "/w",
        "RECIPE_DIR": "C:\\r" if windows else "/r",
        "CPU_COUNT": str(family.cpu_count),
        "target_platform": target,
        "build_platform": _build_platform(target, root),
        **{
            key: value
            for key in ("blas_impl", "arm_variant_type")
            if (value := config.first(key)) is not None
        },
        "cuda_compiler_version": config.cuda or NO_CUDA,
        **caller,
    }
    if windows:
        env["LIBRARY_PREFIX"] = "C:\\p\\Library"
    return env


def _build_platform(target: str, root: Path = REPO_ROOT) -> str:
    key = target.replace("-", "_")
    return read_forge_settings(Feedstock(root).forge_yml).build_platform.get(key, key).replace("_", "-")


@cache
def _recipe_version(root: Path = REPO_ROOT) -> str:
    feedstock = Feedstock(root)
    config = feedstock.configuration(feedstock.configuration_files("linux_64_*.yaml")[0])
    return render_recipe(root / "recipe", config).outputs[0].version


@dataclass(frozen=True)
class Actual:
    """One family's computed settings."""

    env: dict[str, str]
    cmake_args: list[str]
    max_jobs: str
    outputs: tuple[RenderedOutput, ...]
    runner: list[str]


def actual(
    family: Family, table: Table, ci_support: Path, root: Path = REPO_ROOT, feedstock: Feedstock | None = None
) -> Actual:
    """One family's settings as the driver computes them for its configuration (read through
    ``feedstock``, the command's view of the tree, where given)."""
    from megabuild import conda_env, environment, windows

    path = config_path(family, ci_support)
    config = (feedstock or Feedstock(root)).configuration(path)
    if family.blas is not None:
        config = config.for_blas(family.blas)
    target = config.target_platform
    rendered = _render(root / "recipe", config, _build_platform(target, root))
    # the recipe's own values for pass 1's script (its GPU architectures), as conda-build passes them
    script_env = (rendered.top_level.build if rendered.top_level else {}).get("script_env") or ()
    caller_values = {**table.caller[config.platform], **script_environment(script_env, {})}
    caller = conda_environ(family, config, caller_values, root)
    build = conda_env.CondaBuild.from_environ(caller)
    try:
        env, _ = environment.upstream_environment(build, caller)
    except megabuild_errors.MegabuildError as exc:
        raise DriverRefusal(
            f"{TABLE_NAME}: not computed for family {family.name} ({path.name}): the build driver refuses "
            f"its environment: {exc}"
        ) from exc
    memory = family.memory_gib * 1024**3
    return Actual(
        env=env,
        cmake_args=windows.split_cmake_args(env.get("CMAKE_ARGS", ""), build.windows),
        max_jobs=environment.max_jobs(build, {}, memory=memory),
        outputs=rendered.outputs,
        runner=list(config.values_of("github_actions_labels")),
    )


class DriverRefusal(ToolError):
    """The build driver refuses a family's configuration (a malformed GPU architecture list, ...): the table
    cannot be computed until that is fixed; the message names the family and the driver's reason."""


_RENDERS: dict[tuple[Path, Path, tuple[str, ...], str], Any] = {}


def _render(recipe_dir: Path, config: Configuration, build_subdir: str) -> Any:
    """The rendered recipe of one configuration, by its file (rendered once per process: the driver's part
    is cheap)."""
    key = (recipe_dir, config.path, config.blases, build_subdir)
    if key not in _RENDERS:
        _RENDERS[key] = render_recipe(recipe_dir, config, build_subdir=build_subdir)
    return _RENDERS[key]


def _cmake_arg(check: Mapping[str, Any], found: Actual) -> str | None:
    prefix = f"-D{check['define']}="
    values = [arg[len(prefix) :] for arg in found.cmake_args if arg.startswith(prefix)]
    return values[-1] if values else None


def _specs_named(check: Mapping[str, Any], found: Actual) -> list[str] | None:
    """The rendered output's specs of the row's name (None: the family does not build the output)."""
    outputs = [o for o in found.outputs if o.name == check["output"]]
    if not outputs:
        return None
    if check["kind"] == "ignore_from":
        specs = [str(s) for s in outputs[0].build.get("ignore_run_exports_from") or ()]
    else:
        specs = list(getattr(outputs[0].requirements, check["section"]))
    return [spec for spec in specs if spec.split() and spec.split()[0] == check["name"]]


def _names_in(check: Mapping[str, Any], found: Actual) -> bool | None:
    specs = _specs_named(check, found)
    return None if specs is None else bool(specs)


_VALUE = {
    "env": lambda check, found: found.env.get(check["var"]),
    "cmake_arg": _cmake_arg,
    "flag": lambda check, found: check["word"] in found.env.get(check["var"], "").split(),
    "max_jobs": lambda check, found: found.max_jobs,
    "requirement": _names_in,
    "ignore_from": _names_in,
    "runner": lambda check, found: found.runner,
    "function": lambda check, found: callable(
        getattr(importlib.import_module(f"megabuild.{check['module']}"), check["name"], None)
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


@dataclass(frozen=True)
class Problem:
    """A row that no longer holds: its family, what the table says, what this feedstock has, the fix."""

    setting: str
    family: str
    expected: str
    found: str
    fix: str

    def line(self) -> str:
        return f"{self.setting} [{self.family}]: {self.fix}"


def actuals(
    table: Table, ci_support: Path, root: Path = REPO_ROOT, feedstock: Feedstock | None = None
) -> dict[str, Actual]:
    """Every family's settings, the configurations read through one view of the tree."""
    view = feedstock or Feedstock(root)
    return {name: actual(family, table, ci_support, root, view) for name, family in table.families.items()}


def disagreement_problems(table: Table, found: Mapping[str, Actual]) -> list[Problem]:
    """One per (row, family) whose computed value differs from the table's."""
    problems = []
    for row in table.rows:
        if row.from_recipe:
            continue  # the computed value is ours by definition
        for name in row.families:
            got, want = value_of(row, found[name]), expected(row, table.families[name])
            if got != want:
                problems.append(
                    Problem(
                        row.setting,
                        name,
                        repr(want),
                        repr(got),
                        f"the table says {want!r}, this feedstock has {got!r}",
                    )
                )
    return problems


def disagreements(table: Table, ci_support: Path, root: Path = REPO_ROOT) -> list[str]:
    """One line per (row, family) whose computed value differs from the table's."""
    return [p.line() for p in disagreement_problems(table, actuals(table, ci_support, root))]


# ---- a row's decision against its own values ----------------------------------------------------------

# the words a flag row's anchor starts with, and whether they mean the word is in the flags
_FLAG_WORDS = {"added": True, "replaced": True, "removed": False, "stripped": False}
_ON, _OFF = {"1", "on", "true"}, {"0", "off", "false", "none", ""}
_MATCHES, _DIFFERS = "matches", "differs"


def _anchor_value(row: Row, family: Family) -> str:
    """The anchor's value with its remarks ("(forwarded by its patch 0003)", "on github_actions") left out
    and its placeholders ($PREFIX, %LIBRARY_PREFIX%) written as this table's paths of the family."""
    text = re.sub(r"\s*\(.*\)\s*$", "", row.anchor).removesuffix(" on github_actions").strip()
    windows = family.name.startswith("win-64")
    for placeholder, value in (
        ("%LIBRARY_PREFIX%", "C:\\p\\Library"),
        ("$BUILD_PREFIX", "C:\\b" if windows else "/b"),
        ("$PREFIX", "C:\\p" if windows else "/p"),
    ):
        text = text.replace(placeholder, value)
    return text


def _normal(value: Any) -> str:
    if value is None:
        return "(not set)"  # unset is the upstream build's default, not OFF
    text = str(value).replace("\\", "/").strip()
    return "ON" if text.lower() in _ON else "OFF" if text.lower() in _OFF else text


def _comparison(row: Row, family: Family, got: Any) -> str | None:
    """Whether the anchor's value and ours are the same setting (_MATCHES), not (_DIFFERS), or None where
    the anchor is a description this check cannot read as a value."""
    kind = row.check["kind"]
    if kind == "flag":
        meaning = _FLAG_WORDS.get(row.anchor.split()[0])
        return None if meaning is None else _MATCHES if meaning == got else _DIFFERS
    if kind == "requirement":
        named = row.anchor.split()[0] == row.check["name"]
        return None if not named or got else _DIFFERS  # absent here: not the anchor's; present: by version
    if kind == "runner":
        return _MATCHES if [row.anchor] == got else _DIFFERS
    if kind not in ("env", "cmake_arg", "max_jobs"):
        return None
    anchor = _anchor_value(row, family)
    alternatives = re.sub(r"<([^<>]+)>", lambda m: "(?:" + m[1] + ")", re.escape(anchor).replace("\\|", "|"))
    if re.fullmatch(alternatives, str(got)) or _normal(anchor) == _normal(got):
        return _MATCHES
    return _DIFFERS if " " not in anchor else None


def contradictions(table: Table, found: Mapping[str, Actual] | None = None) -> list[Problem]:
    """Rows whose decision says the opposite of their own values (the anchor's and the table's "ours", or
    the recipe's where the row takes it from there: ``found``): "same"/"fixed now" with a value that is not
    the anchor's, "different"/"not needed" with the anchor's own value, "not needed" with a value set. One
    per row."""
    problems = []
    for row in table.rows:
        if row.from_recipe and found is None:
            continue
        for name in row.families:
            ours = value_of(row, found[name]) if row.from_recipe else expected(row, table.families[name])
            verdict = _comparison(row, table.families[name], ours)
            set_anyway = row.decision == "not needed" and ours not in (None, False)
            if (
                (verdict == _DIFFERS and row.decision in ("same", "fixed now"))
                or (verdict == _MATCHES and row.decision in ("different", "not needed"))
                or set_anyway
            ):
                right = "same or fixed now" if verdict == _MATCHES else "different or not needed"
                right = "different (ours sets it)" if set_anyway and verdict != _MATCHES else right
                problems.append(
                    Problem(
                        row.setting,
                        name,
                        row.decision,
                        f"anchor {row.anchor!r}, ours {ours!r}",
                        f"decision {row.decision!r} contradicts anchor {row.anchor!r} and ours {ours!r}: "
                        f"make it {right}, or correct the values",
                    )
                )
                break  # one line per row
    return problems


# ---- what `check` and the bump run ------------------------------------------------------------------


def problems(root: Path = REPO_ROOT, feedstock: Feedstock | None = None) -> list[Problem]:
    """Every disagreement and contradiction of the table with the feedstock at ``root``, and a stale
    document (the configurations read through ``feedstock``, the command's view, where given)."""
    table = load_table(table_file(root))
    view = feedstock or Feedstock(root)
    found = actuals(table, view.ci_support, root, view)
    found_problems = disagreement_problems(table, found) + contradictions(table, found)
    document = root / DOC_NAME
    if document.is_file() and document.read_text(encoding="utf-8") != render_markdown(table, root, found):
        found_problems.append(
            Problem(
                DOC_NAME,
                "all",
                "the table's rendering",
                "stale",
                "is not the table's rendering: run python -m feedstock_tools anchor-parity --write",
            )
        )
    return found_problems


def refresh(root: Path) -> tuple[list[Problem], str]:
    """The table's problems with the feedstock at ``root`` (its document aside), and the document rewritten
    from the table where the root has one that differs: (problems, the document's name or "")."""
    table = load_table(table_file(root))
    found = actuals(table, Feedstock(root).ci_support, root)
    document = root / DOC_NAME
    written = ""
    if document.is_file():
        text = render_markdown(table, root, found)
        if document.read_text(encoding="utf-8") != text:
            atomic_file.write_text(document, text)
            written = DOC_NAME
    return disagreement_problems(table, found) + contradictions(table, found), written


# ---- the document ----------------------------------------------------------------------------------------


def summary(table: Table) -> Counter[str]:
    return Counter(row.decision for row in table.rows)


def recipe_specs(table: Table, found: Mapping[str, Actual]) -> dict[str, str]:
    """A requirement row's specs as the rendered recipe writes them over its families (setting -> specs):
    the values a release bump changes, read from the recipe."""
    specs: dict[str, str] = {}
    for row in table.rows:
        if row.from_recipe:
            values = dict.fromkeys(str(value_of(row, found[name])) for name in row.families)
            specs[row.setting] = ", ".join(values)
        if row.check["kind"] != "requirement":
            continue
        named = {s for name in row.families for s in _specs_named(row.check, found[name]) or ()}
        if named:
            specs[row.setting] = ", ".join(sorted(named))
    return specs


def render_markdown(table: Table, root: Path = REPO_ROOT, found: Mapping[str, Actual] | None = None) -> str:
    counts = summary(table)
    specs = recipe_specs(
        table, found if found is not None else actuals(table, Feedstock(root).ci_support, root)
    )
    lines = [
        "# This feedstock held against conda-forge's 2.13.0 recipe",
        "",
        "Generated from `feedstock_tools/maintainer/anchor_parity.yaml` by `python -m feedstock_tools "
        "anchor-parity --write`; `tests/maintainer/test_anchor_parity.py` fails when the driver's "
        "environment or the "
        "rendered recipe of any family disagrees with the table, or when this file is not the table's "
        "rendering, or when a row's decision contradicts its values (`python -m feedstock_tools check` runs "
        "the same). A requirement's \"ours\" is the rendered recipe's spec, and a GPU architecture list's "
        "the recipe's list, read from the recipe. The anchor "
        "is conda-forge/pytorch-cpu-feedstock at 74dd3d46 (`recipe/build.sh`, `recipe/bld.bat`, "
        "`recipe/meta.yaml`); its sources are given as file:line or commit.",
        "",
        "Families (each a `.ci_support` configuration, one BLAS of it where the job builds both; the "
        "runner's CPUs and memory feed the driver's job rule):",
        "",
        "| family | configuration | BLAS | CPUs | memory (GiB) |",
        "|---|---|---|---:|---:|",
    ]
    lines += [
        f"| {f.name} | `{f.config}` | {f.blas or 'its one'} | {f.cpu_count} | {f.memory_gib} |"
        for f in table.families.values()
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
        ours = specs.get(row.setting, "-" if row.ours is None else row.ours)
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
            "Compute this feedstock's value of every setting in the table (anchor_parity.yaml) "
            "for each platform family (the driver's environment, the rendered recipe), compare it with the "
            "table; print the disagreements and the rows whose decision contradicts their values (exit 1 "
            f"if any). --write renders {DOC_NAME} (a requirement's 'ours' is the recipe's spec)."
        ),
    )
    parser.add_argument("--write", action="store_true", help=f"write {DOC_NAME} from the table")
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="feedstock root (default: %(default)s)")
    parser.add_argument(
        "--ci-support", type=Path, default=None, help="configurations (default: the root's .ci_support/)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root = args.root
    table = load_table(table_file(root))
    found = actuals(table, args.ci_support or Feedstock(root).ci_support, root)
    lines = [p.line() for p in disagreement_problems(table, found) + contradictions(table, found)]
    for line in lines:
        print(line)
    counts = summary(table)
    print(f"{len(table.rows)} settings: " + ", ".join(f"{counts[d]} {d}" for d in DECISIONS), file=sys.stderr)
    if args.write:
        atomic_file.write_text(root / DOC_NAME, render_markdown(table, root, found))
        print(f"wrote {DOC_NAME}", file=sys.stderr)
    return 1 if lines else 0
