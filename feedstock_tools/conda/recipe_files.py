"""The recipe's own files (``meta.yaml``, ``conda_build_config.yaml``), read one way by every command.

These files are written by this project's maintainers, so a problem in them is a mistake to report in one
line, not a case to tolerate as conda-build does:

* a byte that is not UTF-8: the file, line and column (:func:`feedstock_tools.common.inputs.read_text`);
* a selector naming something no platform and no variant key defines (``# [linx]``): conda-build reads an
  unknown name as False (``eval_selector``) and drops the line without a word, so the recipe would quietly
  lose a requirement or a test on every platform; the line names the file, the line, the name and the
  closest known name. The variant keys are those of the feedstock (:func:`variant_keys`), so this check
  needs the recipe in its feedstock, beside ``.ci_support/``; a recipe alone (a copy, a test's toy recipe)
  is left to the render's strict evaluation of each selector it reaches.

YAML errors are reported where the YAML is parsed: :func:`feedstock_tools.conda.variants.parse_variant_text`
for ``conda_build_config.yaml`` (with the file's own line numbers through the selectors) and the render for
``meta.yaml``. :func:`check_recipe` runs all of it for a command that hands the recipe on without rendering
it (``build-locally.py``).

Standard library only (the YAML check in :func:`check_recipe` only when PyYAML is there): ``build-locally.py``
imports this module.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from pathlib import Path

from feedstock_tools.common.errors import InputError
from feedstock_tools.common.feedstock import Feedstock, configuration_files
from feedstock_tools.common.inputs import read_text
from feedstock_tools.conda.selectors import (
    KNOWN_SUBDIRS,
    all_platform_names,
    close_name,
    unknown_selector_names,
)

META_YAML = "meta.yaml"
VARIANT_FILE = "conda_build_config.yaml"
# A top-level key of a variant file (conda_build_config.yaml, a .ci_support file, a migration).
_TOP_LEVEL_KEY = re.compile(r"^([A-Za-z_]\w*)\s*:", re.MULTILINE)


def in_feedstock(recipe_dir: Path) -> bool:
    """Whether the recipe sits in a feedstock (``.ci_support/`` beside it), whose variant keys are known."""
    return Feedstock(recipe_dir.parent).ci_support.is_dir()


def variant_keys(recipe_dir: Path) -> frozenset[str]:
    """Every variant key the feedstock knows: those of the recipe's ``conda_build_config.yaml``, of every
    ``.ci_support`` file beside the recipe (what conda-smithy rendered from conda-forge's pinning) and of its
    migrations. Only the keys are looked at; each file's own checks are where it is read."""
    feedstock = Feedstock(recipe_dir.parent)
    files = [recipe_dir / VARIANT_FILE]
    files += feedstock.configuration_files() + configuration_files(feedstock.migrations)
    keys: set[str] = set()
    for path in files:
        if path.is_file():
            keys.update(_TOP_LEVEL_KEY.findall(path.read_text(encoding="utf-8", errors="replace")))
    return frozenset(keys)


def read_recipe_file(path: Path, known: Iterable[str] = ()) -> str:
    """The text of ``meta.yaml`` or ``conda_build_config.yaml``, checked: UTF-8, and every selector names a
    platform flag or a variant key (``known``: more keys the caller has, such as the pinning's)."""
    stat = path.stat()
    return _checked_text(path, stat.st_mtime_ns, stat.st_size, frozenset(known))


@functools.lru_cache(maxsize=16)
def _checked_text(path: Path, _mtime_ns: int, _size: int, known: frozenset[str]) -> str:
    """Read and checked once per version of the file (commands read the recipe once per configuration)."""
    text = read_text(path)
    if not in_feedstock(path.parent):
        return text
    names = all_platform_names() | variant_keys(path.parent) | known
    unknown = unknown_selector_names(text, names)
    if unknown:
        number, name, expression = unknown[0]
        guess = close_name(name, names)
        hint = f" (did you mean {guess!r}?)" if guess else ""
        more = f"; {len(unknown) - 1} more unknown name(s) after it" if len(unknown) > 1 else ""
        raise InputError(
            f"{path} line {number}: selector [{expression.strip()}] names {name!r}, which no platform or "
            f"variant key defines{hint}; fix the selector (conda-build would read it as False and drop the "
            f"line){more}"
        )
    return text


def check_first_pass(recipe_dir: Path, subdirs: Iterable[str]) -> None:
    """``meta.yaml`` through conda-build's first render pass (Jinja, YAML) for each target ``subdir``, when
    Jinja2 and PyYAML are installed: for ``build-locally.py``, which otherwise hands the recipe to conda-build
    in a container, where an error shows only after the image is pulled."""
    try:
        from feedstock_tools.conda.first_pass import render_first_pass
    except ImportError:  # build-locally.py is standard library only (docs/reference/architecture.md)
        return
    for subdir in sorted(set(subdirs)):
        render_first_pass(recipe_dir, subdir)


def check_recipe(recipe_dir: Path, known: Iterable[str] = ()) -> None:
    """Every check of the recipe's files, for a command that reads the recipe but does not parse all of it
    for every platform (``render`` and ``rehearse`` render one configuration, ``deps`` one subdir,
    ``build-locally.py`` hands the recipe to conda-build): both files as :func:`read_recipe_file` reads
    them, and the YAML of ``conda_build_config.yaml`` as each platform selects it, so a broken line fails
    every command whatever platform its selector names. The YAML only when PyYAML is installed: without it
    (``build-locally.py`` alone), conda-build in the build's container reports a YAML error itself.
    ``known``: variant keys the caller has besides the feedstock's (the pinning's)."""
    meta, variant_file = recipe_dir / META_YAML, recipe_dir / VARIANT_FILE
    if not meta.is_file():
        raise InputError(f"no {META_YAML} in {recipe_dir}; give the recipe directory")
    files = [path for path in (meta, variant_file) if path.is_file()]
    versions = tuple((path, path.stat().st_mtime_ns, path.stat().st_size) for path in files)
    _check_recipe(versions, frozenset(known))


@functools.lru_cache(maxsize=4)
def _check_recipe(files: tuple[tuple[Path, int, int], ...], known: frozenset[str]) -> None:
    for path, _, _ in files:
        text = read_recipe_file(path, known)
        if path.name != VARIANT_FILE:
            continue
        try:
            from feedstock_tools.conda.variants import parse_variant_text
        except ImportError:  # build-locally.py is standard library only (docs/reference/architecture.md)
            return
        for subdir in KNOWN_SUBDIRS:
            parse_variant_text(text, subdir, {}, source=path)
