"""Test helper: variant configurations for the recipe tests, composed from the shared pinning.

The CI layer writes the real ``.ci_support/*.yaml`` files; these tests must not depend on them to check the
recipe itself. So this helper composes, for one platform x BLAS x CUDA configuration, what conda-smithy
combines: conda-forge's global pinning (selectors applied for the platform, CF_CUDA_ENABLED for CUDA jobs),
the python314 and cuda130 migrations, and ``recipe/conda_build_config.yaml`` (its keys replace global ones).
The zipped compiler/CUDA group is then cut to the one CUDA version of the configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feedstock_tools.conda.recipe_render import load_variant_config, parse_variant_yaml
from feedstock_tools.conda.selectors import select_lines, selector_namespace

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipe"
PINNING = ROOT.parent / "shared" / "data" / "conda-forge-pinning"
CI_SUPPORT = ROOT / ".ci_support"


@dataclass(frozen=True)
class Configuration:
    """One CI job of the issue's table: platform x BLAS x CUDA."""

    subdir: str
    blas_impl: str
    cuda: str  # "None" for CPU builds

    @property
    def is_cuda(self) -> bool:
        return self.cuda != "None"

    @property
    def flavour(self) -> str:
        return f"cuda{self.cuda.replace('.', '')}" if self.is_cuda else "cpu"

    @property
    def id(self) -> str:
        return f"{self.subdir}-{self.blas_impl}-{self.flavour}"


@dataclass(frozen=True)
class CiJob(Configuration):
    """A configuration as the CI layer generated it: one .ci_support/*.yaml file."""

    config_file: Path | None = None

    @property
    def id(self) -> str:
        return f"ci-{super().id}"


def ci_support_jobs() -> list[CiJob]:
    """The generated CI configurations (none until the CI layer has rendered them)."""
    jobs = []
    for path in sorted(CI_SUPPORT.glob("*.yaml")):
        config = load_variant_config(path)
        jobs.append(
            CiJob(
                subdir=config["target_platform"][0],
                blas_impl=config["blas_impl"][0],
                cuda=str(config["cuda_compiler_version"][0]),
                config_file=path,
            )
        )
    return jobs


# The output table: linux-64 CPU and CUDA 12.9/13.0 with MKL and generic BLAS, linux-aarch64 CPU and
# CUDA (generic, sbsa), osx-64 MKL and generic, osx-arm64 generic.
CONFIGURATIONS: tuple[Configuration, ...] = (
    Configuration("linux-64", "mkl", "None"),
    Configuration("linux-64", "generic", "None"),
    Configuration("linux-64", "mkl", "12.9"),
    Configuration("linux-64", "generic", "12.9"),
    Configuration("linux-64", "mkl", "13.0"),
    Configuration("linux-64", "generic", "13.0"),
    Configuration("linux-aarch64", "generic", "None"),
    Configuration("linux-aarch64", "generic", "12.9"),
    Configuration("linux-aarch64", "generic", "13.0"),
    Configuration("osx-64", "mkl", "None"),
    Configuration("osx-64", "generic", "None"),
    Configuration("osx-arm64", "generic", "None"),
)


def _load(path: Path, namespace: dict[str, Any]) -> dict[str, Any]:
    return parse_variant_yaml(select_lines(path.read_text(), namespace)) or {}


def _zip_groups(config: dict[str, Any]) -> list[list[str]]:
    groups = config.get("zip_keys") or []
    return [list(group) for group in groups if group]


def _append_to_zip(config: dict[str, Any], additions: dict[str, Any]) -> None:
    """A key_add migration: one more entry for every key of the zip group it extends."""
    for key, values in additions.items():
        if key in config and isinstance(values, list):
            config[key] = list(config[key]) + values


def _cut_zip(config: dict[str, Any], key: str, value: str) -> None:
    group = next((g for g in _zip_groups(config) if key in g), [key])
    index = [str(v) for v in config[key]].index(value)
    for member in group:
        if member in config:
            config[member] = [config[member][index]]


def variant_config(configuration: Configuration) -> dict[str, Any]:
    """The variant config (what a .ci_support file holds, before conda-smithy drops unused keys)."""
    environ = {"CF_CUDA_ENABLED": "True"} if configuration.is_cuda else {}
    # the migrations' commit messages carry example selectors naming cuda_compiler_version
    namespace = selector_namespace(
        configuration.subdir, {"cuda_compiler_version": configuration.cuda}, environ
    )
    config = _load(PINNING / "conda_build_config.yaml", namespace)

    python = _load(PINNING / "migrations" / "python314.yaml", namespace)
    _append_to_zip(config, {"python": python["python"], "is_python_min": python["is_python_min"]})
    if configuration.cuda == "13.0":
        cuda130 = _load(PINNING / "migrations" / "cuda130.yaml", namespace)
        _append_to_zip(config, {key: value for key, value in cuda130.items() if not key.startswith("__")})

    recipe = _load(RECIPE / "conda_build_config.yaml", namespace)
    zip_keys = _zip_groups(config) + _zip_groups(recipe)
    config.update(recipe)
    config["zip_keys"] = zip_keys

    _cut_zip(config, "cuda_compiler_version", configuration.cuda)
    config["blas_impl"] = [configuration.blas_impl]
    config["target_platform"] = [configuration.subdir]
    return config
