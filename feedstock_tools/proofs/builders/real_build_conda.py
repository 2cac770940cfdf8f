"""``real-build --builder conda-build``: the real conda-build builds ``recipe/meta.yaml`` offline, from the
local channel, against the upstream stand-in (docs/reference/real-build.md, "The real conda-build").

conda-build is not on PyPI and not a dependency of this project: a real one is named, never installed. Here
that is the offline tool set ``../shared/tools/conda-tools`` (conda 26.7.1 + conda-build 26.7.1 built from
their source repositories; a writable copy with its ``setup.sh`` run, README.md there), named by
``--conda-tools DIR`` or ``$CONDA_TOOLS`` and never looked for: its ``env.sh`` is sourced, so a copy found
beside the checkout (once ``../tools/conda-tools``, then ``../shared/tools/conda-tools``) ran whatever anyone
who can write the checkout's parent planted there, as the maintainer. It is run as its README says: its
``env.sh`` sourced with ``CF_TOOLS_VENV=venv-latest``, then ``conda-build/cb.py`` (conda-build's own command
with the classic solver's virtual packages), with package, environment and build directories of this build's
own.

The recipe copy differs from ``recipe/`` in exactly what the stand-in forces, as for rattler-build
(real_build.py): the source is the stand-in's directory (the patches are for the real tarball), no
``license_file`` (the stand-in has none of PyTorch's license files, which conda-build requires), and the test
commands that need real PyTorch (``real_build.TESTS_THAT_NEED_REAL_PYTORCH``) are left out.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from feedstock_tools.common.errors import ToolError
from megabuild import atomic_file

TOOLS_VARIABLE = "CONDA_TOOLS"
VENV = "venv-latest"  # conda 26.7.1 + conda-build 26.7.1 in the tool set
HOW_TO_GET = (
    "copy ../shared/tools/conda-tools somewhere writable, run its setup.sh as its README.md says (offline "
    "afterwards), then pass --conda-tools DIR or set CONDA_TOOLS"
)
# The recipe files a conda-build run needs (the patches are for the real tarball).
RECIPE_ENTRIES = (
    "meta.yaml",
    "conda_build_config.yaml",
    "build.sh",
    "bld.bat",
    "megabuild",
    "tests",
    "cmake_test",
)
_TOP_LEVEL_KEY = re.compile(r"^[A-Za-z_][\w-]*:")
_OUTPUT = re.compile(r"^  - name: (\S+)")
_LIST_ITEM = re.compile(r"^\s*- ")
_SELECTOR_LIKE = re.compile(r"\[[^\[\]]+\]")
_QUOTED = re.compile(r"""(["'])([^"']*)\1""")


@dataclass(frozen=True)
class CondaTools:
    """A real conda-build, as the offline tool set lays it out."""

    root: Path

    @property
    def python(self) -> Path:
        return self.root / VENV / "bin" / "python"

    @property
    def command(self) -> Path:
        return self.root / "conda-build" / "cb.py"

    def usable(self) -> bool:
        return (self.root / "env.sh").is_file() and self.command.is_file() and os.access(self.python, os.X_OK)

    def invocation(self, arguments: Sequence[str], overrides: Mapping[str, str]) -> list[str]:
        """bash sourcing the tool set's env.sh (CF_TOOLS_VENV=venv-latest), then ``overrides`` exported over
        it, then conda-build with ``arguments``."""
        exports = "".join(f"export {name}={shlex.quote(value)}; " for name, value in overrides.items())
        script = (
            f"export CF_TOOLS_VENV={VENV}; source {shlex.quote(str(self.root / 'env.sh'))}; {exports}"
            f'exec "$CF_TOOLS_VENV/bin/python" {shlex.quote(str(self.command))} "$@"'
        )
        return ["bash", "-c", script, "conda-build", *arguments]


def find_conda_tools(given: Path | None, environ: Mapping[str, str] = os.environ) -> CondaTools:
    """The tool set named by ``--conda-tools``, else by ``$CONDA_TOOLS``; a ToolError saying how to get and
    name one when neither names one or the one named is not set up. Nothing else is looked at: its env.sh
    is sourced, so it must be the one the maintainer named."""
    named = given or (Path(environ[TOOLS_VARIABLE]) if environ.get(TOOLS_VARIABLE) else None)
    if named is None:
        raise ToolError(
            f"real-build --builder conda-build: no conda-build named (--conda-tools DIR or "
            f"${TOOLS_VARIABLE}; none is looked for beside the checkout): {HOW_TO_GET}"
        )
    tools = CondaTools(named.resolve())
    if not tools.usable():
        raise ToolError(
            f"real-build --builder conda-build: no real conda-build at {named} (needs env.sh, "
            f"conda-build/cb.py and {VENV}/bin/python): {HOW_TO_GET}"
        )
    return tools


# ---- the recipe copy ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeftOut:
    output: str
    line: str


def prepare_recipe(
    recipe_dir: Path,
    destination: Path,
    source: Path,
    skips: Mapping[str, Sequence[tuple[str, str]]],
) -> tuple[Path, list[LeftOut]]:
    """A copy of ``recipe_dir`` (less the patches) at ``destination`` whose meta.yaml builds ``source`` and
    leaves out the test commands ``skips`` names per output; returns it and what was left out."""
    destination.mkdir(parents=True)
    for entry in RECIPE_ENTRIES:
        path = recipe_dir / entry
        if path.is_dir():
            shutil.copytree(path, destination / entry, ignore=shutil.ignore_patterns("__pycache__"))
        elif path.exists():
            shutil.copy2(path, destination / entry)
    text = (recipe_dir / "meta.yaml").read_text(encoding="utf-8")
    text = with_source(text, source)
    text = without_block(text, "  license_file:")
    text, left_out = without_tests(text, skips)
    text, missing = without_missing_source_files(text, source)
    atomic_file.write_text(destination / "meta.yaml", text)
    return destination, [*left_out, *missing]


def with_source(text: str, source: Path) -> str:
    """meta.yaml with its top-level ``source:`` section (url, sha256, patches) as ``path: source``."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == "source:"), None)
    if start is None:
        raise ToolError("recipe/meta.yaml has no top-level source: section to point at the stand-in")
    end = next(
        i for i in range(start + 1, len(lines) + 1) if i == len(lines) or _TOP_LEVEL_KEY.match(lines[i])
    )
    # conda-build reads meta.yaml's lines for selectors and Jinja before YAML sees them: no quoting helps
    if any(mark in str(source) for mark in ("{{", "{%", "{#")) or _SELECTOR_LIKE.search(str(source)):
        raise ToolError(
            f"real-build: the stand-in's path {source} holds a Jinja mark or a [selector], which conda-build "
            "reads in meta.yaml before YAML does: use a checkout whose path has none"
        )
    # written by the YAML serializer: a path with "#" or ": " in it, written as it was, became another
    # path or a YAML error
    section = yaml.safe_dump({"source": {"path": str(source)}}, default_flow_style=False, width=1 << 16)
    return "".join([*lines[:start], section, "\n", *lines[end:]])


def without_block(text: str, key_line: str) -> str:
    """meta.yaml without the block that starts with ``key_line`` (its more indented and Jinja lines)."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == key_line), None)
    if start is None:
        raise ToolError(f"recipe/meta.yaml has no {key_line.strip()!r} line")
    indent = len(key_line) - len(key_line.lstrip())
    end = start + 1
    while end < len(lines):
        line = lines[end]
        if line.lstrip().startswith("{%"):
            while "%}" not in lines[end]:  # a Jinja statement over several lines
                end += 1
        elif line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        end += 1
    return "".join(lines[:start] + lines[end:])


def without_missing_source_files(text: str, source: Path) -> tuple[str, list[LeftOut]]:
    """meta.yaml without the test ``source_files`` entries ``source`` lacks: conda-build stops on one ("Did
    not find any source_files for test with pattern test", measured with 26.7.1), rattler-build copies
    nothing for it. The stand-in has no ``test/`` (upstream's own test suite, which only
    run_upstream_tests.py reads, a command left out for it)."""
    lines = text.splitlines(keepends=True)
    kept: list[str] = []
    left_out: list[LeftOut] = []
    output, under = "", None
    for line in lines:
        match = _OUTPUT.match(line)
        output = match[1] if match else output
        indent = len(line) - len(line.lstrip())
        if line.strip() == "source_files:":
            under = indent
        elif under is not None and line.strip() and indent <= under:
            under = None
        item = line.strip()[2:].split("#")[0].strip() if _LIST_ITEM.match(line) else ""
        if under is not None and item and not any(source.glob(item.rstrip("/"))):
            left_out.append(LeftOut(output, f"source_files: {item}"))
            continue
        kept.append(line)
    return "".join(kept), left_out


def without_tests(text: str, skips: Mapping[str, Sequence[tuple[str, str]]]) -> tuple[str, list[LeftOut]]:
    """meta.yaml without the test commands (``commands:`` items) that contain a fragment of ``skips`` in that
    output: a command line is removed; a fragment in a quoted element of a Jinja ``{% for ... in [...] %}``
    list removes that element (the loop's other commands stay). A fragment that matches nothing is a
    ToolError (the list is stale)."""
    lines = text.splitlines(keepends=True)
    output = None
    commands = None  # the indentation of the commands: key the lines are under, if they are
    found: dict[tuple[str, str], list[str]] = {
        (o, f): [] for o, fragments in skips.items() for f, _ in fragments
    }
    kept: list[str] = []
    for line in lines:
        match = _OUTPUT.match(line)
        if match:
            output = match[1]
        elif _TOP_LEVEL_KEY.match(line):
            output = None
        indent = len(line) - len(line.lstrip())
        if line.strip() == "commands:":
            commands = indent
        elif commands is not None and line.strip() and indent <= commands and line.lstrip()[0] not in "{#":
            commands = None
        fragments = [f for f, _ in skips.get(output or "", ())] if commands is not None else []
        hit = next((f for f in fragments if f in line), None)
        if hit is None:
            kept.append(line)
        elif line.lstrip().startswith("{% for"):
            element = next(m for m in _QUOTED.finditer(line) if hit in m[2])
            found[(output or "", hit)].append(element[2])
            kept.append(
                re.sub(rf",\s*{re.escape(element[0])}|{re.escape(element[0])},?\s*", "", line, count=1)
            )
        elif _LIST_ITEM.match(line):
            found[(output or "", hit)].append(line.strip()[2:])
        else:
            kept.append(line)
    stale = [f"{o}: {f!r}" for (o, f), hits in found.items() if not hits]
    if stale:
        raise ToolError(
            f"real-build: no test command of recipe/meta.yaml contains {stale[0]}; remove it from "
            "real_build.TESTS_THAT_NEED_REAL_PYTORCH"
        )
    left_out = [LeftOut(o, hit) for (o, _), hits in found.items() for hit in hits]
    return "".join(kept), left_out
