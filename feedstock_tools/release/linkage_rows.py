"""Each wheel's binaries staged by the table and checked against the bumped recipe (``wheel-layout``'s
linkage check on a skeleton of the wheel: real names, empty files, the needs lists), after the libraries they
need that the current version's binaries did not (or no longer)."""

from __future__ import annotations

import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

from feedstock_tools.common.configuration import Configuration
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.feedstock import Feedstock
from feedstock_tools.maintainer.version_compare import version_numbers
from feedstock_tools.proofs.wheels import linkage, wheel_layout
from feedstock_tools.release.release_metadata import Release, cuda_of
from feedstock_tools.release.rows import PERSON, SAME, Row, examples
from feedstock_tools.release.wheel_source import WheelSource


def config_for(feedstock: Feedstock, subdir: str, cuda: str | None) -> Configuration | None:
    """The rendered configuration the linkage of a wheel is checked against: its subdir, the CUDA version
    nearest the wheel's (CPU for a CPU wheel), cut to generic BLAS where it builds that."""
    configs: list[tuple[tuple[int, int, bool], str, Configuration]] = []
    for config in feedstock.configurations():
        if config.target_platform != subdir:
            continue
        if (cuda is None) != (config.cuda is None) or config.arm_variant == "tegra":
            continue
        distance = major = 0
        if cuda and config.cuda:
            distance = abs(version_numbers(config.cuda)[-1] - version_numbers(cuda)[-1])
            major = abs(version_numbers(config.cuda)[0] - version_numbers(cuda)[0])
        configs.append(((major, distance, "generic" not in config.blases), config.name, config))
    if not configs:
        return None
    chosen = min(configs)[2]
    return chosen.for_blas("generic") if "generic" in chosen.blases else chosen


def needed_libraries(source: WheelSource) -> set[str]:
    return {library for needs in source.needs().values() for library in needs.needed}


def linkage_rows(feedstock: Feedstock, release: Release, previous: Release | None) -> list[Row]:
    """Each wheel's binaries staged by the table and checked against the bumped recipe (the needs lists),
    after the libraries they need that the current version's binaries did not (or no longer)."""
    rows = []
    for subdir, source in release.wheels.items():
        old = previous.wheels.get(subdir) if previous else None
        if old is not None:
            new_needs, old_needs = needed_libraries(source), needed_libraries(old)
            added, gone = sorted(new_needs - old_needs), sorted(old_needs - new_needs)
            change = ", ".join([*(f"+{n}" for n in added), *(f"-{n}" for n in gone)]) or "none"
            rows.append(
                Row(
                    "needs",
                    subdir,
                    f"{len(old_needs)} libraries",
                    f"{len(new_needs)}: {change}",
                    SAME,
                    "" if not added else "the linkage row says whether each resolves",
                )
            )
        cuda = cuda_of(source)
        config = config_for(feedstock, subdir, cuda)
        if config is None:
            rows.append(
                Row("linkage", subdir, "", f"no configuration for CUDA {cuda}", PERSON, "render-ci first")
            )
            continue
        needs = source.needs()
        markers = {"torch/__init__.py", "torch/version.py"}
        members = [
            f
            for f in source.files()
            if f.path in needs or f.path in markers or f.path.endswith(".dist-info/METADATA")
        ]
        try:
            report = _check_skeleton(feedstock.root, source.name, members, needs, config)
        except ToolError as exc:
            rows.append(
                Row(
                    "linkage",
                    subdir,
                    config.path.name,
                    str(exc),
                    PERSON,
                    "place the binary in the staging table",
                )
            )
            continue
        if report.errors:
            rows.append(
                Row(
                    "linkage",
                    subdir,
                    config.path.name,
                    f"{len(report.errors)} unresolved: {examples(report.errors, 2)}",
                    PERSON,
                    "add the providing package as a run requirement, or a row to runtime_libraries.py",
                )
            )
        else:
            rows.append(
                Row(
                    "linkage",
                    subdir,
                    config.path.name,
                    f"{report.needs} needs of {report.binaries} binaries resolve",
                    SAME,
                )
            )
    return rows


def _check_skeleton(
    root: Path,
    name: str,
    members: list,
    needs: Mapping[str, linkage.BinaryNeeds],
    config: Configuration,
) -> linkage.LinkageReport:
    with tempfile.TemporaryDirectory(prefix="bump-linkage-") as scratch:
        work = Path(scratch)
        wheel = work / name
        with zipfile.ZipFile(wheel, "w") as archive:
            for listed in members:
                info = zipfile.ZipInfo(listed.path)
                info.external_attr = (0o100000 | listed.mode) << 16
                archive.writestr(info, b"")
        tag = wheel_layout.parse_wheel_name(wheel)
        with wheel_layout.staging_errors_as_tool_errors(work / "out"):
            trees = wheel_layout.lay_out_wheel_as_build_tree(wheel, work / "out" / "src")
            prefixes = wheel_layout.stage_into_prefixes(trees, tag, work / "out")
            specs = linkage.recipe_packages(root / "recipe", config, prefixes, tag.python, tag.platform)
            reader = linkage.StagedWheelNeeds(needs, work / "out" / "packages", tag.site_packages)
            return linkage.LinkageCheck(specs, tag.platform, wheel=True, reader=reader).run()
