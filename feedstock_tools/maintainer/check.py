"""``check``: the recipe's consistency rules, checked on the recipe as conda-build would render it.

Fails with one line per finding when

* a file in ``recipe/patches/`` is not listed in ``meta.yaml``, a listed patch is missing, or a patch lacks
  its ``git format-patch`` header with ``Why:``, ``Upstream status:`` and ``Context verified against:``;
* a hunk of a listed patch conflicts with the upstream text the project holds, alone or after the earlier
  patches of a configuration's series (:mod:`feedstock_tools.maintainer.patch_check` prints one table row per
  hunk: applies / conflicts / unknown text; docs/reference/patches.md);
* an output's host requirements drift from the top-level build's (the megabuild passes re-run CMake in
  pass 1's cache, so they must see the same dependencies);
* an output has no test;
* a build number or build string breaks the recipe's rules (CUDA +200 + the CUDA version's digits, 129 for
  12.9, so a newer CUDA ranks above an older one; MKL +100, MAGMA linalg +50;
  ``cuda{ver}_{blas}_h{hash}_{n}`` / ``cpu_{blas}_h{hash}_{n}``, ``pytorch`` adds ``_py{CONDA_PY}``,
  ``libtorch-cuda-linalg`` adds ``_magma`` / ``_nomagma``);
* a ``.ci_support`` file is missing, extra or stale (the CI layer's own generator decides), or recipe-v1/ is
  not what ``convert-v1`` writes from meta.yaml;
* the build driver's staging table names a package the recipe does not build with a script, or the
  reverse;
* recipe-v1/recipe.yaml (v1, rattler-build) renders differently from meta.yaml for a .ci_support
  configuration (``render-v1``, docs/reference/recipe-v1.md: one finding per item one recipe lacks, over the
  configurations), or a directory holds both meta.yaml and recipe.yaml (conda-smithy's lint R-051);
* a row of the anchor-parity table (``feedstock_tools/maintainer/anchor_parity.yaml``) disagrees with
  the driver's environment or the rendered recipe, or its decision contradicts its values, or
  docs/reference/anchor-parity.md is not the table's rendering (``anchor-parity``).

Every configuration a rerender would produce is rendered with :mod:`feedstock_tools.conda.recipe_render`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from feedstock_tools.ci import ci_support
from feedstock_tools.common import tree_journal
from feedstock_tools.common.configuration import (
    BLAS_KEY,
    Configuration,
    PythonVersion,
    parse_configuration,
    version_key,
)
from feedstock_tools.common.errors import InputError, ToolError
from feedstock_tools.common.feedstock import CI_SUPPORT, Feedstock
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.conda import cuda_arch, recipe_v1
from feedstock_tools.conda.pinning import add_pinning_argument, locate_pinning
from feedstock_tools.conda.python_floor import skip_line
from feedstock_tools.conda.recipe_files import check_recipe
from feedstock_tools.conda.recipe_render import RenderedOutput, RenderedRecipe, TopLevel, render_recipe
from feedstock_tools.conda.yaml_load import safe_load
from feedstock_tools.maintainer import anchor_parity, patch_entries, patch_list, render_v1
from feedstock_tools.maintainer.patch_check import PatchReport, check_patch_series
from megabuild import package_files

# Build-number offsets of the recipe issue: the solver prefers CUDA, then MKL, then the MAGMA linalg.
CUDA_OFFSET, MKL_OFFSET, MAGMA_OFFSET = 200, 100, 50
LIBTORCH, LINALG, PYTORCH = package_files.PACKAGES
PATCH_SUFFIXES = (".patch", ".diff")
PYTHON_FLOOR_COMMAND = "python -m feedstock_tools python-floor"
# The paragraphs a patch's commit message must start (docs/reference/patches.md says what each holds).
PATCH_HEADER_FIELDS = ("Why:", "Upstream status:", "Context verified against:")


@dataclass(frozen=True)
class HostRule:
    """How an output's host requirements relate to the top-level (pass 1) host requirements."""

    all_of_top_level: bool  # must hold every top-level host package (it re-runs pass 1's CMake cache)
    extras: tuple[str, ...] = ()  # packages it may add
    own_python: bool = False  # carries its own python (one per variant) instead of pass 1's


# Outputs with a build script; an output not listed must hold a subset of the top-level host.
HOST_RULES: dict[str, HostRule] = {
    LIBTORCH: HostRule(all_of_top_level=False),
    LINALG: HostRule(all_of_top_level=True, extras=("libmagma-devel",)),
    # libmagma-devel (CUDA): the re-run of pass 1's cache after the MAGMA pass must find MAGMA again
    PYTORCH: HostRule(all_of_top_level=True, extras=(LIBTORCH, "libmagma-devel"), own_python=True),
}
SUBSET_RULE = HostRule(all_of_top_level=False)


@dataclass(frozen=True)
class Finding:
    rule: str
    where: str
    message: str

    def line(self) -> str:
        return f"[{self.rule}] {self.where}: {self.message}"


# --- patches ---------------------------------------------------------------------------------------------


def listed_patches(meta_text: str) -> list[str]:
    """Patch paths (relative to the recipe) listed in ``meta.yaml``, whatever their selectors."""
    return list(dict.fromkeys(entry.path for entry in patch_entries.read_entries(meta_text)))


def patch_header_problem(text: str) -> str | None:
    """Why a patch's header is not a ``git format-patch`` header with a why and an upstream status."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("From "):
        return "not a git format-patch file (first line is not 'From <commit> ...')"
    try:
        separator = lines.index("---")
    except ValueError:
        return "no '---' line ending the commit message"
    header = lines[:separator]
    if not any(line.startswith("Subject:") for line in header):
        return "no Subject: line"
    missing = [field for field in PATCH_HEADER_FIELDS if not any(line.startswith(field) for line in header)]
    if missing:
        fields = " / ".join(repr(field) for field in missing)
        return f"commit message has no {fields} paragraph (docs/reference/patches.md)"
    return None


def check_patches(recipe_dir: Path) -> list[Finding]:
    """meta.yaml's patch list against what ``patches`` writes from recipe/patches/ (a file not listed, a
    listed one missing, a selector or comment astray), a patch file elsewhere in the recipe, and every
    listed patch's header."""
    meta = recipe_dir / "meta.yaml"
    listed = listed_patches(meta.read_text(encoding="utf-8"))
    findings = [Finding(rule, where, what) for rule, where, what in patch_list.differences(recipe_dir)]
    elsewhere = sorted(
        path.relative_to(recipe_dir).as_posix()
        for path in recipe_dir.rglob("*")
        if path.suffix in PATCH_SUFFIXES
        and path.is_file()
        and (path.parent != recipe_dir / "patches" or path.suffix != patch_list.PATCH_SUFFIX)
    )
    findings += [
        Finding(
            "patch-unlisted",
            f"recipe/{path}",
            f"not a recipe/patches/*{patch_list.PATCH_SUFFIX} file, which {patch_list.COMMAND} lists: "
            "move or rename it",
        )
        for path in elsewhere
        if path not in listed
    ]
    for path in listed:
        patch = recipe_dir / path
        if patch.is_file():
            problem = patch_header_problem(patch.read_text(encoding="utf-8", errors="replace"))
            if problem:
                findings.append(Finding("patch-header", f"recipe/{path}", problem))
    return findings


# --- rendered recipe: tests, host requirements, build numbers and strings ----------------------------------


def _specs(requirements: Iterable[str]) -> dict[str, str]:
    return {spec.split()[0]: spec for spec in requirements}


def check_tests(config: str, rendered: RenderedRecipe) -> list[Finding]:
    return [
        Finding(
            "no-test", f"{config}: {output.dist}", "output has no test section (commands, imports or script)"
        )
        for output in rendered.outputs
        if not any(
            output.test.get(key) for key in ("commands", "imports", "script", "source_files", "requires")
        )
    ]


def check_host(config: str, rendered: RenderedRecipe) -> list[Finding]:
    findings = []
    for output in rendered.outputs:
        if output.script is None:
            continue
        # each output against its own pass 1 (one per BLAS where the job builds both)
        top_host = _specs(rendered.top_level_of(output).requirements.host)
        rule = HOST_RULES.get(output.name, SUBSET_RULE)
        host = _specs(output.requirements.host)
        where = f"{config}: {output.dist}"
        skip = {"python"} if rule.own_python else set()
        for name in sorted(set(host) & set(top_host) - skip):
            if host[name] != top_host[name]:
                findings.append(
                    Finding(
                        "host-drift",
                        where,
                        f"host has '{host[name]}', the top-level build '{top_host[name]}'",
                    )
                )
        extras = sorted(set(host) - set(top_host) - set(rule.extras) - skip)
        if extras:
            findings.append(
                Finding("host-drift", where, f"host adds {', '.join(extras)} (not in the top-level host)")
            )
        if rule.all_of_top_level:
            missing = sorted(set(top_host) - set(host) - skip)
            if missing:
                findings.append(
                    Finding("host-drift", where, f"host lacks {', '.join(missing)} of the top-level host")
                )
    return findings


def _flags(config: Configuration, top: TopLevel) -> tuple[str, str]:
    """(flavour, blas) of a top-level build of a configuration: ``cuda129``/``cpu`` and ``mkl``/``generic``
    (its own BLAS where the job builds several, else the configuration's one)."""
    flavour = "cpu" if config.cuda is None else "cuda" + config.cuda.replace(".", "")
    blas = top.variant.get(BLAS_KEY) or next(iter(config.blases), "generic")
    return flavour, str(blas)


def flavour_offset(flavour: str, blas: str) -> int:
    """What a configuration adds to the base build number: CUDA +200 + its digits, MKL +100."""
    cuda = CUDA_OFFSET + int(flavour.removeprefix("cuda")) if flavour != "cpu" else 0
    return cuda + (MKL_OFFSET if blas == "mkl" else 0)


def expected_number(base: int, flavour: str, blas: str, output: RenderedOutput) -> int:
    number = base + flavour_offset(flavour, blas)
    if output.name == LINALG and output.variant.get("magma_variant") == "magma":
        number += MAGMA_OFFSET
    return number


def expected_string_pattern(flavour: str, blas: str, output: RenderedOutput) -> str:
    middle = ""
    if output.name == PYTORCH:
        middle = f"_py{PythonVersion.parse(str(output.variant.get('python', '0.0'))).nodot}"
    elif output.name == LINALG:
        middle = f"_{output.variant.get('magma_variant', '(magma_variant missing)')}"
    return rf"{re.escape(flavour)}_{re.escape(blas)}{re.escape(middle)}_h[0-9a-f]{{7}}_{output.build_number}"


def top_level_base(config: Configuration, top: TopLevel) -> int:
    """The recipe's build number with the CUDA/MKL offsets of this top-level build taken off again."""
    flavour, blas = _flags(config, top)
    return int(top.build.get("number", 0)) - flavour_offset(flavour, blas)


def check_build_ids(
    config: Configuration, rendered: RenderedRecipe, top: TopLevel, base: int
) -> list[Finding]:
    """The numbers and strings of the outputs built from the top-level build ``top``."""
    flavour, blas = _flags(config, top)
    findings = []
    for output in rendered.outputs_of(top):
        where = f"{config.name}: {output.dist}"
        wanted = expected_number(base, flavour, blas, output)
        if output.build_number != wanted:
            findings.append(
                Finding("build-number", where, f"build number {output.build_number}, the rules give {wanted}")
            )
        pattern = expected_string_pattern(flavour, blas, output)
        if not re.fullmatch(pattern, output.build_string):
            findings.append(
                Finding(
                    "build-string", where, f"build string {output.build_string!r} does not match {pattern}"
                )
            )
    return findings


# --- CI files and the staging table ------------------------------------------------------------------------


def check_ci_support(root: Path, pinning: Path, expected: Mapping[Path, str] | None = None) -> list[Finding]:
    """The rerender's drift; ``expected``: the CI files a rerender writes, when already rendered."""
    try:
        return [drift_finding(line) for line in ci_support.drift(root, pinning, expected)]
    except InputError:  # a broken input file stops the check (one line), it is not a finding
        raise
    except ToolError as exc:
        return [Finding("ci-support", CI_SUPPORT, str(exc))]


# a drift line of render-ci (and convert-v1): "<problem>: <path>[<detail>]"
_DRIFT_LINE = re.compile(r"^(?P<problem>[^:]+): (?P<path>[^\s,]+)(?P<detail>.*)$")


def drift_finding(line: str) -> Finding:
    """A rerender's drift line as a finding that says its path and its problem once each (the whole line as
    the message, after the path, said both twice)."""
    match = _DRIFT_LINE.match(line)
    if match is None:
        return Finding("ci-support", CI_SUPPORT, line)
    return Finding("ci-support", match["path"], match["problem"] + match["detail"])


def check_staging(scripted_outputs: set[str]) -> list[Finding]:
    staged = set(package_files.PACKAGES)
    findings = [
        Finding(
            "staging", "recipe/megabuild/package_files.py", f"stages files for {name}, which no output builds"
        )
        for name in sorted(staged - scripted_outputs)
    ]
    findings += [
        Finding("staging", f"output {name}", "has a build script but no package in the staging table")
        for name in sorted(scripted_outputs - staged)
    ]
    return findings


# --- putting it together -----------------------------------------------------------------------------------


def _expected_configs(root: Path, files: Mapping[Path, str]) -> dict[str, Configuration]:
    """What a rerender would write to .ci_support/ (``files``: ci_support.expected_files), by config name
    (rendered from these, not stale files)."""
    return {
        path.stem: parse_configuration(text, root / path)
        for path, text in sorted(files.items())
        if path.parent.as_posix() == CI_SUPPORT
    }


def check_patch_hunks(
    recipe_dir: Path, version: str, series: Mapping[str, tuple[str, ...]]
) -> tuple[PatchReport, list[Finding]]:
    """Every listed patch's hunks against the pre-image text of ``version``: conflicts are findings."""
    report = check_patch_series(recipe_dir, version, series, recipe_dir.parent / "tests" / "patch_fixtures")
    findings = [Finding("patch-format", f"recipe/{patch}", why) for patch, why in report.unreadable]
    findings += [
        Finding("patch-conflict", f"recipe/{row.patch}", f"{row.hunk}: {row.detail}")
        for row in report.rows
        if row.verdict.value == "conflicts"
    ]
    # what the patch tests (tests/recipe/test_recipe_patches.py) reject besides a conflict: an offset, an
    # undeclared unknown hunk, a short or wrong blob id, a hand-edited hunk header or diffstat
    findings += [Finding(p.rule, f"recipe/{p.patch}", p.message) for p in report.problems]
    return report, findings


def check_arch_lists(recipe_dir: Path) -> list[Finding]:
    """meta.yaml's GPU architecture lists the build driver would refuse: one finding per line."""
    meta_text = (recipe_dir / "meta.yaml").read_text(encoding="utf-8")
    return [
        Finding("cuda-arch-list", problem.where, problem.message)
        for problem in cuda_arch.problems(meta_text, f"{recipe_dir.name}/meta.yaml")
    ]


def check_configurations(
    recipe_dir: Path, configs: Mapping[str, Configuration], renders: dict[str, RenderedRecipe] | None = None
) -> tuple[list[Finding], dict[str, tuple[str, ...]], set[str]]:
    """The rules of every rendered configuration (tests, host, build ids; staging and the base build number
    over all of them): the findings, each configuration's patch series and the versions rendered. Each
    render is put into ``renders`` by configuration name, for the rules that read the same render."""
    findings: list[Finding] = []
    scripted: set[str] = set()
    bases: dict[int, list[str]] = {}
    series: dict[str, tuple[str, ...]] = {}  # configuration -> the patches its rendered source applies
    versions: set[str] = set()
    floors: dict[str, list[str]] = {}  # a Python floor problem -> the configurations it shows in
    for number, (name, config) in enumerate(configs.items(), start=1):
        progress(f"check: rendering the recipe for configuration {number}/{len(configs)}: {name}")
        try:
            rendered = render_recipe(recipe_dir, config)
        except InputError:
            raise
        except (ToolError, ValueError) as exc:
            findings.append(Finding("render", name, str(exc)))
            continue
        if renders is not None:
            renders[name] = rendered
        scripted |= {output.name for output in rendered.outputs if output.script}
        if rendered.top_level is not None:
            series[name] = tuple(str(p) for p in rendered.top_level.source.get("patches") or [])
            versions.add(rendered.top_level.version)
        findings += check_tests(name, rendered)
        findings += check_host(name, rendered)
        floor = python_floor_problem(config, rendered)
        if floor:
            floors.setdefault(floor, []).append(name)
        for top in rendered.top_levels:
            base = top_level_base(config, top)
            bases.setdefault(base, []).append(name)
            findings += check_build_ids(config, rendered, top, base)
    if len(bases) > 1:
        detail = "; ".join(
            f"{base} in {len(names)} config(s), e.g. {names[0]}" for base, names in sorted(bases.items())
        )
        findings.append(
            Finding(
                "build-number", "meta.yaml", f"the base build number differs between configurations: {detail}"
            )
        )
    if scripted:
        findings += check_staging(scripted)
    for problem, names in floors.items():
        shown = names[0] if len(names) == 1 else f"{len(names)} configurations, e.g. {names[0]}"
        findings.append(Finding("python-floor", "recipe/meta.yaml", f"{problem} ({shown})"))
    return findings, series, versions


def python_floor_problem(config: Configuration, rendered: RenderedRecipe) -> str | None:
    """Whether the pytorch builds start at ``python_min`` (pass 1's Python): none below it (python_min
    raised without the pytorch output's skip), and one for it (a skip without python_min)."""
    built = sorted(
        {
            PythonVersion.parse(str(o.variant.get("python"))).version
            for o in rendered.outputs
            if o.name == PYTORCH
        },
        key=version_key,
    )
    floor = config.python_min
    if not built:
        return None
    below = [python for python in built if version_key(python) < version_key(floor)]
    if below:
        return (
            f"pytorch is built for Python {', '.join(below)}, below python_min {floor} (pass 1's Python, "
            f"recipe/conda_build_config.yaml): the pytorch output needs '{skip_line(floor)}'; run: "
            f"{PYTHON_FLOOR_COMMAND}"
        )
    if version_key(built[0]) > version_key(floor):
        return (
            f"no pytorch is built for python_min {floor}, pass 1's Python (the oldest is {built[0]}): set "
            f"python_min to {built[0]} in recipe/conda_build_config.yaml, then run: {PYTHON_FLOOR_COMMAND}"
        )
    return None


def run_checks(
    root: Path, pinning: Path, on_patch_report: Callable[[PatchReport], None] | None = None
) -> list[Finding]:
    """Every rule's findings; ``on_patch_report`` receives the patch hunk table (``check`` prints it)."""
    recipe_dir = root / "recipe"
    if not (recipe_dir / "meta.yaml").is_file():
        raise ToolError(f"{recipe_dir / 'meta.yaml'} not found: pass the feedstock root with --root")
    check_recipe(recipe_dir)  # a broken recipe file is one line, not a finding per configuration
    feedstock = Feedstock(root)  # each committed configuration read once, by the rules that read them
    findings = check_patches(recipe_dir)
    arch_findings = check_arch_lists(recipe_dir)
    findings += arch_findings
    try:
        # rendered once for both rules: every configuration of the recipe, the slowest part of check
        expected = ci_support.expected_files(root, pinning)
    except InputError:
        raise
    except ToolError as exc:
        return [
            *findings,
            Finding("ci-support", CI_SUPPORT, str(exc)),
            Finding("render", CI_SUPPORT, str(exc)),
        ]
    findings += check_ci_support(root, pinning, expected)
    renders: dict[str, RenderedRecipe] = {}
    rendered_findings, series, versions = check_configurations(
        recipe_dir, _expected_configs(root, expected), renders
    )
    findings += rendered_findings
    if len(versions) == 1:
        report, patch_findings = check_patch_hunks(recipe_dir, versions.pop(), series)
        findings += patch_findings
        if on_patch_report is not None:
            on_patch_report(report)
    # a stale recipe-v1/ is one ci-support finding naming convert-v1; its render differences from meta.yaml
    # would restate that one cause per item, so they are compared once it is converted again
    findings += check_recipe_v1(
        root,
        compare=not recipe_v1.stale(root),
        renders=current_renders(root, expected, renders),
        feedstock=feedstock,
    )
    progress("check: the anchor-parity table against every family")
    findings += check_anchor_parity(root, cause_reported=bool(arch_findings), feedstock=feedstock)
    return _dedupe(findings)


def print_patch_report(report: PatchReport) -> None:
    for line in report.table():
        print(line)
    print(report.summary())


def current_renders(
    root: Path, expected: Mapping[Path, str], renders: Mapping[str, RenderedRecipe]
) -> dict[str, RenderedRecipe]:
    """The renders of the configurations whose committed .ci_support file is what a rerender writes (the
    same configuration the recipe-v1 comparison reads from the file)."""
    kept = {}
    for name, rendered in renders.items():
        relative = Path(ci_support.CI_SUPPORT) / f"{name}.yaml"
        if (
            relative in expected
            and (root / relative).is_file()
            and ci_support.holds(root / relative, expected[relative])
        ):
            kept[name] = rendered
    return kept


def check_recipe_v1(
    root: Path,
    configs: Sequence[Path] | None = None,
    *,
    compare: bool = True,
    renders: Mapping[str, RenderedRecipe] | None = None,
    feedstock: Feedstock | None = None,
) -> list[Finding]:
    """Where the v1 recipe lives (render_v1.layout_problems: R-051), then every
    difference between recipe-v1/recipe.yaml's real rattler-build render and meta.yaml's over the committed
    .ci_support configurations (or ``configs``): one finding per item one recipe lists and the other lacks
    (or per value they give differently), naming the configurations; a recipe that does not parse is one
    finding. ``renders``: meta.yaml's renders of committed configurations, by name, made already (check's);
    ``feedstock``: the command's view of the tree, which reads each configuration once."""
    recipe_dir, v1_dir = root / "recipe", root / render_v1.V1_DIRNAME
    v1_recipe = v1_dir / "recipe.yaml"
    findings = [Finding("recipe-v1", where, what) for where, what in render_v1.layout_problems(root)]
    if not v1_recipe.is_file() or not compare:
        return findings
    unreadable = _yaml_problem(v1_recipe)
    if unreadable:
        return [*findings, Finding("recipe-v1", f"{render_v1.V1_DIRNAME}/recipe.yaml", unreadable)]
    errors: dict[str, list[str]] = {}
    differences = []
    view = feedstock or Feedstock(root)
    for path in configs or view.configuration_files():
        try:
            rendered = (renders or {}).get(path.stem)
            differences += render_v1.compare_config(
                recipe_dir, path, v1_dir, rendered, configuration=view.configuration(path)
            )[1]
        except (ToolError, ValueError) as exc:
            errors.setdefault(str(exc).replace(path.stem, "<configuration>"), []).append(path.stem)
    for message, shown_in in errors.items():
        where = shown_in[0] if len(shown_in) == 1 else f"{len(shown_in)} configurations, e.g. {shown_in[0]}"
        findings.append(Finding("recipe-v1", f"{render_v1.V1_DIRNAME}/recipe.yaml", f"{message} ({where})"))
    findings += [
        Finding("recipe-v1", f"{render_v1.V1_DIRNAME}/recipe.yaml", drift.line())
        for drift in render_v1.drifts(differences)
    ]
    return findings


def _yaml_problem(path: Path) -> str | None:
    """Why a file is not YAML (its line and column), None when it is."""
    try:
        safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot read it ({exc}); restore it from git"
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return f"not YAML{at}: {problem}; fix it (git diff shows what changed)"
    return None


def check_anchor_parity(
    root: Path, *, cause_reported: bool = False, feedstock: Feedstock | None = None
) -> list[Finding]:
    """The anchor-parity table (feedstock_tools/maintainer/anchor_parity.yaml) against the driver's
    environment and the rendered recipe of every family, its decisions against its values, its document:
    one finding per row and problem, naming the families it shows in and the file to edit. Where the driver
    refuses a family's environment the table is not computed: one finding, none when ``cause_reported``
    (another finding, a refused GPU architecture list, names the cause already)."""
    try:
        found_problems = anchor_parity.problems(root, feedstock)
    except anchor_parity.DriverRefusal as exc:
        return [] if cause_reported else [Finding("anchor-parity", anchor_parity.TABLE_NAME, str(exc))]
    grouped: dict[tuple[str, str], list[str]] = {}
    for problem in found_problems:
        grouped.setdefault((problem.setting, problem.fix), []).append(problem.family)
    findings = []
    for (setting, fix), families in grouped.items():
        if setting == anchor_parity.DOC_NAME:
            findings.append(Finding("anchor-parity", anchor_parity.DOC_NAME, fix))
            continue
        where = f"{anchor_parity.TABLE_NAME}: {setting} [{', '.join(families)}]"
        findings.append(
            Finding(
                "anchor-parity",
                where,
                f"{fix} (edit the row in {anchor_parity.TABLE_NAME}, then anchor-parity --write; or "
                "restore the setting the row describes)",
            )
        )
    return findings


def progress(line: str) -> None:
    """A line on a terminal's stderr while the renders run (a minute on a loaded machine); never in a pipe,
    where the findings (or one error line) are all a caller reads."""
    if sys.stderr.isatty():
        print(line, file=sys.stderr, flush=True)


def _dedupe(findings: list[Finding]) -> list[Finding]:
    return list(dict.fromkeys(findings))


def run(args: argparse.Namespace) -> int:
    # a bump stopped after its first write left its journal: the tree is put back before it is judged
    recovered = tree_journal.recover(args.root)
    if recovered:
        print(recovered, file=sys.stderr, flush=True)
    findings = run_checks(args.root, locate_pinning(args.pinning), None if args.json else print_patch_report)
    if args.json:
        print(json.dumps([asdict(finding) for finding in findings], indent=2))
    else:
        for finding in findings:
            print(finding.line())
        print(f"{len(findings)} finding(s)" if findings else "recipe is consistent: no findings")
    return 1 if findings else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check",
        help="recipe consistency check: patches, host requirements, tests, build ids, CI files",
        description=(
            "Render every configuration a rerender would produce and check the recipe's rules: every "
            "patch in recipe/patches is listed in meta.yaml, exists and has a git format-patch header "
            "with Why:, Upstream status: and Context verified against:; every hunk of every listed patch "
            "applies to the upstream text in tests/patch_fixtures, alone and in each configuration's "
            "series (a table: applies / conflicts / unknown text; docs/reference/patches.md); scripted "
            "outputs keep the top-level host requirements; every "
            "output has a test; build numbers follow CUDA +200 + version digits, MKL +100, MAGMA +50 and "
            "build strings cuda{ver}_{blas}[_py{CONDA_PY}|_magma|_nomagma]_h{hash}_{n} (cpu_ for CPU); "
            ".ci_support is what the CI generator writes; the staging table and the outputs agree; "
            "recipe-v1/recipe.yaml says what meta.yaml says (one line per item one recipe lacks); the "
            "anchor-parity table holds (feedstock_tools/maintainer/anchor_parity.yaml). "
            "Prints one line per finding and exits 1 when there is any. A bump stopped by a kill after its "
            "first write is put back first, from its journal, with one line saying so."
        ),
    )
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="feedstock root (default: %(default)s)")
    add_pinning_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.set_defaults(func=run)
