"""The REAL rattler-build render of recipe-v1/recipe.yaml (py-rattler-build), one .ci_support file.

conda-smithy hands rattler-build the ``.ci_support`` file as its variant configuration; two of its keys are
conda-build's and not rattler-build's: ``channel_sources`` (rattler-build 0.73.0 refuses it beside the
channels it is given: "channel_sources and channels cannot both be set at the same time") and
``pin_run_as_build``. The render returns one stage-1 recipe per output and variant, deduplicated on
(name, build string): py-rattler-build's ``render`` repeats an output once per variant of its siblings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from feedstock_tools.common.errors import ToolError

# conda-build's keys of a .ci_support file that rattler-build does not take as variant keys
NOT_VARIANT_KEYS = ("channel_sources", "pin_run_as_build", "zip_keys")


@dataclass(frozen=True)
class V1Output:
    name: str
    build_string: str
    variant: dict[str, str]
    recipe: dict[str, Any]  # the stage-1 recipe as py-rattler-build's to_dict() gives it


def variant_config(ci_support: Path, pythons: Sequence[str] | None = None) -> dict[str, Any]:
    """The .ci_support file as a rattler-build variant configuration (``zip_keys`` kept), optionally with
    only the Pythons whose ``3.X`` is in ``pythons``."""
    try:
        data = yaml.safe_load(ci_support.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ToolError(
            f"{ci_support}: cannot read it as YAML ({exc}); regenerate it with render-ci"
        ) from exc
    zip_keys = data.get("zip_keys")
    config = {
        key: [value if isinstance(value, bool) else str(value) for value in values]
        for key, values in data.items()
        if key not in NOT_VARIANT_KEYS
    }
    if pythons is not None:
        config["python"] = [v for v in config.get("python", []) if v.split(".*")[0] in pythons]
        if not config["python"]:
            raise ToolError(f"{ci_support}: none of its Pythons is among {', '.join(pythons)}")
    if zip_keys:
        config["zip_keys"] = zip_keys
    return config


def render(
    recipe: Path, ci_support: Path, pythons: Sequence[str] | None = None, build_platform: str | None = None
) -> list[V1Output]:
    """Every output rattler-build would build for this configuration, in its order, without duplicates;
    ``build_platform`` (the machine building it) defaults to the target, as recipe_render's does."""
    from rattler_build import RenderConfig, Stage0Recipe, VariantConfig
    from rattler_build.tool_config import PlatformConfig

    config = variant_config(ci_support, pythons)
    zip_keys = config.pop("zip_keys", None)
    platform = config["target_platform"][0]
    try:
        variants = Stage0Recipe.from_file(recipe).render(
            VariantConfig(config, zip_keys=zip_keys),
            RenderConfig(
                platform=PlatformConfig(target_platform=platform, build_platform=build_platform or platform)
            ),
        )
    except Exception as exc:  # py-rattler-build raises its own error types for every render problem
        raise ToolError(f"{recipe}: rattler-build cannot render it for {ci_support.name}: {exc}") from exc
    seen: set[tuple[str, str]] = set()
    outputs = []
    for variant in variants:
        stage1 = variant.recipe
        key = (stage1.package.name, stage1.build.string)
        if key in seen:
            continue
        seen.add(key)
        outputs.append(
            V1Output(
                name=stage1.package.name,
                build_string=stage1.build.string,
                variant={k: str(v) for k, v in variant.variant.items()},
                recipe=stage1.to_dict(),
            )
        )
    return outputs
