"""``python-floor``: the oldest Python is one setting, ``python_min`` in recipe/conda_build_config.yaml; this
command writes what follows from it.

``python_min`` (conda-forge's key, CFEP-25) is pass 1's host Python here; conda-forge's pinning still lists
every Python it builds, so a floor above the pinning's oldest Python also needs the pytorch output's ``skip:
true  # [py<NNN]`` (:mod:`feedstock_tools.conda.python_floor`). The command reads both from the variant files
as conda-smithy combines them (the recipe's file over the pinning), writes or removes the skip in meta.yaml,
then writes what a rerender writes (``render-ci``: .ci_support, the workflow matrix, recipe-v1/). ``check``
reports a recipe where they disagree (its ``python-floor`` rule), naming this command.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from feedstock_tools.ci import ci_support
from feedstock_tools.common.configuration import PythonVersion, version_key
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.conda import python_floor
from feedstock_tools.conda.pinning import add_pinning_argument, locate_pinning
from megabuild import atomic_file

SUBDIR = "linux-64"  # python_min and the Python list are the same for every subdir of the pinning


def floor_of(root: Path, pinning: Path) -> str | None:
    """The floor the skip must hold: ``python_min`` where it is above the oldest Python the variant files
    list, else None (no skip)."""
    spec = ci_support.combined_spec(root, pinning, SUBDIR, {})
    pythons = [PythonVersion.parse(str(value)).version for value in spec.get("python") or ()]
    given = spec.get("python_min") or ()
    if not pythons or not given:
        raise ToolError(
            f"no python or python_min in the variant files for {SUBDIR} (recipe/conda_build_config.yaml and "
            "the pinning): restore python_min"
        )
    floor = PythonVersion.parse(str(given[0])).version
    return floor if version_key(floor) > version_key(min(pythons, key=version_key)) else None


def run(args: argparse.Namespace) -> int:
    root: Path = args.root
    pinning = locate_pinning(args.pinning)
    meta = root / "recipe" / "meta.yaml"
    if not meta.is_file():
        raise ToolError(f"{meta} not found: pass the feedstock root with --root")
    text = meta.read_text(encoding="utf-8")
    floor = floor_of(root, pinning)
    wanted = python_floor.with_skip(text, floor)
    if args.check:
        have = python_floor.python_floor_skip(text)
        if wanted != text:
            raise ToolError(
                f"recipe/meta.yaml's pytorch output has {have or 'no skip'}, python_min wants "
                f"{python_floor.skip_line(floor) or 'none'}; run: python -m feedstock_tools python-floor"
            )
        print(f"the pytorch output's skip follows python_min ({python_floor.skip_line(floor) or 'none'})")
        return 0
    changes = []
    if wanted != text:
        atomic_file.write_text(meta, wanted)
        changes.append(
            f"wrote recipe/meta.yaml: {python_floor.skip_line(floor) or 'no skip'} in the pytorch output"
        )
    changes += ci_support.write_files(root, pinning)
    for change in changes or ["nothing to change"]:
        print(change)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "python-floor",
        help="write the pytorch output's skip and the CI files from python_min (--check: report a mismatch)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="feedstock root (default: %(default)s)")
    add_pinning_argument(parser)
    parser.add_argument("--check", action="store_true", help="report a skip python_min does not want")
    parser.set_defaults(func=run)
