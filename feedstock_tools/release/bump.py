"""``python -m feedstock_tools bump VERSION --sha256 HASH``: the release bump a maintainer does.

It edits the recipe (version, source hash, build number 0, the Python floor, the build backend, the run
requirements upstream's wheels declare), writes what it read of the patched files from the wheels as the
release's patch evidence, re-renders ``.ci_support`` and ``recipe-v1/`` (render-ci, convert-v1) and prints
one table of what it changed and what needs a person. Each area is a module of its own (``*_rows.py``); this
one runs them as :data:`STAGES`, all or nothing (:mod:`.transaction`): any failure, in a row, a write or the
render, puts every file back and is one line naming the stage; a bump killed after its first write is put
back by the next ``bump`` or ``check`` from its journal (:mod:`feedstock_tools.common.tree_journal`), which
says so in one line.
Exit 0 when nothing needs a person, 2 when something does, 1 (one line, nothing written) on bad input.

It fetches nothing: the wheels come from ``--wheels`` or pip's cache (:mod:`.wheel_source`), a real wheel
or its fixture set alike. docs/guides/bump-a-release.md has the procedure and what each row asks,
docs/reference/bump.md the stages and docs/records/ the release reports.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from feedstock_tools.ci import ci_support
from feedstock_tools.common import tree_journal
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.feedstock import Feedstock
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.conda.pinning import add_pinning_argument, locate_pinning
from feedstock_tools.conda.python_floor import python_floor_skip
from feedstock_tools.maintainer import anchor_parity
from feedstock_tools.maintainer.conda_pins import conda_forge_pins
from feedstock_tools.maintainer.version_compare import version_numbers
from feedstock_tools.release import (
    backend_rows,
    bundled_rows,
    cuda_rows,
    fixtures,
    linkage_rows,
    patch_rows,
    recipe_edit,
    requirement_rows,
    solve_rows,
    staging_rows,
    transaction,
    wheel_source,
)
from feedstock_tools.release.release_metadata import Release, load_release, previous_release, python_floor
from feedstock_tools.release.rows import CHANGED, PERSON, SAME, Row, format_table
from megabuild import atomic_file  # the one writer: a unique temporary file, removed on error

# conda's spelling of a release (X.Y.Z, or X.Y.Z.rcN for upstream's vX.Y.Z-rcN; meta.yaml's comment)
VERSION = re.compile(r"^\d+\.\d+\.\d+(?:\.rc\d+)?$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass
class BumpState:
    """What the stages share: the inputs, the recipe's text before and after, and the rows so far."""

    root: Path
    version: str
    sha256: str
    wheel_dirs: list[Path]
    pinning: Path
    meta: str
    config: str
    new_meta: str = ""
    new_config: str = ""
    release: Release | None = None
    previous: Release | None = None
    floor: str = ""
    evidence: patch_rows.ReleaseEvidence | None = None
    rows: list[Row] = field(default_factory=list)
    view: Feedstock | None = None

    @property
    def feedstock(self) -> Feedstock:
        """The tree as the stages read it, each configuration read once; a new view once render-ci wrote
        the configurations."""
        if self.view is None:
            self.view = Feedstock(self.root)
        return self.view

    @property
    def the_release(self) -> Release:
        assert self.release is not None, "the release stage runs first"
        return self.release


# ---- the stages, in order: the pure ones, the writes, then the rows that read the written tree ------------


def read_release(state: BumpState) -> None:
    """Reads every platform's wheel of the release (or its fixture set), each checked to be what its name
    says, and the current version's where they are at hand; a missing wheel stops the bump here."""
    state.release = load_release(state.wheel_dirs, state.version)
    current = recipe_edit.read_version(state.meta).version
    state.previous = previous_release(state.wheel_dirs, current)


def set_source(state: BumpState) -> None:
    """Sets the recipe's version and sha256 and resets the build number to 0; the rows say what the
    person checks: that the sha256 is the release tarball's."""
    current = recipe_edit.read_version(state.meta)
    state.new_meta = recipe_edit.set_version(state.meta, state.version, state.sha256)
    state.rows += [
        Row("source", "version", current.version, state.version, CHANGED),
        Row(
            "source",
            "sha256",
            current.sha256[:12] + "...",
            state.sha256[:12] + "...",
            CHANGED,
            f"must be sha256sum of pytorch-v{state.version}.tar.gz (GitHub release asset)",
        ),
        Row("source", "build number", str(current.build), "0", SAME if current.build == 0 else CHANGED),
    ]


def set_python_floor(state: BumpState) -> None:
    """Sets the oldest Python to the wheels' Requires-Python: python_min and the pytorch output's skip
    where the floor is above the pinning's python_min, neither where it is not."""
    floor = state.floor = python_floor(state.the_release)
    pinned = conda_forge_pins(state.pinning, "linux-64").get("python_min", ["?"])[0]
    written = floor if version_numbers(floor) > version_numbers(str(pinned)) else None
    old_skip = python_floor_skip(state.meta) or f"(pinning's python_min {pinned})"
    before = state.new_meta
    state.new_meta, state.new_config = recipe_edit.set_python_floor(state.new_meta, state.config, written)
    shown = (
        f"{floor} (python_min + pytorch skip py<{floor.replace('.', '')})"
        if written
        else f"{floor} (the pinning's python_min)"
    )
    changed = state.new_meta != before or state.new_config != state.config
    state.rows.append(
        Row("python", "oldest Python (Requires-Python)", old_skip, shown, CHANGED if changed else SAME)
    )


def set_build_backend(state: BumpState) -> None:
    """Checks the wheels' build backend (their WHEEL Generator) and sets scikit-build-core in the host at
    the lowest version any wheel names, or removes it for a setuptools release."""
    state.new_meta, rows = backend_rows.backend_change(state.the_release, state.new_meta)
    state.rows += rows


def set_run_requirements(state: BumpState) -> None:
    """Checks the pytorch output's run requirements against the wheels' Requires-Dist and brings
    each to it, one line per CUDA series where a package follows the toolkit."""
    state.new_meta, rows = requirement_rows.requirement_changes(
        state.the_release, state.new_meta, state.feedstock
    )
    state.rows += rows


def check_solve_records(state: BumpState) -> None:
    """Checks the bumped run requirements against solve-check's records and requests: a spec no record
    meets, a request for a Python below the new floor."""
    state.rows += solve_rows.solve_record_rows(state.new_meta)
    state.rows += solve_rows.solve_request_rows(state.floor)


def check_staging(state: BumpState) -> None:
    """Checks the staging table against every wheel of the release: files no rule places, files two
    rules place, rules that placed files of the current version and none now."""
    state.rows += staging_rows.staging_rows(state.the_release, state.previous)


def check_patches(state: BumpState) -> None:
    """Judges every hunk of every patch against the release's text of the files it changes, as the wheels
    carry them: the evidence the bump writes and check reads back."""
    state.evidence = patch_rows.release_evidence(state.root, state.the_release)
    state.rows += patch_rows.patch_rows(state.root, state.evidence)


def write_recipe(state: BumpState) -> None:
    """Writes the bumped meta.yaml and conda_build_config.yaml (each through the one writer)."""
    atomic_file.write_text(state.root / recipe_edit.META, state.new_meta, newline="")
    atomic_file.write_text(state.root / recipe_edit.CONFIG, state.new_config, newline="")


def write_patch_evidence(state: BumpState) -> None:
    """Writes the release's patch evidence, which check judges the patches against until a pre-image
    from the tarball replaces it."""
    assert state.evidence is not None, "the patches stage runs before"
    path = patch_rows.evidence_path(state.root, state.version)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_file.write_text(path, state.evidence.text, newline="")
    state.rows.append(
        Row(
            "patch",
            "evidence",
            "",
            f"{path.relative_to(state.root)}: {len(state.evidence.segments)} files",
            CHANGED,
            "what check judges this release's patches against, until a pre-image from the tarball replaces "
            "it (docs/reference/patches.md)",
        )
    )


def render_ci(state: BumpState) -> None:
    """Writes what render-ci writes: .ci_support, the workflow and recipe-v1/ converted from the bumped
    meta.yaml (convert-v1), so every change above reaches the v1 recipe and nothing is left to mirror by
    hand."""
    written = ci_support.write_files(state.root, state.pinning)
    state.view = None  # the rows below read the configurations just written
    state.rows.append(
        Row(
            "ci",
            ".ci_support, workflow and recipe-v1",
            "",
            f"{len(written)} files rewritten (render-ci)",
            CHANGED if written else SAME,
        )
    )


def check_bundled_versions(state: BumpState) -> None:
    """Checks the versions the release bundles (pybind11, ...) against the pins the rendered
    configurations build with."""
    state.rows += bundled_rows.bundled_rows(state.feedstock, state.the_release)


def check_cuda(state: BumpState) -> None:
    """Checks PyPI's CUDA builds of the release against the CUDA versions the rendered configurations
    build, and the oldest CUDA the release's CMake accepts against the oldest built."""
    state.rows += cuda_rows.cuda_rows(state.feedstock, state.the_release)


def check_linkage(state: BumpState) -> None:
    """Checks each wheel's binaries, staged by the table, against the bumped recipe's run requirements
    (the libraries they need), after the libraries the current version's did not need."""
    state.rows += linkage_rows.linkage_rows(state.feedstock, state.the_release, state.previous)


def refresh_anchor_parity(state: BumpState) -> None:
    """Checks the parity table against the bumped recipe (its values that follow the recipe, its
    decisions) and rewrites its document from it."""
    problems, written = anchor_parity.refresh(state.root)
    for problem in problems:
        state.rows.append(
            Row(
                "anchor parity",
                problem.setting,
                problem.expected,
                problem.found,
                PERSON,
                f"edit the row in {anchor_parity.TABLE_NAME}: {problem.fix}",
            )
        )
    if written:
        state.rows.append(Row("anchor parity", "document", "", f"{written} rewritten", CHANGED))


Stage = Callable[[BumpState], None]
STAGES: tuple[tuple[str, Stage], ...] = (
    ("release", read_release),
    ("source", set_source),
    ("python", set_python_floor),
    ("build backend", set_build_backend),
    ("run requirements", set_run_requirements),
    ("solve-check", check_solve_records),
    ("staging", check_staging),
    ("patches", check_patches),
    ("write recipe", write_recipe),
    ("write patch evidence", write_patch_evidence),
    ("render-ci", render_ci),
    ("bundled versions", check_bundled_versions),
    ("CUDA", check_cuda),
    ("linkage", check_linkage),
    ("anchor parity", refresh_anchor_parity),
)


# ---- the bump ------------------------------------------------------------------------------------------


@dataclass
class Bump:
    rows: list[Row]

    @property
    def needs_a_person(self) -> bool:
        """Whether a row asks the person for a decision the bump cannot make."""
        return any(row.status == PERSON for row in self.rows)


def check_arguments(version: str, sha256: str) -> None:
    """The release as conda spells it and the tarball's sha256; a one-line ToolError naming the fix."""
    if not VERSION.match(version):
        raise ToolError(
            f"version {version!r} is not X.Y.Z (or X.Y.Z.rcN): give the release as conda spells "
            "it, e.g. 2.15.0"
        )
    if not SHA256.match(sha256):
        raise ToolError(
            f"--sha256 {sha256!r} is not 64 lower-case hex digits: give sha256sum of "
            f"pytorch-v{version}.tar.gz"
        )


def bump(root: Path, version: str, sha256: str, wheel_dirs: list[Path], pinning: Path) -> Bump:
    """Bump the feedstock at ``root`` to ``version``; all or nothing, also across a kill (a stopped bump's
    journal is put back first, one line on stderr)."""
    check_arguments(version, sha256)
    recovered = tree_journal.recover(root)
    if recovered:
        print(recovered, file=sys.stderr, flush=True)
    meta_path, config_path = root / recipe_edit.META, root / recipe_edit.CONFIG
    for path in (meta_path, config_path):
        if not path.is_file():
            raise ToolError(f"{path} not found: pass the feedstock root with --root")
    meta, config = meta_path.read_text(encoding="utf-8"), config_path.read_text(encoding="utf-8")
    current = recipe_edit.read_version(meta)
    if version_numbers(version) <= version_numbers(current.version):
        raise ToolError(f"{version} is not newer than the recipe's {current.version}: give the new release")
    state = BumpState(root, version, sha256, wheel_dirs, pinning, meta, config)
    running = [STAGES[0][0]]

    def stages() -> None:
        """Every stage in order, each named on the progress line as it starts."""
        for number, (name, stage) in enumerate(STAGES, start=1):
            running[0] = name
            progress(f"bump {version}: [{number}/{len(STAGES)}] {name}")
            stage(state)

    try:
        transaction.all_or_nothing(root, stages, f"the bump of {root} to {version}")
    except ToolError:
        raise
    except Exception as exc:
        # a late failure (a .ci_support that is a file, a render that breaks) is one line, never a
        # traceback; the tree is already put back (an interruption, a BaseException, passes as it is)
        raise ToolError(
            f"bump {version}: the stage {running[0]!r} failed ({type(exc).__name__}: {exc}); every file is "
            "put back as it was: fix that and run the bump again"
        ) from exc
    return Bump(state.rows)


def progress(line: str) -> None:
    """A line per stage on a terminal's stderr (the bump takes minutes); never in a pipe, where the table
    (or one error line) is all a caller reads."""
    if sys.stderr.isatty():
        print(line, file=sys.stderr, flush=True)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bump",
        help="bump the recipe to a new PyTorch release and report what needs a person",
        description=(
            "Set the recipe to VERSION (version, --sha256, build number 0), raise the Python floor to the "
            "wheels' Requires-Python, bring the pytorch run requirements to their Requires-Dist (one line "
            "per CUDA series where a requirement follows the toolkit), write what the wheels show of the "
            "patched files as the release's patch evidence (what check then judges the patches against), "
            "re-render .ci_support and recipe-v1 (render-ci, convert-v1), and print a table: each change, "
            "the solve-check records and requests, the bundled versions the recipe's pins must match, the "
            "staging table and the linkage against every platform's wheel, every patch hunk, the CUDA "
            "versions upstream ships and the anchor parity table. Reads the wheels (or their fixture sets) "
            "from --wheels or pip's cache; fetches nothing. Exit 2 when a row needs a person; bad input is "
            "one line, exit 1, nothing written; a failure after the first write puts every file back (one "
            "line); a bump killed after its first write is put back by the next bump or check, from its "
            "journal in the git directory. "
            "docs/guides/bump-a-release.md says what each row asks."
        ),
    )
    parser.add_argument("version", help="the release as conda spells it: 2.15.0 (2.15.0.rc1 for v2.15.0-rc1)")
    parser.add_argument("--sha256", help="sha256sum of the release tarball pytorch-vVERSION.tar.gz")
    parser.add_argument(
        "--wheels",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="directory holding torch-VERSION-cp312-cp312-PLATFORM.whl for every platform, or their fixture "
        "sets (repeatable; default: pip's cache directory)",
    )
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="feedstock root (default: %(default)s)")
    parser.add_argument(
        "--cut-fixtures",
        type=Path,
        metavar="DIR",
        help="instead: write the fixture set of each real wheel of VERSION into DIR (the CI fixtures)",
    )
    parser.add_argument("--provenance", default="", help="with --cut-fixtures: where the wheels came from")
    add_pinning_argument(parser)
    parser.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    directories = args.wheels or [d for d in [wheel_source.pip_cache_dir()] if d]
    for directory in args.wheels:
        if not directory.is_dir():
            raise ToolError(f"--wheels {directory} is not a directory: pass the directory holding the wheels")
    if args.cut_fixtures is not None:
        if args.sha256:
            raise ToolError("--cut-fixtures writes fixtures and bumps nothing: leave --sha256 out")
        args.cut_fixtures.mkdir(parents=True, exist_ok=True)
        for path in fixtures.cut(args.version, directories, args.cut_fixtures, args.root, args.provenance):
            print(f"wrote {path} ({path.stat().st_size} bytes)")
        return 0
    if not args.sha256:
        raise ToolError(
            f"--sha256 is required: give sha256sum of the release tarball pytorch-v{args.version}.tar.gz"
        )
    result = bump(args.root, args.version, args.sha256, directories, locate_pinning(args.pinning))
    print(format_table(result.rows))
    people = sum(row.status == PERSON for row in result.rows)
    print(
        f"\nbumped {args.root} to {args.version}: "
        + (f"{people} row(s) need a person" if people else "nothing needs a person")
    )
    return 2 if result.needs_a_person else 0
