"""Test helper: variant configurations for the recipe tests, composed from the shared pinning.

The CI layer writes the real ``.ci_support/*.yaml`` files; these tests must not depend on them to check the
recipe itself. So this helper composes, for one platform x BLAS x CUDA configuration, what conda-smithy
combines: conda-forge's global pinning (selectors applied for the platform, CF_CUDA_ENABLED for CUDA jobs),
the python314 and cuda130 migrations, and ``recipe/conda_build_config.yaml`` (its keys replace global ones).
The zipped compiler/CUDA group is then cut to the one CUDA version of the configuration.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feedstock_tools.common import config_selector
from feedstock_tools.common.configuration import Configuration as CiConfiguration
from feedstock_tools.common.configuration import read_configuration
from feedstock_tools.conda.variants import parse_variant_text

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipe"
PINNING = ROOT.parent / "shared" / "data" / "conda-forge-pinning"
CI_SUPPORT = ROOT / ".ci_support"


def recipe_set(name: str, recipe: Path = RECIPE) -> str:
    """A string ``meta.yaml`` sets with ``{% set <name> = "..." %}`` (version, sha256): tests read it here."""
    text = (recipe / "meta.yaml").read_text(encoding="utf-8")
    found = re.search(rf"""\{{%-?\s*set\s+{name}\s*=\s*["']([^"']*)["']\s*-?%\}}""", text)
    assert found, f"{recipe / 'meta.yaml'}: no {{% set {name} = ... %}} line"
    return found.group(1)


def with_version(meta_text: str, version: str) -> str:
    """``meta.yaml``'s text with its version set to ``version`` (for a scratch copy of the recipe)."""
    line = re.compile(r"""(\{%-?\s*set\s+version\s*=\s*["'])[^"']*(["'])""")
    assert line.search(meta_text), "meta.yaml: no {% set version = ... %} line"
    return line.sub(lambda m: m[1] + version + m[2], meta_text, count=1)


def minor_upper_bound(version: str) -> str:
    """The upper bound of ``pin_subpackage(..., max_pin="x.x")`` for ``version``: 2.13.0 -> 2.14.0a0."""
    major, minor = version.split(".")[:2]
    return f"{major}.{int(minor) + 1}.0a0"


RECIPE_VERSION = recipe_set("version")


@dataclass(frozen=True)
class Configuration:
    """One CI job of the issue's table: platform x BLAS x CUDA."""

    subdir: str
    blas_impl: str
    cuda: str  # "None" for CPU builds
    arm_variant: str | None = None  # linux-aarch64 CUDA: "sbsa" (servers) or "tegra" (Jetson)

    @property
    def is_cuda(self) -> bool:
        return self.cuda != "None"

    @property
    def is_windows(self) -> bool:
        return self.subdir.startswith("win-")

    @property
    def has_cuda_linalg(self) -> bool:
        """2.13.0 builds libtorch_cuda_linalg as a library of its own on linux only
        (docs/reference/windows.md)."""
        return self.is_cuda and self.subdir.startswith("linux-")

    @property
    def build_script(self) -> str:
        """The script conda-build runs for a scripted output: bash's on unix, cmd's on Windows."""
        return "bld.bat" if self.is_windows else "build.sh"

    @property
    def flavour(self) -> str:
        return f"cuda{self.cuda.replace('.', '')}" if self.is_cuda else "cpu"

    @property
    def id(self) -> str:
        return "-".join(
            [self.subdir, self.blas_impl, self.flavour, *([self.arm_variant] if self.arm_variant else [])]
        )


@dataclass(frozen=True)
class CiJob(Configuration):
    """A configuration as the CI layer generated it: one BLAS of a .ci_support/*.yaml file (a linux-64 or
    osx-64 job builds both)."""

    config_file: Path | None = None

    @property
    def id(self) -> str:
        return f"ci-{super().id}"

    def ci_configuration(self) -> CiConfiguration:
        """The job's file cut to this BLAS: what conda-build builds of it from one top-level build."""
        assert self.config_file is not None
        config = read_configuration(self.config_file)
        return config.for_blas(self.blas_impl) if self.blas_impl else config


def ci_config(platform: str, cuda: str = "cpu") -> CiConfiguration:
    """The one committed ``.ci_support`` configuration of a target platform and CUDA version (``cpu``, or a
    version), chosen by its fields as ``--platform``/``--cuda`` choose, never by its file name."""
    only = config_selector.ConfigFilter(platform, cuda)
    return config_selector.resolve_by_fields(CI_SUPPORT, [only], "a test's platform and CUDA version")


def ci_support_jobs() -> list[CiJob]:
    """The generated CI configurations, one per BLAS of each file (none until the CI layer has rendered
    them)."""
    jobs = []
    for path in sorted(CI_SUPPORT.glob("*.yaml")):
        config = read_configuration(path)
        # the key is in every linux-aarch64 file (conda-smithy keeps a key any configuration of the platform
        # uses); only CUDA builds differ by it
        arm_variant = config.arm_variant if config.cuda is not None else None
        jobs += [
            CiJob(
                subdir=config.target_platform,
                blas_impl=blas,
                cuda=config.cuda or "None",
                arm_variant=arm_variant,
                config_file=path,
            )
            for blas in config.blases or ("",)
        ]
    return jobs


# The output table: linux-64 CPU and CUDA 12.9/13.0 with MKL and generic BLAS, linux-aarch64 CPU and
# CUDA (generic; sbsa 12.9 and 13.0, tegra 12.9 for Jetson), osx-64 MKL and generic, osx-arm64 generic,
# win-64 CPU and CUDA 12.8/13.0 with MKL.
CONFIGURATIONS: tuple[Configuration, ...] = (
    Configuration("linux-64", "mkl", "None"),
    Configuration("linux-64", "generic", "None"),
    Configuration("linux-64", "mkl", "12.9"),
    Configuration("linux-64", "generic", "12.9"),
    Configuration("linux-64", "mkl", "13.0"),
    Configuration("linux-64", "generic", "13.0"),
    Configuration("linux-aarch64", "generic", "None"),
    Configuration("linux-aarch64", "generic", "12.9", "sbsa"),
    Configuration("linux-aarch64", "generic", "12.9", "tegra"),
    Configuration("linux-aarch64", "generic", "13.0", "sbsa"),
    Configuration("osx-64", "mkl", "None"),
    Configuration("osx-64", "generic", "None"),
    Configuration("osx-arm64", "generic", "None"),
    Configuration("win-64", "mkl", "None"),
    Configuration("win-64", "mkl", "12.8"),
    Configuration("win-64", "mkl", "13.0"),
)


def _load(path: Path, configuration: Configuration) -> dict[str, Any]:
    """A variant file as conda-build reads it for ``configuration`` (the migrations' commit messages carry
    example selectors naming cuda_compiler_version; CF_CUDA_ENABLED for CUDA jobs)."""
    environ = {"CF_CUDA_ENABLED": "True"} if configuration.is_cuda else {}
    variant = {"cuda_compiler_version": configuration.cuda}
    return parse_variant_text(path.read_text(), configuration.subdir, environ, variant, source=path)


def _zip_groups(config: dict[str, Any]) -> list[list[str]]:
    groups = config.get("zip_keys") or []
    return [list(group) for group in groups if group]


def _append_to_zip(config: dict[str, Any], additions: dict[str, Any]) -> None:
    """A key_add migration: one more entry for every key of the zip group it extends."""
    for key, values in additions.items():
        if key in config and isinstance(values, list):
            config[key] = list(config[key]) + values


def _add_zip_keys(config: dict[str, Any], migration: dict[str, Any], primary_key: str) -> None:
    """A key_add migration's ``additional_zip_keys`` join the primary key's zip group; their one value is
    repeated for the existing rows (conda-smithy 2026.8.5 variant_algebra.op_variant_key_add)."""
    group = next(g for g in config["zip_keys"] if primary_key in g)
    for key in migration["__migrator"].get("additional_zip_keys") or []:
        if key not in group:
            group.append(key)
            config[key] = list(config[key]) * len(config[primary_key])


def _cut_zip(config: dict[str, Any], row: dict[str, str]) -> None:
    """Keep the one row of the zip group whose values are ``row`` (key -> value)."""
    (key, *_) = row
    group = next((g for g in _zip_groups(config) if key in g), [key])
    rows = zip(*([str(v) for v in config[k]] for k in row), strict=True)
    index = list(rows).index(tuple(row.values()))
    for member in group:
        if member in config:
            config[member] = [config[member][index]]


def variant_config(configuration: Configuration) -> dict[str, Any]:
    """The variant config (what a .ci_support file holds, before conda-smithy drops unused keys)."""
    config = _load(PINNING / "conda_build_config.yaml", configuration)
    # the recipe's keys replace the pinning's before the migrations run (win-64's cuda_compiler_version)
    recipe = _load(RECIPE / "conda_build_config.yaml", configuration)
    zip_keys = _zip_groups(config) + _zip_groups(recipe)
    config.update(recipe)
    config["zip_keys"] = zip_keys

    python = _load(PINNING / "migrations" / "python314.yaml", configuration)
    _append_to_zip(config, {"python": python["python"], "is_python_min": python["is_python_min"]})
    if configuration.cuda == "13.0":
        cuda130 = _load(PINNING / "migrations" / "cuda130.yaml", configuration)
        _append_to_zip(config, {key: value for key, value in cuda130.items() if not key.startswith("__")})
    row = {"cuda_compiler_version": configuration.cuda}
    if configuration.arm_variant == "tegra":
        # the Jetson row: CUDA 12.9, glibc 2.34, arm_variant_type tegra (migrations/arm_variant_type.yaml)
        tegra = _load(PINNING / "migrations" / "arm_variant_type.yaml", configuration)
        _add_zip_keys(config, tegra, "cuda_compiler_version")
        _append_to_zip(config, {key: value for key, value in tegra.items() if not key.startswith("__")})
        row["arm_variant_type"] = "tegra"

    _cut_zip(config, row)
    config["blas_impl"] = [configuration.blas_impl]
    config["target_platform"] = [configuration.subdir]
    return config
