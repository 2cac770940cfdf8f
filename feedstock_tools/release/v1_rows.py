"""recipe-v1/recipe.yaml along with meta.yaml: the context values the bump writes into both, and every other
change the v1 recipe does not say yet (render-v1's differences), one row per output and field."""

from __future__ import annotations

from pathlib import Path

from feedstock_tools.common.recipe_imports import import_megabuild
from feedstock_tools.maintainer import render_v1
from feedstock_tools.release.rows import PERSON, SAME, Row

_atomic_file = import_megabuild("atomic_file")


def write_v1_recipe(root: Path, version: str, sha256: str, config: str) -> None:
    """The v1 recipe states the version, hash and build number again in its context, and keeps a copy of the
    variant file (conda-smithy reads it from conda-forge.yml's recipe_dir): both follow meta.yaml's bump."""
    v1_dir = root / render_v1.V1_DIRNAME
    if not (v1_dir / "recipe.yaml").is_file():
        return
    render_v1.set_context(v1_dir / "recipe.yaml", version=version, sha256=sha256, build=0)
    _atomic_file.write_text(v1_dir / "conda_build_config.yaml", config, newline="")


def v1_recipe_rows(root: Path) -> list[Row]:
    """What the bump changed in meta.yaml beyond the context (Python floor, requirements, build backend) and
    the v1 recipe does not say yet: render-v1's differences, one row per output name and field."""
    v1_dir = root / render_v1.V1_DIRNAME
    if not (v1_dir / "recipe.yaml").is_file():
        return []
    found: dict[tuple[str, str], tuple[set[str], str, str]] = {}
    for config in sorted((root / ".ci_support").glob("*.yaml")):
        _, differences = render_v1.compare_config(root / "recipe", config, v1_dir)
        for difference in differences:
            key = (difference.output.split()[0], difference.field)
            v1_only, meta_only = _difference_sides(difference.v1, difference.meta)
            configs, _, _ = found.setdefault(key, (set(), v1_only, meta_only))
            configs.add(difference.config)
    if not found:
        return [Row("recipe-v1", "render-v1", "", "same outputs as meta.yaml", SAME)]
    return [
        Row(
            "recipe-v1",
            f"{output}: {field}",
            v1_value,
            meta_value,
            PERSON,
            f"mirror meta.yaml's change in {render_v1.V1_DIRNAME}/recipe.yaml ({len(configs)} configs; "
            "python -m feedstock_tools render-v1 names each)",
        )
        for (output, field), (configs, v1_value, meta_value) in sorted(found.items())
    ]


def _difference_sides(v1: object, meta: object) -> tuple[str, str]:
    """What only the v1 recipe says and what only meta.yaml says (for lists, the items; an output that only
    one recipe builds, which one)."""
    if isinstance(v1, list) and isinstance(meta, list):
        return (
            ", ".join(str(item) for item in v1 if item not in meta) or "-",
            ", ".join(str(item) for item in meta if item not in v1) or "-",
        )
    if isinstance(v1, bool) and isinstance(meta, bool):
        return ("built" if v1 else "not built", "built" if meta else "not built")
    return (str(v1), str(meta))
