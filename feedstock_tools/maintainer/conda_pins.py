"""The conda side of the dependency table: conda-forge's global pinning and the recipe's own pins.

Both are read the way conda-build sees them for one platform: line selectors evaluated first, then
YAML. The recipe is rendered with Jinja under a few representative variants (CUDA + MKL, CPU +
generic BLAS) so that requirement lines behind ``cuda_compiler_version`` or ``blas_impl`` selectors
are all seen; this is a pin reader, not a full conda-build render.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jinja2
import yaml

from feedstock_tools.common.inputs import read_text
from feedstock_tools.conda.selectors import SelectorError, select_lines, selector_namespace
from feedstock_tools.conda.yaml_errors import rendered_yaml_error

# Selectors in conda-forge's pinning guard CUDA entries with os.environ["CF_CUDA_ENABLED"]; the CI
# jobs that build CUDA variants set it, so the table does too.
PINNING_ENVIRON = {"CF_CUDA_ENABLED": "True"}


class PinReadError(ValueError):
    """A pin file could not be read; the message names the file and why."""


def read_variant_file(
    path: Path, subdir: str, variant: Mapping[str, Any] | None = None
) -> dict[str, list[str]]:
    """A ``conda_build_config.yaml``-style file as ``key -> [values as text]`` for ``subdir``."""
    try:
        text = _without_migrator_block(read_text(path))
        namespace = selector_namespace(subdir, variant, environ=PINNING_ENVIRON)
        data = yaml.safe_load(select_lines(text, namespace)) or {}
    except (OSError, SelectorError, yaml.YAMLError) as exc:
        raise PinReadError(f"{path}: {exc}") from exc
    if not isinstance(data, dict):
        raise PinReadError(f"{path}: expected a mapping of variant keys")
    return {
        str(key): [str(value) for value in values] if isinstance(values, list) else [str(values)]
        for key, values in data.items()
        if not str(key).startswith("__")
    }


def _without_migrator_block(text: str) -> str:
    """Drop a migration's ``__migrator:`` block: its prose (commit messages) quotes selector syntax."""
    kept: list[str] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("__migrator:"):
            inside = True
            continue
        if inside and line[:1] not in ("", " ", "\t", "#"):
            inside = False
        if not inside:
            kept.append(line)
    return "\n".join(kept) + "\n"


def conda_forge_pins(pinning_dir: Path, subdir: str) -> dict[str, list[str]]:
    """Global pinning plus the unpaused migrations in ``pinning_dir/migrations`` (key_add appends)."""
    pins = read_variant_file(pinning_dir / "conda_build_config.yaml", subdir)
    migrations_dir = pinning_dir / "migrations"
    migrations = sorted(migrations_dir.glob("*.yaml")) if migrations_dir.is_dir() else []
    for migration in migrations:
        header = _migrator_header(migration)
        if header.get("paused"):
            continue
        appends = header.get("operation") == "key_add"
        for key, values in read_variant_file(migration, subdir).items():
            if key in ("migrator_ts", "zip_keys") or key.startswith("is_"):
                continue
            merged = pins.get(key, []) if appends else []
            pins[key] = merged + [value for value in values if value not in merged]
    return pins


def _migrator_header(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(read_text(path)) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise PinReadError(f"{path}: {exc}") from exc
    header = data.get("__migrator", {}) if isinstance(data, dict) else {}
    return header if isinstance(header, dict) else {}


class _LenientUndefined(jinja2.ChainableUndefined):
    """Unknown Jinja names (conda-build context we do not emulate) render as empty text."""

    def __call__(self, *args: Any, **kwargs: Any) -> _LenientUndefined:
        return self


def _conda_build_context(variant: Mapping[str, Any], namespace: Mapping[str, Any]) -> dict[str, Any]:
    def compiler(language: str) -> str:
        return f"{language}_compiler_stub"

    def pin_subpackage(name: str, *args: Any, **kwargs: Any) -> str:
        return name

    def pin_compatible(name: str, *args: Any, **kwargs: Any) -> str:
        return name

    # conda-build's Jinja context holds the selector names too (linux, win, aarch64, ...: meta.yaml's
    # "{% if linux %}"), then the variant
    context: dict[str, Any] = {**namespace, **variant}
    context.update(
        compiler=compiler,
        stdlib=compiler,
        pin_subpackage=pin_subpackage,
        pin_compatible=pin_compatible,
        cdt=lambda name: name,
        environ={},
        os=os,
        PKG_HASH="h0",
        CONDA_PY=312,
    )
    return context


def render_recipe(recipe_dir: Path, subdir: str, variant: Mapping[str, Any]) -> Any:
    """``meta.yaml`` rendered for one variant (selectors, Jinja, selectors, then YAML), as Python data.

    Selectors go first as in conda-build, whose Jinja loader filters the lines (jinja_context.FilteredLoader):
    a ``{% set %}`` line behind a false selector must never run (meta.yaml's ``tegra``)."""
    meta = recipe_dir / "meta.yaml"
    try:
        namespace = selector_namespace(subdir, variant, environ=PINNING_ENVIRON)
        source = select_lines(read_text(meta), namespace)
        template = jinja2.Environment(undefined=_LenientUndefined).from_string(source)
        rendered = select_lines(template.render(_conda_build_context(variant, namespace)), namespace)
    except (OSError, jinja2.TemplateError, SelectorError) as exc:
        raise PinReadError(f"{meta}: {exc}") from exc
    try:
        return yaml.safe_load(rendered)
    except yaml.YAMLError as exc:
        raise rendered_yaml_error(meta, exc, rendered) from None


def requirement_strings(recipe: Any) -> Iterator[str]:
    """Every requirement string under any ``requirements`` mapping of the rendered recipe."""
    if isinstance(recipe, dict):
        for key, value in recipe.items():
            if key == "requirements":
                sections = value.values() if isinstance(value, dict) else [value]
                for section in sections:
                    for item in section or []:
                        if isinstance(item, str):
                            yield item
            else:
                yield from requirement_strings(value)
    elif isinstance(recipe, list):
        for item in recipe:
            yield from requirement_strings(item)


def recipe_pins(recipe_dir: Path, subdir: str, variants: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Conda package name -> the version specs the recipe gives it (``*`` when unconstrained)."""
    pins: dict[str, set[str]] = {}
    for variant in variants:
        for requirement in requirement_strings(render_recipe(recipe_dir, subdir, variant)):
            name, _, rest = requirement.strip().partition(" ")
            spec = rest.strip().split(" ", 1)[0] if rest.strip() else "*"
            pins.setdefault(name, set()).add(spec)
    return pins
