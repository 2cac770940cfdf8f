"""The conda side of the dependency table: conda-forge's global pinning and the recipe's own pins.

Both are read the way conda-build sees them for one platform, by the project's one reader of a variant
file with selectors (:func:`feedstock_tools.conda.variants.parse_variant_text`: line selectors, then YAML's
base loader, every value text). The recipe is rendered by the project's one renderer
(``conda/recipe_render``, its lenient :func:`render_variant_data`) under a few representative variants
(CUDA + MKL, CPU + generic BLAS) so that requirement lines behind ``cuda_compiler_version`` or
``blas_impl`` selectors are all seen; a partial variant is enough, since only the requirement lines are
read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.feedstock import configuration_files
from feedstock_tools.common.inputs import read_text
from feedstock_tools.conda.recipe_render import render_variant_data
from feedstock_tools.conda.selectors import SelectorError
from feedstock_tools.conda.variants import VariantError, parse_variant_text
from feedstock_tools.conda.yaml_load import safe_load

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
        data = parse_variant_text(text, subdir, PINNING_ENVIRON, variant, source=path)
    except (OSError, SelectorError, VariantError) as exc:
        raise PinReadError(f"{path}: {exc}") from exc
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
    for migration in configuration_files(pinning_dir / "migrations"):
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
        data = safe_load(read_text(path)) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise PinReadError(f"{path}: {exc}") from exc
    header = data.get("__migrator", {}) if isinstance(data, dict) else {}
    return header if isinstance(header, dict) else {}


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
        try:
            rendered = render_variant_data(recipe_dir, subdir, variant, environ=PINNING_ENVIRON)
        except ToolError as exc:
            raise PinReadError(str(exc)) from exc
        for requirement in requirement_strings(rendered):
            name, _, rest = requirement.strip().partition(" ")
            spec = rest.strip().split(" ", 1)[0] if rest.strip() else "*"
            pins.setdefault(name, set()).add(spec)
    return pins
