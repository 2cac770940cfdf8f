"""The text edits of a release bump on ``recipe/meta.yaml`` and ``recipe/conda_build_config.yaml``.

Edits are made on the text (comments and layout stay as they are), each by one regular expression that
must match exactly where expected; a recipe whose shape the bump does not recognise is an error naming
the line to restore, never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from feedstock_tools.common.errors import ToolError
from feedstock_tools.conda.python_floor import with_skip

META = "recipe/meta.yaml"
CONFIG = "recipe/conda_build_config.yaml"

_SET = r'^\{{% set {name} = (?P<quote>"?)(?P<value>[^"%]*?)(?P=quote) %\}}$'
# The pytorch output's run requirements: from its "      run:" to its "      run_constrained:"
_PYTORCH_RUN = re.compile(
    r"^  - name: pytorch\n.*?^      run:\n(?P<run>.*?)^      run_constrained:", re.MULTILINE | re.DOTALL
)
_RUN_LINE = re.compile(r"^        - (?P<name>[A-Za-z0-9_.-]+)(?: (?P<spec>[^#\n]*?))?(?P<tail>\s*#.*)?$")
# python_min in the recipe's variant file: the bump's block (its comment lines above the key), or one a
# maintainer wrote (docs/guides/add-or-drop-a-python.md)
PYTHON_MIN_BLOCK = re.compile(
    r"^(?:# Python floor of this release.*\n(?:#.*\n)*)?python_min:\n(?:  - .*\n)+", re.MULTILINE
)


@dataclass(frozen=True)
class RecipeVersion:
    version: str
    sha256: str
    build: int


def _set_pattern(name: str) -> re.Pattern[str]:
    return re.compile(_SET.format(name=name), re.MULTILINE)


def read_version(meta: str) -> RecipeVersion:
    values = {}
    for name in ("version", "sha256", "build"):
        found = _set_pattern(name).findall(meta)
        if len(found) != 1:
            raise ToolError(
                f"{META}: expected one '{{% set {name} = ... %}}' line, found {len(found)}: restore it"
            )
        values[name] = _set_pattern(name).search(meta)["value"]  # type: ignore[index]
    return RecipeVersion(values["version"], values["sha256"], int(values["build"]))


def set_version(meta: str, version: str, sha256: str) -> str:
    """version, sha256, and the build number back to 0."""
    for name, value in (("version", f'"{version}"'), ("sha256", f'"{sha256}"'), ("build", "0")):
        meta = _set_pattern(name).sub(f"{{% set {name} = {value} %}}", meta, count=1)
    return meta


def set_python_floor(meta: str, config: str, floor: str | None) -> tuple[str, str]:
    """Raise the oldest Python to ``floor`` ("3.11"), the way a conda-forge feedstock does it: ``python_min``
    in the recipe's conda_build_config.yaml (CFEP-25's key: pass 1's host Python here) and an output-level
    ``skip: true  # [py<311]`` for the per-Python pytorch builds; ``None`` removes both (the pinning's
    ``python_min`` is the floor)."""
    meta = with_skip(meta, floor)
    config = PYTHON_MIN_BLOCK.sub("", config).rstrip("\n") + "\n"
    if floor:
        config += (
            "\n# Python floor of this release (its wheels' Requires-Python), above conda-forge's "
            "python_min;\n"
            "# written by python -m feedstock_tools bump, with the pytorch output's skip in meta.yaml.\n"
            f'python_min:\n  - "{floor}"\n'
        )
    return meta, config


@dataclass(frozen=True)
class RunLine:
    """One line of the pytorch output's run requirements: ``- name spec  # [selector]``."""

    name: str
    spec: str
    tail: str  # the line's comment with its selector ("# [linux]"), "" without one

    @property
    def selector(self) -> str | None:
        """The bracketed selector expression, None for a line every configuration has."""
        match = re.search(r"\[([^\[\]]+)\]\s*$", self.tail)
        return match[1] if match else None

    def shown(self) -> str:
        return f"{self.name} [{self.selector}]" if self.selector else self.name


def run_requirement_lines(meta: str) -> list[RunLine]:
    """The pytorch output's run requirements, line by line (a name may have one line per selector)."""
    match = _PYTORCH_RUN.search(meta)
    if not match:
        raise ToolError(f"{META}: no run requirements found in the pytorch output")
    found = []
    for line in match["run"].splitlines():
        parsed = _RUN_LINE.match(line)
        if parsed and "{" not in parsed["name"]:
            found.append(
                RunLine(parsed["name"], (parsed["spec"] or "").strip(), (parsed["tail"] or "").strip())
            )
    return found


def run_requirements(meta: str) -> dict[str, tuple[str, str]]:
    """The pytorch output's run requirements: name -> (spec, selector comment) of its first line."""
    found: dict[str, tuple[str, str]] = {}
    for line in run_requirement_lines(meta):
        found.setdefault(line.name, (line.spec, line.tail))
    return found


def set_run_requirement(meta: str, name: str, spec: str, selector: str | None = None) -> str:
    """Replace the spec of ``name`` in the pytorch output's run requirements (its selector stays); with
    ``selector``, only on the line of ``name`` that has that selector."""
    match = _PYTORCH_RUN.search(meta)
    if not match:
        raise ToolError(f"{META}: no run requirements found in the pytorch output")
    lines = match["run"].splitlines(keepends=True)
    for index, line in enumerate(lines):
        parsed = _RUN_LINE.match(line.rstrip("\n"))
        if not parsed or parsed["name"] != name:
            continue
        found = RunLine(name, (parsed["spec"] or "").strip(), (parsed["tail"] or "").strip())
        if selector is not None and found.selector != selector:
            continue
        tail = f"  {found.tail}" if found.tail else ""
        lines[index] = f"        - {name}{' ' + spec if spec else ''}{tail}\n"
        block = "".join(lines)
        return meta[: match.start("run")] + block + meta[match.end("run") :]
    where = f" with the selector [{selector}]" if selector else ""
    raise ToolError(f"{META}: {name} is not a run requirement of the pytorch output{where}")


# The host list of the Python build tools (pass 1's and every rebuilding output's host).
_PYTHON_HOST = re.compile(
    r"^\{% set python_host_unpinned = \[\n(?P<items>.*?)^\] %\}$", re.MULTILINE | re.DOTALL
)


def python_host_tools(meta: str) -> list[str]:
    match = _PYTHON_HOST.search(meta)
    if not match:
        raise ToolError(f"{META}: no '{{% set python_host_unpinned = [' list: restore it")
    return re.findall(r'"([^"]+)"', match["items"])


def set_python_host_tool(meta: str, name: str, spec: str | None) -> str:
    """Add (or replace) ``name spec`` in the Python build tools of the host, or remove it (``spec`` None)."""
    match = _PYTHON_HOST.search(meta)
    if not match:
        raise ToolError(f"{META}: no '{{% set python_host_unpinned = [' list: restore it")
    tools = [tool for tool in python_host_tools(meta) if tool.split()[0] != name]
    if spec is not None:
        tools.insert(1, f"{name} {spec}".strip())
    items = "    " + ", ".join(f'"{tool}"' for tool in tools) + ",\n"
    return meta[: match.start("items")] + items + meta[match.end("items") :]
