r"""Which variant keys a recipe *uses*, found the way conda-build finds them: by scanning text.

conda-build never asks the rendered recipe which variables it read; it searches the recipe text
(``conda_build/variants.py: find_used_variables_in_text`` and ``find_used_variables_in_shell_script``,
driven by ``conda_build/metadata.py: MetaData.get_used_vars``). :func:`find_used_in_text` uses the same
regular expressions as conda-build 26.7.1 (see :func:`_patterns`; its results were compared with the real
function on this machine, docs/records/2026-11-29-real-conda-tools.md). A key counts as used when it appears

- in a selector (``# [cuda_compiler_version != "None"]``), searched in the text *before* selectors
  are applied, so a selector for another platform still counts;
- first in a Jinja expression (``{{ blas_impl }}``, ``{{ pin_compatible('numpy') }}``), right of ``=`` in a
  ``{% set %}``, after ``in`` in a ``{% for %}``, anywhere after ``if`` in an ``{% if %}``/``{% elif %}``
  (inside a longer name too), through ``{{ compiler('cuda') }}`` (for ``cuda_compiler`` and
  ``cuda_compiler_version``) or ``{{ stdlib('c') }}``, or as a bare requirement name (``- libblas``),
  searched in the text *after* selectors are applied;
- as ``$key`` or ``${key}`` in the output's ``.sh`` script.

A use that is only a run requirement does not count (``trim_build_only_deps``): build and host are compared
by name, a key counts as a run requirement only when a *whole* run entry is the key; a key in build but not
host is dropped when ``ignore_build_only_deps`` lists it and it is not such a run entry.

For a multi-output recipe each output is scanned on its own block of ``outputs:`` (``output_re``: an
indented ``- name:`` or ``- type:`` item; the section ends at a top-level ``test:``, ``extra:`` or
``about:``); the "top level" is the recipe text without ``outputs:`` plus the block of the output being
looked at. This is the one scan of the project: the CI generator (:mod:`feedstock_tools.ci.ci_support`)
and the render emulation (:mod:`feedstock_tools.conda.recipe_render`) both use it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

# conda-build metadata.py: extract_outputs_text, output_re and the requirements block of
# _get_used_vars_meta_yaml_helper.
OUTPUTS_SECTION = re.compile(r"(^outputs:.*?)(?=^test:|^extra:|^about:|\Z)", flags=re.MULTILINE | re.DOTALL)
OUTPUT_BLOCK = re.compile(
    r"^\ +-\ +(?:name|type):.+?(?=^\w|\Z|^\ +-\ +(?:name|type))", flags=re.MULTILINE | re.DOTALL
)
REQUIREMENTS_BLOCK = re.compile(
    r"requirements:.+?(?=^\w|\Z|^\s+-\s(?=name|type))", flags=re.MULTILINE | re.DOTALL
)
_REQUIREMENT_SECTION = re.compile(r"^\s+(build|host|run|run_constrained):\s*$")
_REQUIREMENT_ITEM = re.compile(r"^\s+-\s+(\S+)")
# The CUDA-compiler detection conda-smithy uses to set CF_CUDA_ENABLED (a non-comment line calling it).
CUDA_COMPILER_LINE = re.compile(r"""^[^#]*compiler\((\"cuda\"|'cuda')\).*""")


def _patterns(key: str, selectors_only: bool) -> tuple[list[str], str]:
    """The regular expressions conda-build 26.7.1 tries for ``key`` and the prefilter substring.

    Written after ``conda_build/variants.py: find_used_variables_in_text`` (26.7.1): a line is searched
    only if it contains the key (``-`` read as ``_``), or for ``<lang>_compiler``/``<lang>_stdlib(_version)``
    the language, or for ``cdt_*`` keys ``cdt(``. The statement patterns are loose on purpose, as there:
    ``{% if ... %}`` matches the key anywhere after ``if``, even inside a longer name (so
    ``{% if cuda_compiler_version != "None" %}`` uses ``cuda_compiler``); ``{% set %}`` needs the key as a
    whole name right of ``=``; ``{% for %}`` needs it right after ``in``; ``{{ key ...}}`` needs it first
    in the expression (or quoted in ``pin_*(``), followed by a non-name character.
    """
    escaped = re.escape(key)
    patterns: list[str] = []
    function = re.match(r"(.*?)_(compiler|stdlib)(_version)?$", key)
    if function and not selectors_only:
        language, kind = function.group(1), function.group(2)
        patterns.append(rf"\{{\s*{kind}\([\'\"]{re.escape(language)}[\"\'][^\{{]*?\}}")
        prefilter = language
    elif key.startswith("cdt_"):
        patterns.append(r"\{\s*cdt\(")
        prefilter = "cdt("
    else:
        prefilter = ""
    if selectors_only:
        patterns.insert(0, rf"^[^#\[]*?\#?\s\[[^\]]*?(?<![_\w\d]){escaped}[=\s<>!\]]")
    else:
        requirement_name = "[-_]".join(map(re.escape, key.split("_")))
        patterns += [
            rf"\{{\s*(?:pin_[a-z]+\(\s*?['\"])?{escaped}(?:[^_0-9a-zA-Z].*?)?\}}\}}",
            rf"^\s+\-\s+{requirement_name}\s*(?:\s[\[#]|$)",
            r"(?:^|[^\{])\{%\s*(?:el)?if\s*.*" + escaped + r"\s*(?:[^%]*?)?%\}",
            r"(?:^|[^\{])\{%\s*for\s*.*\s*in\s*" + escaped + r"(?![a-zA-Z_0-9])(?:[^%]*?)?%\}",
            r"(?:^|[^\{])\{%\s*set\s*.*\s*=\s*.*(?<![a-zA-Z_0-9])"
            + escaped
            + r"(?![a-zA-Z_0-9])(?:[^%]*?)?%\}",
        ]
    return patterns, prefilter


@lru_cache(maxsize=4096)
def find_used_in_text(keys: tuple[str, ...], text: str, selectors_only: bool = False) -> frozenset[str]:
    """The variant keys among ``keys`` that ``text`` uses (selectors only, or everything but selectors).

    conda-build 26.7.1 ``find_used_variables_in_text``, including its last step: a used ``c_stdlib``,
    ``c_compiler`` or ``cxx_compiler`` also uses ``CONDA_BUILD_SYSROOT`` when the variant has it.
    """
    used: set[str] = set()
    lines = text.splitlines()
    normalized = text.replace("-", "_")
    for key in keys:
        patterns, prefilter = _patterns(key, selectors_only)
        if prefilter:
            candidates = [line for line in lines if key in line or prefilter in line]
        elif key not in normalized:  # shortcut: no line can name the key
            continue
        else:
            candidates = [line for line in lines if key in line.replace("-", "_")]
        if not candidates:
            continue
        combined = re.compile("|".join(patterns))
        if any(combined.search(line) for line in candidates):
            used.add(key)
            if key in ("c_stdlib", "c_compiler", "cxx_compiler") and "CONDA_BUILD_SYSROOT" in keys:
                used.add("CONDA_BUILD_SYSROOT")
    return frozenset(used)


def find_used_in_shell_script(keys: Iterable[str], script: Path) -> set[str]:
    """Keys referenced as ``$key`` or ``${key}`` in a shell script (conda-build's shell-script scan)."""
    if not script.is_file():
        return set()
    return set(_used_in_script(tuple(keys), script.read_text(encoding="utf-8")))


@lru_cache(maxsize=256)
def _used_in_script(keys: tuple[str, ...], text: str) -> frozenset[str]:
    found = set()
    for key in keys:
        # the substring test first: most of the ~1000 pinning keys never occur in a script
        if key in text and re.search(rf"(^[^$]*?\$\{{?\s*{re.escape(key)}\s*[\s|\}}])", text, re.M | re.S):
            found.add(key)
    return frozenset(found)


@lru_cache(maxsize=1024)  # asked again for each variant of a render; the search is slow on a long recipe
def outputs_text(text: str) -> str:
    """The ``outputs:`` section of a recipe text (up to a top-level test/extra/about), or ``""``."""
    match = OUTPUTS_SECTION.search(text)
    return match.group(1) if match else ""


def output_blocks(text: str) -> list[str]:
    """The text of each ``- name:`` (or ``- type:``) entry of the ``outputs:`` section, in recipe order."""
    return OUTPUT_BLOCK.findall(outputs_text(text))


def top_level_text(text: str) -> str:
    """The recipe text without its ``outputs:`` section."""
    section = outputs_text(text).strip()
    return text.replace(section, "") if section else text


@lru_cache(maxsize=1024)
def requirements_text(text: str) -> str:
    """The first ``requirements:`` block of a text (what conda-build counts as requirement uses)."""
    match = REQUIREMENTS_BLOCK.search(text)
    return match.group() if match else ""


Requirements = Mapping[str, Iterable[str]]


def requirement_names(block: str) -> dict[str, set[str]]:
    """Names per requirements section (build/host/run) of a block's requirements, ``-`` read as ``_``.

    Text only: lines generated by Jinja loops are invisible here, so the scanners pass the *rendered*
    requirements to :func:`trim_run_only` instead.
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


def rendered_requirements(requirements: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """The build/host/run entries of a rendered ``requirements`` mapping, as lists of strings."""
    return {
        section: [spec for spec in (requirements or {}).get(section) or [] if isinstance(spec, str)]
        for section in ("build", "host", "run")
    }


def _names(specs: Iterable[str]) -> set[str]:
    return {spec.split()[0].replace("-", "_") for spec in specs if spec and spec.split()}


def trim_run_only(
    used_in_requirements: set[str], requirements: Requirements, variant: Mapping[str, Any]
) -> set[str]:
    """conda-build ``trim_build_only_deps``: drop keys that are a whole run requirement but in neither build
    nor host, and keys only in build that ``ignore_build_only_deps`` lists (python, numpy).

    ``requirements`` are the output's rendered entries per section; build and host are compared by name
    (``-`` read as ``_``), run by whole entry, as conda-build does.
    """
    build = _names(requirements.get("build", ()))
    host = _names(requirements.get("host", ()))
    run = set(requirements.get("run", ()))
    ignore_build_only = set(variant.get("ignore_build_only_deps", []) or [])
    removed = set()
    for key in used_in_requirements:
        if key in run:
            if key not in build and key not in host:
                removed.add(key)
        elif key in build and key not in host and key in ignore_build_only:
            removed.add(key)
    return used_in_requirements - removed


def used_in_meta_yaml(
    keys: Iterable[str],
    selected: str,
    unselected: str,
    requirements: Requirements,
    variant: Mapping[str, Any],
) -> set[str]:
    """conda-build ``_get_used_vars_meta_yaml`` for one scanned text (selected and unselected forms);
    ``requirements`` are the rendered requirements of the output the text belongs to."""
    keys = tuple(keys)
    in_selectors = find_used_in_text(keys, unselected, selectors_only=True)
    everywhere = find_used_in_text(keys, selected)
    used = set(in_selectors | everywhere)
    in_requirements = set(find_used_in_text(keys, requirements_text(selected)))
    outside = used - in_requirements
    return outside | trim_run_only(in_requirements, requirements, variant)


def recipe_has_cuda_compiler(meta_yaml: str) -> bool:
    """What conda-smithy checks before it sets ``CF_CUDA_ENABLED=True`` for every platform."""
    return any(CUDA_COMPILER_LINE.match(line) for line in meta_yaml.splitlines())
