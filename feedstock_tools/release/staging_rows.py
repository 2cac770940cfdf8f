"""The staging table (``recipe/megabuild/package_files.py``) over every platform's wheel of the release:
files no rule places, files two rules place, rules that claimed files of the current version and none now."""

from __future__ import annotations

from typing import get_args

from feedstock_tools.release.release_metadata import Release
from feedstock_tools.release.rows import PERSON, SAME, Row, examples
from feedstock_tools.release.wheel_source import WheelSource
from megabuild import package_files, staging


def tree_paths(member: str) -> list[tuple[str, str]]:
    """The (tree, path) places a wheel member takes in the build tree wheel-layout lays a wheel out as."""
    first = member.split("/", 1)[0]
    if first.endswith(".dist-info"):
        return [("metadata", member)]
    places = [("setuptools", member)]
    parts = member.split("/")
    if len(parts) > 2 and parts[0] == "torch" and parts[1] in staging.INSTALL_TREE_DIRS:
        places.append(("install", "/".join(parts[1:])))
    return places


def claims(source: WheelSource, shlib_ext: str) -> tuple[dict[str, list[str]], list[str], list[str]]:
    """The staging table over a wheel's files: rule -> claimed paths, unclaimed paths, doubly claimed ones."""
    rules = package_files.rules_for(shlib_ext)
    claiming = {tree: staging.rules_claiming(rules, tree, shlib_ext) for tree in get_args(package_files.Tree)}
    claimed: dict[str, list[str]] = {}
    unclaimed, twice = [], []
    for listed in source.files():
        for tree, path in tree_paths(listed.path):
            owners = claiming[tree](path)
            if not owners:
                unclaimed.append(f"{tree}:{path}")
            elif len(owners) > 1:
                twice.append(f"{tree}:{path}")
            for rule in owners:
                claimed.setdefault(f"{rule.tree}:{rule.pattern}", []).append(path)
    return claimed, unclaimed, twice


def shlib(subdir: str) -> str:
    return {"linux": ".so", "osx": ".dylib", "win": ".dll"}[subdir.split("-", maxsplit=1)[0]]


def staging_rows(release: Release, previous: Release | None) -> list[Row]:
    rows = []
    for subdir, source in release.wheels.items():
        extension = shlib(subdir)
        claimed, unclaimed, twice = claims(source, extension)
        files = len(source.files())
        if unclaimed:
            rows.append(
                Row(
                    "staging",
                    f"{subdir}: new files",
                    "",
                    f"{len(unclaimed)}: {examples(unclaimed, 8)}",
                    PERSON,
                    "add a rule for each to recipe/megabuild/package_files.py: Rule(tree, path, package or "
                    "NOT_SHIPPED, why), or one glob that claims no other file",
                )
            )
        if twice:
            rows.append(
                Row(
                    "staging",
                    f"{subdir}: claimed twice",
                    "",
                    examples(twice),
                    PERSON,
                    "make the rules of recipe/megabuild/package_files.py disjoint",
                )
            )
        old = previous.wheels.get(subdir) if previous else None
        if old is None:
            rows.append(
                Row(
                    "staging",
                    f"{subdir}: rules gone",
                    "",
                    "unknown: no wheel of the recipe's version",
                    PERSON,
                    "pass the current version's wheels too (--wheels) to see which rules claim nothing now",
                )
            )
        else:
            old_claimed, _, _ = claims(old, extension)
            gone = sorted(rule for rule in old_claimed if rule not in claimed)
            if gone:
                rows.append(
                    Row(
                        "staging",
                        f"{subdir}: rules gone",
                        f"claim files of {old.name}",
                        examples(gone, 4),
                        PERSON,
                        "drop each rule, or keep it for a configuration the PyPI wheel does not show",
                    )
                )
            added = len({f.path for f in source.files()} - {f.path for f in old.files()})
            removed = len({f.path for f in old.files()} - {f.path for f in source.files()})
            rows.append(
                Row(
                    "staging",
                    f"{subdir}: files",
                    f"{len(old.files())}",
                    f"{files} (+{added} / -{removed})",
                    SAME,
                )
            )
        if not unclaimed and not twice and old is None:
            rows.append(
                Row("staging", f"{subdir}: files", "", f"{files}, every one placed by one rule", SAME)
            )
    return rows
