"""The CI fixtures of a release's wheels (``bump VERSION --cut-fixtures DIR``): of each real wheel, the
file list, the needs list and the lines the bump reads (:func:`.wheel_source.cut_fixtures`)."""

from __future__ import annotations

import re
from pathlib import Path

from feedstock_tools.common.errors import ToolError
from feedstock_tools.maintainer import patch_hunks
from feedstock_tools.release import wheel_source
from feedstock_tools.release.bundled_rows import BUNDLED_PINS
from feedstock_tools.release.cuda_rows import CUDA_CMAKE, CUDA_FLOOR
from feedstock_tools.release.patch_rows import HEADERS, patch_paths, wheel_member
from feedstock_tools.release.release_metadata import dist_info_member
from feedstock_tools.release.wheel_source import TARGETS, WheelSource


def fixture_lines(source: WheelSource, root: Path) -> dict[str, list[int] | None]:
    """The lines of each member a fixture set keeps for the bump: whole WHEEL and version.py, METADATA's
    headers, the version lines of the bundled headers and of the CUDA floor, and each patch hunk's lines
    where it applies in this wheel (or where it expected them, when it conflicts), with 3 lines around."""
    keep: dict[str, list[int] | None] = {"torch/version.py": None}
    wheel_info = dist_info_member(source, "WHEEL")
    if wheel_info:
        keep[wheel_info] = None
    metadata = dist_info_member(source, "METADATA")
    if metadata:
        headers = (source.text(metadata) or "").split("\n\n", 1)[0]
        keep[metadata] = list(range(1, headers.count("\n") + 2))
    for member, pattern in [
        *((pin.header, pin.pattern) for pin in BUNDLED_PINS),
        (CUDA_CMAKE, CUDA_FLOOR),
    ]:
        text = source.text(member)
        if text is not None:
            keep[member] = [n for n, line in enumerate(text.split("\n"), 1) if re.search(pattern, line)]
    for patch in patch_paths(root):
        for diff in patch_hunks.parse_patch(patch.read_text()):
            member = wheel_member(diff.old_path or diff.path)
            text = source.file_text(member) if member else None
            if member is None or text is None:
                continue
            lines = keep.setdefault(member, [])
            if member.startswith(HEADERS):
                lines.append(1)  # the build's guard line, by which patch_rows reads the header unwrapped
            for hunk in diff.hunks:
                judgement = patch_hunks.judge_hunk(hunk, text)
                start = judgement.line or hunk.old_start
                lines += range(max(1, start - 3), start + len(hunk.old_lines) + 3)  # type: ignore[union-attr]
    return keep


def cut(version: str, wheel_dirs: list[Path], out: Path, root: Path, provenance: str) -> list[Path]:
    """The fixture set of every target's real wheel of ``version`` (file list, needs list, texts)."""
    written = []
    for target in TARGETS:
        source = wheel_source.find_wheel(wheel_dirs, version, target)
        if not isinstance(source, wheel_source.ZipWheel):
            raise ToolError(
                f"no real wheel {target.wheel_name(version)} to cut: {target.pip_download(version)}"
            )
        written += wheel_source.cut_fixtures(source.path, out, fixture_lines(source, root), provenance)
    return written
