"""The parts of ``conda-forge.yml`` that shape what ``conda smithy rerender`` writes, over conda-smithy's
defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.inputs import read_text
from feedstock_tools.conda.variants import as_list
from feedstock_tools.conda.yaml_errors import yaml_error
from feedstock_tools.conda.yaml_load import safe_load

# conda-smithy's defaults for the parts of conda-forge.yml this generator reads
# (conda_smithy/data/conda-forge.yml); the feedstock's file overrides them key by key.
FORGE_DEFAULTS: dict[str, Any] = {
    "build_platform": {
        "linux_64": "linux_64",
        "linux_aarch64": "linux_aarch64",
        "linux_ppc64le": "linux_ppc64le",
        "osx_64": "osx_64",
        "osx_arm64": "osx_arm64",
        "win_64": "win_64",
    },
    "provider": {
        "linux": None,
        "osx": None,
        "win": None,
        "linux_64": "azure",
        "linux_aarch64": None,
        "linux_ppc64le": None,
        "osx_64": "azure",
        "osx_arm64": None,
        "win_64": "azure",
    },
    "os_version": {"linux_64": None, "linux_aarch64": None, "linux_ppc64le": None},
    "docker": {"fallback_image": "quay.io/condaforge/linux-anvil-comp7"},
    "github_actions": {"timeout_minutes": 360},
    "recipe_dir": "recipe",
}


@dataclass(frozen=True)
class ForgeSettings:
    """The parts of ``conda-forge.yml`` (with conda-smithy's defaults) that shape ``.ci_support``."""

    build_platform: dict[str, str]
    provider: dict[str, Any]
    os_version: dict[str, str | None]
    fallback_image: str
    timeout_minutes: int
    recipe_dir: str
    raw: dict[str, Any] = field(default_factory=dict)

    def provider_of(self, platform_arch: str) -> list[str]:
        """The CI providers that build ``platform_arch`` (a cross-compiled one uses its build platform's)."""
        build = self.build_platform.get(platform_arch, platform_arch)
        build_os, build_arch = build.split("_", 1)
        key = build_os if build_arch == "64" and self.provider.get(build_os) else build
        return [str(p) for p in as_list(self.provider.get(key)) if p not in (None, "None")]


def _merge(defaults: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(defaults)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def read_forge_settings(path: Path) -> ForgeSettings:
    """``conda-forge.yml`` merged over conda-smithy's defaults."""
    if not path.is_file():
        raise ToolError(f"{path} not found: conda-smithy needs a conda-forge.yml in the feedstock root")
    text = read_text(path)
    try:
        loaded = safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise yaml_error(path, exc, text) from None
    if not isinstance(loaded, dict):
        raise ToolError(f"{path}: expected a mapping of settings")
    config = _merge(FORGE_DEFAULTS, loaded)
    return ForgeSettings(
        build_platform=dict(config["build_platform"]),
        provider=dict(config["provider"]),
        os_version=dict(config["os_version"]),
        fallback_image=str(config["docker"]["fallback_image"]),
        timeout_minutes=int(config["github_actions"]["timeout_minutes"]),
        recipe_dir=str(config["recipe_dir"]),
        raw=config,
    )
