"""What solve-check needs after a bump: a record of every run requirement that meets its new spec
(``feedstock_tools/proofs/solve/solve_metadata.yaml``), and no request for a Python the release dropped
(``feedstock_tools/proofs/solve/solve_requests.yaml``)."""

from __future__ import annotations

import re

from feedstock_tools.maintainer.version_compare import satisfies, version_numbers
from feedstock_tools.proofs.solve import solve_channel, solve_check
from feedstock_tools.release import recipe_edit
from feedstock_tools.release.rows import PERSON, SAME, Row
from megabuild import package_files

METADATA = "feedstock_tools/proofs/solve/solve_metadata.yaml"
# run requirements solve-check makes records of itself: the recipe's own packages and Python
NEEDS_NO_RECORD = frozenset({"python", package_files.LIBTORCH, package_files.PYTORCH})
_RECORD_HOW = (
    "add a record of {line.name} at a real version {line.spec} admits to " + METADATA + "'s dependencies "
    "(name, subdirs, version, per_python for a compiled Python package, builds with the depends that "
    "matter, source). From conda-forge's repodata where you can reach it; offline, from its feedstock's "
    "recipe at a commit (the version, subdirs, run requirements), or, for a version conda-forge has not "
    "built yet, from PyPI (`pip index versions {line.name}`: conda-forge builds upstream's release tags), "
    "saying so in source. Never a made-up version (docs/guides/bump-a-release.md, 'solve-check records')"
)
REQUESTS = "feedstock_tools/proofs/solve/solve_requests.yaml"


def record_versions() -> dict[str, list[str]]:
    """solve-check's records of the dependencies: name -> the literal versions it has."""
    records: dict[str, list[str]] = {}
    for entry in solve_channel.load_metadata()["dependencies"]:
        if isinstance(entry.get("version"), str):
            records.setdefault(str(entry["name"]), []).append(entry["version"])
    return records


def solve_record_rows(meta: str) -> list[Row]:
    """Each run requirement line of the pytorch output against solve-check's records: a spec no record
    meets makes solve-check drop every build that requires it (a line per CUDA series needs a record per
    series)."""
    records = record_versions()
    rows = []
    for line in recipe_edit.run_requirement_lines(meta):
        versions = records.get(line.name, [])
        if line.name.startswith("__") or line.name in NEEDS_NO_RECORD or "{" in line.spec:
            continue  # a virtual package, the recipe's own, or a spec each variant renders
        if not versions:
            rows.append(
                Row(
                    "solve-check record",
                    line.shown(),
                    "(no record)",
                    line.spec or "(any)",
                    PERSON,
                    "solve-check stops on a requirement it has no record of: "
                    + _RECORD_HOW.format(line=line),
                )
            )
            continue
        if not line.spec:
            continue
        meeting = [version for version in versions if satisfies(version, line.spec)]
        if meeting:
            rows.append(Row("solve-check record", line.shown(), ", ".join(meeting), line.spec, SAME))
            continue
        rows.append(
            Row(
                "solve-check record",
                line.shown(),
                ", ".join(versions),
                line.spec,
                PERSON,
                "no record meets the new spec, so solve-check would drop every build needing it: "
                + _RECORD_HOW.format(line=line),
            )
        )
    return rows


def solve_request_rows(floor: str) -> list[Row]:
    """solve-check's requests (solve_requests.yaml) that name a Python below the release's floor: they expect
    a solution the bumped recipe no longer builds. (A "{python}" request is asked once per Python the recipe
    builds, so it follows the floor by itself.)"""
    rows = []
    for request in solve_check.read_table().templates:
        for spec in request.specs:
            match = re.fullmatch(r"python (\d+\.\d+)\.\*", spec)
            if match and version_numbers(match[1]) < version_numbers(floor):
                rows.append(
                    Row(
                        "solve-check request",
                        request.name,
                        "expects a solution",
                        f"no Python {match[1]} build",
                        PERSON,
                        f"in {REQUESTS}, drop the request, or write it for every Python the recipe builds "
                        "(python {python}.*)",
                    )
                )
    return rows
