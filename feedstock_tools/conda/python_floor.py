"""The recipe's oldest Python: ``python_min`` (conda-forge's key, CFEP-25: pass 1's host Python here) and the
pytorch output's ``skip: true  # [py<NNN]``, which keeps the per-Python builds from going below it.

conda-forge's pinning builds every Python of its ``python`` list; ``python_min`` alone moves only pass 1's
Python, so a floor above the pinning's oldest Python needs the output-level skip too (a ``py`` selector at the
top level would split CI jobs per Python: docs/reference/architecture.md). The skip is text of meta.yaml,
found and written here by one pattern (the bump and ``python-floor`` write it; ``check`` reports a skip
that is not ``python_min``'s).
"""

from __future__ import annotations

import re

from feedstock_tools.common.errors import ToolError

META = "recipe/meta.yaml"
# The pytorch output's build section, where a Python floor becomes an output-level skip.
_PYTORCH_BUILD = re.compile(
    r"(?P<head>^  - name: pytorch\n(?:    script: .*\n)*    build:\n      number: \{\{ number \}\}\n)"
    r"(?P<skip>      skip: true  # \[py<\d+\]\n)?",
    re.MULTILINE,
)


def _pytorch_build(meta: str) -> re.Match[str]:
    match = _PYTORCH_BUILD.search(meta)
    if not match:
        raise ToolError(
            f"{META}: the pytorch output's build section does not start with 'number: {{{{ number }}}}'; "
            "restore it (git diff recipe/meta.yaml)"
        )
    return match


def python_floor_skip(meta: str) -> str | None:
    """The pytorch output's ``skip: true  # [py<NNN]`` selector, None without one."""
    match = _pytorch_build(meta)
    return match["skip"].strip() if match["skip"] else None


def skip_line(floor: str | None) -> str | None:
    """The skip a floor (``"3.11"``) needs, as :func:`python_floor_skip` returns it; None for none."""
    return f"skip: true  # [py<{floor.replace('.', '')}]" if floor else None


def with_skip(meta: str, floor: str | None) -> str:
    """meta.yaml with the pytorch output skipping the Pythons below ``floor`` (None: no skip)."""
    match = _pytorch_build(meta)
    line = skip_line(floor)
    skip = f"      {line}\n" if line else ""
    return meta[: match.start()] + match["head"] + skip + meta[match.end() :]
