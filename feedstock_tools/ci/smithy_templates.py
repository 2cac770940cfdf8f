"""Files conda-smithy writes on every rerender whatever ``skip_render`` says, and the ``templates/`` that keep
them ours; the paths ``skip_render`` must name."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import jinja2

from feedstock_tools.ci.ci_workflow import WORKFLOW
from feedstock_tools.ci.forge_config import ForgeSettings
from feedstock_tools.common.errors import ToolError

TEMPLATES = Path("templates")


@dataclass(frozen=True)
class SmithyRendered:
    """A file conda-smithy renders from one of its Jinja templates on every rerender.

    ``skip_render`` does not reach these: conda-smithy deletes and rewrites them. Its Jinja loader looks in
    the feedstock's ``templates/`` folder before its own, so a template there that renders to the
    committed file makes the rerender write that file unchanged.
    """

    path: Path  # the file, relative to the feedstock root
    template: str  # the name conda-smithy asks its Jinja loader for
    executable: bool  # conda-smithy sets the executable bits after writing it


# conda_smithy/configure_feedstock.py: render_github_actions writes the workflow; for each enabled build
# platform _github_actions_specific_setup renders the scripts (template = file name + ".tmpl", written
# by _render_template_exe_files, which makes them executable); _render_ci_provider writes CircleCI's
# file even when no platform uses CircleCI.
SMITHY_RENDERED: tuple[SmithyRendered, ...] = (
    SmithyRendered(WORKFLOW, "github-actions.yml.tmpl", executable=False),
    SmithyRendered(Path(".scripts") / "run_docker_build.sh", "run_docker_build.sh.tmpl", executable=True),
    SmithyRendered(Path(".scripts") / "build_steps.sh", "build_steps.sh.tmpl", executable=True),
    SmithyRendered(Path(".scripts") / "run_osx_build.sh", "run_osx_build.sh.tmpl", executable=True),
    SmithyRendered(Path(".circleci") / "config.yml", "circle.yml.tmpl", executable=False),
)

# Paths conda-smithy writes on a rerender unless skip_render names the path or one of its parent
# folders (_ignore_match): the files of its feedstock_content folder (copy_feedstock_content) and the
# GitHub service workflows (render_github_actions_services).
SKIPPABLE_OUTPUTS: tuple[str, ...] = (
    ".gitattributes",
    ".gitignore",
    "LICENSE.txt",
    "build-locally.py",
    ".scripts/logging_utils.sh",
    ".github/PULL_REQUEST_TEMPLATE.md",
    ".github/workflows/automerge.yml",
    ".github/workflows/webservices.yml",
)
# render_readme writes README.md and .github/CODEOWNERS unless this exact entry is listed.
README_ENTRY = "README.md"
# conda-smithy makes these executable on every rerender, skip_render or not (2026.8.5 main: exe_files).
ALWAYS_EXECUTABLE: tuple[Path, ...] = (Path(".scripts") / "logging_utils.sh", Path("build-locally.py"))

# The end of a raw block; a file containing one cannot be wrapped in a raw block.
_ENDRAW = re.compile(r"\{%[-+]?\s*endraw\b")


def template_for(path: Path, text: str) -> str:
    """A template that conda-smithy's Jinja environment renders to exactly ``text`` (the file ``path``).

    The text sits in one raw block, so its own line ends, trailing ones included, come out as they are.
    The newline after the block ends the template file; Jinja drops it from the output (conda-smithy
    leaves ``keep_trailing_newline`` off).
    """
    if "\r" in text:
        raise ToolError(f"{path}: has carriage returns, which Jinja turns into newlines; use LF line ends")
    if _ENDRAW.search(text):
        raise ToolError(f"{path}: contains an endraw tag, which would end the template's raw block early")
    note = (
        f"{{# Written by `python -m feedstock_tools render-ci` from {path.as_posix()}: conda-smithy renders "
        f"this in place of its own template, so a rerender keeps that file. Edit the file, not this. #}}"
    )
    return note + "{% raw %}" + text + "{% endraw %}\n"


def smithy_jinja_environment(root: Path) -> jinja2.Environment:
    """A Jinja environment set up like conda-smithy's ``make_jinja_env``, minus its bundled templates."""
    from jinja2.sandbox import SandboxedEnvironment

    return SandboxedEnvironment(
        extensions=["jinja2.ext.do"], loader=jinja2.FileSystemLoader([str(root / TEMPLATES)])
    )


def skip_render_gaps(settings: ForgeSettings) -> list[str]:
    """The files a rerender would write because ``skip_render`` does not name them (or a parent)."""
    entries = {str(entry) for entry in settings.raw.get("skip_render") or []}
    gaps = [
        path
        for path in SKIPPABLE_OUTPUTS
        if not ({path} | {parent.as_posix() for parent in Path(path).parents}) & entries
    ]
    if README_ENTRY not in entries:
        gaps += ["README.md", ".github/CODEOWNERS"]
    return gaps


def _source_text(root: Path, item: SmithyRendered, generated: Mapping[Path, str]) -> str:
    """The text conda-smithy must write for ``item``: what this generator writes, else the file."""
    if item.path in generated:
        return generated[item.path]
    source = root / item.path
    if not source.is_file():
        raise ToolError(
            f"{item.path} is missing: conda-smithy writes it on every rerender; restore it from git"
        )
    return source.read_text(encoding="utf-8")


def smithy_templates(root: Path, generated: Mapping[Path, str]) -> dict[Path, str]:
    """Relative path -> text of the ``templates/`` files that keep conda-smithy's renders unchanged.

    Empty for a tree without ``templates/``: a partial copy of the feedstock (the consistency check
    works on one) or a feedstock that leaves these files to conda-smithy.
    """
    if not (root / TEMPLATES).is_dir():
        return {}
    return {
        TEMPLATES / item.template: template_for(item.path, _source_text(root, item, generated))
        for item in SMITHY_RENDERED
    }


def is_executable(path: Path) -> bool:
    return path.is_file() and path.stat().st_mode & 0o111 == 0o111


def executable_paths() -> list[Path]:
    return [item.path for item in SMITHY_RENDERED if item.executable] + list(ALWAYS_EXECUTABLE)
