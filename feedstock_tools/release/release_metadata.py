"""A release's wheels and what they declare: METADATA (Requires-Python, Requires-Dist), WHEEL, version.py.

:func:`load_release` finds every target's wheel of a version (a real wheel or its fixture set,
:mod:`.wheel_source`) and refuses one that is not what its name says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from feedstock_tools.common.errors import ToolError
from feedstock_tools.maintainer import patch_hunks
from feedstock_tools.maintainer.upstream_versions import parse_requirement
from feedstock_tools.proofs.wheels import wheel_layout
from feedstock_tools.release import wheel_source
from feedstock_tools.release.wheel_source import TARGETS, WheelSource


@dataclass
class Release:
    """A release's wheels and what they declare."""

    version: str
    wheels: dict[str, WheelSource]  # by subdir
    metadata: dict[str, str] = field(default_factory=dict)  # by subdir: METADATA text

    def file_text(self, member: str) -> tuple[str, patch_hunks.FileText] | None:
        """The member's lines from the first platform's wheel that has it, with that subdir."""
        for subdir, source in self.wheels.items():
            text = source.file_text(member)
            if text is not None:
                return subdir, text
        return None

    def text(self, member: str) -> tuple[str, str] | None:
        """The member's text from the first platform's wheel that has it, with that subdir."""
        for subdir, source in self.wheels.items():
            text = source.text(member)
            if text is not None:
                return subdir, text
        return None


def dist_info_member(source: WheelSource, name: str) -> str | None:
    for listed in source.files():
        parts = listed.path.split("/")
        if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == name:
            return listed.path
    return None


def header(text: str, key: str) -> list[str]:
    """Every value of an RFC 822 header (METADATA, WHEEL) named ``key``."""
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith(f"{key}:")]


def load_release(directories: list[Path], version: str) -> Release:
    """Every target's wheel of ``version``, each checked to be what its name says."""
    release = Release(version, wheel_source.find_wheels(directories, version))
    for subdir, source in release.wheels.items():
        target = next(t for t in TARGETS if t.subdir == subdir)
        metadata_member = dist_info_member(source, "METADATA")
        metadata = source.text(metadata_member) if metadata_member else None
        if metadata is None:
            raise ToolError(
                f"{source.name}: no torch-*.dist-info/METADATA text: not a PyTorch wheel "
                "(or a fixture set without texts); cut it again"
            )
        declared = (header(metadata, "Version") or ["?"])[0].split("+")[0]
        if header(metadata, "Name") != ["torch"] or declared != version:
            raise ToolError(
                f"{source.name}: its METADATA says {header(metadata, 'Name')[:1]} {declared}, "
                f"not torch {version}: "
                "the file is misnamed; download the wheel again"
            )
        wheel_member_name = dist_info_member(source, "WHEEL")
        tags = header(source.text(wheel_member_name) or "", "Tag") if wheel_member_name else []
        if not any(tag.endswith(f"-{target.platform_tag}") for tag in tags):
            raise ToolError(
                f"{source.name}: its WHEEL file tags it {', '.join(tags) or 'nothing'}, "
                f"not {target.platform_tag}: "
                "the file is misnamed; download the wheel again"
            )
        release.metadata[subdir] = metadata
    return release


def previous_release(wheel_dirs: list[Path], version: str) -> Release | None:
    """The recipe's current version's wheels, where they are at hand (for the staging rules gone)."""
    found = {}
    for target in TARGETS:
        source = wheel_source.find_wheel(wheel_dirs, version, target)
        if source is not None:
            found[target.subdir] = source
    return Release(version, found) if found else None


def python_floor(release: Release) -> str:
    """The oldest Python of the release (``Requires-Python: >=3.11`` -> ``3.11``), the same on every wheel."""
    floors = set()
    for subdir, metadata in release.metadata.items():
        spec = (header(metadata, "Requires-Python") or [""])[0]
        match = re.fullmatch(r">=\s*(\d+\.\d+)(?:\.0)?", spec)
        if not match:
            raise ToolError(
                f"{release.wheels[subdir].name}: Requires-Python {spec!r} is not '>=X.Y': "
                "set the Python floor by hand"
            )
        floors.add(match[1])
    if len(floors) != 1:
        raise ToolError(
            f"the wheels of {release.version} disagree on Requires-Python ({', '.join(sorted(floors))})"
        )
    return floors.pop()


def requirements(release: Release) -> dict[str, tuple[str, str]]:
    """Every Requires-Dist of the wheels (extras left out): normalised name -> (spec, marker), the first
    wheel's declaration of each name."""
    found: dict[str, tuple[str, str]] = {}
    for metadata in release.metadata.values():
        for line in header(metadata, "Requires-Dist"):
            parsed = parse_requirement(line)
            if parsed and "extra" not in parsed[2]:
                found.setdefault(parsed[0], (parsed[1], parsed[2]))
    return found


def cuda_of(source: WheelSource) -> str | None:
    """The CUDA version a wheel was built for (its torch/version.py), None for a CPU wheel."""
    match = wheel_layout.WHEEL_CUDA.search(source.text("torch/version.py") or "")
    return match["version"] if match else None


def release_cuda(release: Release) -> str | None:
    """The CUDA version of the release's CUDA wheel (PyPI ships one per platform; the first one found)."""
    return next((cuda for source in release.wheels.values() if (cuda := cuda_of(source))), None)
