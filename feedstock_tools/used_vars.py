"""Which variant keys a recipe *uses*, found the way conda-build finds them: by scanning text.

conda-build never asks the rendered recipe which variables it read; it searches the recipe text
(``conda_build/variants.py: find_used_variables_in_text`` and ``find_used_variables_in_shell_script``,
driven by ``conda_build/metadata.py: MetaData.get_used_vars``). A key counts as used when it appears

- in a selector (``# [cuda_compiler_version != "None"]``), searched in the text *before* selectors
  are applied, so a selector for another platform still counts;
- at the start of a Jinja expression (``{{ blas_impl }}``, ``{{ pin_compatible('numpy') }}``), in a
  ``{% set %}``, ``{% if %}`` or ``{% for ... in %}`` statement, through ``{{ compiler('cuda') }}``
  (for ``cuda_compiler`` and ``cuda_compiler_version``) or ``{{ stdlib('c') }}`` (for ``c_stdlib``
  and ``c_stdlib_version``), or as a bare requirement name (``- libblas``), searched in the text
  *after* selectors are applied;
- as ``$key`` or ``${key}`` in the output's ``.sh`` script.

A use that is only a run requirement does not count. Since conda-build 24.11 a key must be followed
by a non-name character, so ``python {{ python_min }}`` uses ``python_min`` and not ``python``.

For a multi-output recipe each output is scanned on its own block of ``outputs:``; the "top level"
is the recipe text without ``outputs:`` plus the block of the output being looked at.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

OUTPUTS_SECTION = re.compile(r"(^outputs:.*?)(?=^\w|\Z)", flags=re.MULTILINE | re.DOTALL)
OUTPUT_BLOCK = re.compile(r"^[ \t]*-[ \t]+name:.+?(?=^[ \t]*-[ \t]+name:|\Z)", flags=re.MULTILINE | re.DOTALL)
REQUIREMENTS_BLOCK = re.compile(
    r"requirements:.+?(?=^\w|\Z|^\s+-\s(?=name|type))", flags=re.MULTILINE | re.DOTALL
)
_REQUIREMENT_SECTION = re.compile(r"^\s+(build|host|run|run_constrained):\s*$")
_REQUIREMENT_ITEM = re.compile(r"^\s+-\s+(\S+)")
_SKIP = re.compile(r"^\s+skip:\s*(.+?)\s*$", flags=re.MULTILINE)
_SCRIPT = re.compile(r"^\s+script:\s*(\S+)\s*$", flags=re.MULTILINE)
_NAME = re.compile(r"^[ \t]*-[ \t]+name:[ \t]*(.+?)[ \t]*$", flags=re.MULTILINE)
# The CUDA-compiler detection conda-smithy uses to set CF_CUDA_ENABLED (a non-comment line calling it).
CUDA_COMPILER_LINE = re.compile(r"""^[^#]*compiler\((\"cuda\"|'cuda')\).*""")


def _key_pattern(key: str) -> str:
    # A key must stand alone: not preceded or followed by another identifier character.
    return rf"(?<![\w]){re.escape(key)}(?![\w])"


@lru_cache(maxsize=4096)
def find_used_in_text(keys: tuple[str, ...], text: str, selectors_only: bool = False) -> frozenset[str]:
    """The variant keys among ``keys`` that ``text`` uses (selectors only, or everything but selectors)."""
    used: set[str] = set()
    lines = text.splitlines()
    for key in keys:
        patterns: list[str] = []
        function = re.match(r"(.*?)_(compiler|stdlib)(_version)?$", key)
        if function and not selectors_only:
            language, name = function.group(1), function.group(2)
            patterns.append(rf"\{{\s*{name}\(['\"]{re.escape(language)}['\"][^{{]*?\}}")
            candidates = [line for line in lines if key in line or language in line]
        else:
            candidates = [line for line in lines if key in line.replace("-", "_")]
        if not candidates:
            continue
        key_re = _key_pattern(key)
        if selectors_only:
            patterns.insert(0, rf"^[^#\[]*?\#?\s\[[^\]]*?(?<![_\w]){re.escape(key)}[=\s<>!\]]")
        else:
            requirement_name = "[-_]".join(map(re.escape, key.split("_")))
            patterns += [
                rf"\{{\{{-?\s*(?:pin_[a-z]+\(\s*['\"])?{re.escape(key)}(?![\w])[^}}]*\}}\}}",
                rf"\{{%-?\s*set\s[^%]*?{key_re}[^%]*%\}}",
                rf"(?:^|[^{{])\{{%-?\s*(?:el)?if\s[^%]*?{key_re}[^%]*%\}}",
                rf"(?:^|[^{{])\{{%-?\s*for\s.*\sin\s[^%]*?{key_re}[^%]*%\}}",
                rf"^\s+-\s+{requirement_name}\s*(?:\s[\[#]|$)",
            ]
        combined = re.compile("|".join(patterns))
        if any(combined.search(line) for line in candidates):
            used.add(key)
    return frozenset(used)


@lru_cache(maxsize=256)
def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def find_used_in_shell_script(keys: Iterable[str], script: Path) -> set[str]:
    """Keys referenced as ``$key`` or ``${key}`` in a shell script (conda-build's shell-script scan)."""
    if not script.is_file():
        return set()
    return set(_used_in_script(tuple(keys), _read(script)))


@lru_cache(maxsize=256)
def _used_in_script(keys: tuple[str, ...], text: str) -> frozenset[str]:
    found = set()
    for key in keys:
        # the substring test first: most of the ~1000 pinning keys never occur in a script
        if key in text and re.search(rf"(^[^$]*?\$\{{?\s*{re.escape(key)}\s*[\s|\}}])", text, re.M | re.S):
            found.add(key)
    return frozenset(found)


def outputs_text(text: str) -> str:
    """The ``outputs:`` section of a recipe text (up to the next top-level key), or ``""``."""
    match = OUTPUTS_SECTION.search(text)
    return match.group(1) if match else ""


def output_blocks(text: str) -> list[str]:
    """The text of each ``- name:`` entry of the ``outputs:`` section, in recipe order."""
    return OUTPUT_BLOCK.findall(outputs_text(text))


def top_level_text(text: str) -> str:
    """The recipe text without its ``outputs:`` section."""
    section = outputs_text(text).strip()
    return text.replace(section, "") if section else text


def requirements_text(text: str) -> str:
    """The first ``requirements:`` block of a text (what conda-build counts as requirement uses)."""
    match = REQUIREMENTS_BLOCK.search(text)
    return match.group() if match else ""


def render_scalar(value: str, variant: Mapping[str, Any]) -> str:
    """A recipe scalar with its Jinja expressions evaluated against ``variant`` (undefined -> empty)."""
    if "{{" not in value and "{%" not in value:
        return value.strip().strip("'\"")
    environment = jinja2.Environment(undefined=jinja2.Undefined)
    context = {key: value for key, value in variant.items() if isinstance(value, str)}
    return environment.from_string(value).render(**context).strip().strip("'\"")


def is_true(value: str) -> bool:
    return value.strip().strip("'\"").lower() in ("true", "yes", "1", "on")


@dataclass(frozen=True)
class OutputText:
    """One output of a recipe as the scanner sees it for one variant."""

    name: str
    selected: str  # the block with selectors applied
    unselected: str  # the block before selectors, as conda-build pairs them (by index)
    skipped: bool
    script: str | None


def recipe_outputs(selected: str, unselected: str, variant: Mapping[str, Any]) -> list[OutputText]:
    """The outputs of a recipe for one variant, pairing selected and unselected blocks by position.

    conda-build looks an output up by its index among the rendered outputs and takes the block at
    that index from the text it is scanning, selected or not; the same pairing is made here.
    """
    selected_blocks = output_blocks(selected)
    unselected_blocks = output_blocks(unselected)
    outputs: list[OutputText] = []
    for index, block in enumerate(selected_blocks):
        name_match = _NAME.search(block)
        name = render_scalar(name_match.group(1), variant) if name_match else ""
        skip_match = _SKIP.search(block)
        skipped = bool(skip_match) and is_true(render_scalar(skip_match.group(1), variant))
        script_match = _SCRIPT.search(block)
        script = render_scalar(script_match.group(1), variant) if script_match else None
        raw = unselected_blocks[index] if index < len(unselected_blocks) else ""
        outputs.append(OutputText(name, block, raw, skipped, script))
    return outputs


def top_level_skipped(selected: str, variant: Mapping[str, Any]) -> bool:
    """Whether the recipe's own ``build: skip:`` is true for this variant."""
    match = _SKIP.search(top_level_text(selected))
    return bool(match) and is_true(render_scalar(match.group(1), variant))


RequirementNames = Mapping[str, Iterable[str]]


def requirement_names(block: str) -> dict[str, set[str]]:
    """Names per requirements section (build/host/run) of a block's requirements, ``-`` read as ``_``.

    Text only: lines generated by Jinja loops are invisible here, so the CI generator passes the
    names of the *rendered* requirements instead (:func:`rendered_requirement_names`).
    """
    names: dict[str, set[str]] = {"build": set(), "host": set(), "run": set()}
    section = ""
    for line in requirements_text(block).splitlines():
        header = _REQUIREMENT_SECTION.match(line)
        if header:
            section = header.group(1)
            continue
        item = _REQUIREMENT_ITEM.match(line)
        if item and section in names and "{" not in item.group(1):
            names[section].add(item.group(1).replace("-", "_"))
    return names


def rendered_requirement_names(requirements: Mapping[str, Any] | None) -> dict[str, set[str]]:
    """Names per section of a rendered ``requirements`` mapping, as conda-build's trim compares them."""
    return {
        section: {
            spec.split()[0].replace("-", "_")
            for spec in (requirements or {}).get(section) or []
            if isinstance(spec, str) and spec.split()
        }
        for section in ("build", "host", "run")
    }


def trim_run_only(
    used_in_requirements: set[str], names: RequirementNames, variant: Mapping[str, Any]
) -> set[str]:
    """conda-build ``trim_build_only_deps``: drop keys used only as run requirements, or only in build
    for the keys listed in ``ignore_build_only_deps`` (python, numpy)."""
    names = {section: set(values) for section, values in names.items()}
    names = {"build": set(), "host": set(), "run": set(), **names}
    ignore_build_only = set(variant.get("ignore_build_only_deps", []) or [])
    removed = set()
    for key in used_in_requirements:
        in_build, in_host = key in names["build"], key in names["host"]
        only_run = key in names["run"] and not in_build and not in_host
        only_build = in_build and not in_host and key in ignore_build_only
        if only_run or only_build:
            removed.add(key)
    return used_in_requirements - removed


def used_in_meta_yaml(
    keys: tuple[str, ...], selected: str, unselected: str, names: RequirementNames, variant: Mapping[str, Any]
) -> set[str]:
    """conda-build ``_get_used_vars_meta_yaml`` for one scanned text (selected and unselected forms);
    ``names`` are the requirement names of the output the text belongs to."""
    in_selectors = find_used_in_text(keys, unselected, selectors_only=True)
    everywhere = find_used_in_text(keys, selected)
    used = set(in_selectors | everywhere)
    in_requirements = set(find_used_in_text(keys, requirements_text(selected)))
    outside = used - in_requirements
    return outside | trim_run_only(in_requirements, names, variant)


def recipe_has_cuda_compiler(meta_yaml: str) -> bool:
    """What conda-smithy checks before it sets ``CF_CUDA_ENABLED=True`` for every platform."""
    return any(CUDA_COMPILER_LINE.match(line) for line in meta_yaml.splitlines())
