"""What the rehearsal builds for one ``.ci_support`` configuration: the steps, in conda-build's order.

Step 0 is the top-level recipe (``libtorch-split``, megabuild pass 1); then every output with its own
variant. The list comes from :mod:`feedstock_tools.conda.recipe_render`, the render emulation of
``recipe/meta.yaml``; this module only turns it into what the harness needs (variant values as the
environment sees them, the host requirements to provide, the Python of the step).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.inputs import read_text
from feedstock_tools.common.path_safety import component

TOP_LEVEL_NAME = "libtorch-split"


@dataclass(frozen=True)
class Step:
    """One run of ``recipe/build.sh`` (or, for an output without a script, one empty package)."""

    name: str
    version: str
    build_number: int
    build_string: str
    variant: Mapping[str, str]
    has_script: bool
    python: str  # "X.Y" of the host prefix's Python (the pass-1 Python when the host has none)
    host: Sequence[str] = field(default_factory=tuple)  # requirement specs, "name [version [build]]"
    run: Sequence[str] = field(default_factory=tuple)
    build: Sequence[str] = field(default_factory=tuple)  # build requirements (cross-python_<target>, ...)
    # the rendered build section's linkage settings (the linkage check reads them)
    ignore_run_exports_from: Sequence[str] = field(default_factory=tuple)
    ignore_run_exports: Sequence[str] = field(default_factory=tuple)
    missing_dso_whitelist: Sequence[str] = field(default_factory=tuple)
    # build/script_env as rendered: a name (the caller's value passes through) or NAME=value
    script_env: Sequence[str] = field(default_factory=tuple)

    @property
    def label(self) -> str:
        """``pytorch-py3.11``, ``libtorch-cuda-linalg-magma``, ``libtorch``: one name per package variant."""
        parts = [self.name]
        if "magma_variant" in self.variant and self.name == "libtorch-cuda-linalg":
            parts.append(self.variant["magma_variant"])
        if self.name == "pytorch":
            parts.append(f"py{self.python}")
        return "-".join(parts)

    def host_names(self) -> list[str]:
        return [spec.split()[0] for spec in self.host if spec.strip()]

    def run_names(self) -> list[str]:
        return [spec.split()[0] for spec in self.run if spec.strip()]

    def build_names(self) -> list[str]:
        return [spec.split()[0] for spec in self.build if spec.strip()]


def work_name(config_path: Path) -> str:
    """A short directory name for a configuration: ``linux-64_generic_cuda12.9``, ``linux-64_mkl_cpu``,
    ``linux-aarch64_generic_cuda12.9_tegra``."""
    config = load_config(config_path)

    def first(key: str, default: str) -> str:
        return (config.get(key) or [default])[0]

    cuda = first("cuda_compiler_version", "None")
    flavour = "cpu" if cuda == "None" else f"cuda{cuda}"
    # linux-aarch64 CUDA 12.9 exists for servers and for Jetson: arm_variant_type tells them apart
    if cuda != "None" and config.get("arm_variant_type"):
        flavour += f"_{first('arm_variant_type', '')}"
    # the rehearsal deletes and recreates this directory: a value such as '12.9/../../x' must not steer it
    return component(
        f"{first('target_platform', 'linux-64')}_{first('blas_impl', 'generic')}_{flavour}",
        f"work directory name from {config_path.name} (target_platform, blas_impl, cuda_compiler_version, "
        "arm_variant_type)",
    )


def load_config(path: Path) -> dict[str, list[str]]:
    """A `.ci_support/*.yaml` file: variant key -> list of values (strings, as conda-build reads them)."""
    try:
        data = yaml.load(read_text(path), Loader=yaml.BaseLoader)
    except (OSError, yaml.YAMLError) as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ToolError(f"cannot read {path}: {first_line}; pass a .ci_support/<name>.yaml file") from exc
    if not isinstance(data, dict):
        raise ToolError(f"{path} is not a mapping of variant keys; pass a .ci_support/<name>.yaml file")
    return {str(k): v if isinstance(v, list) else [v] for k, v in data.items()}


def python_minor(spec: str) -> str:
    """``"3.11.* *_cpython"`` or ``"3.11"`` -> ``"3.11"``."""
    match = re.match(r"\s*(\d+)\.(\d+)", spec)
    if not match:
        raise ToolError(f"cannot read a Python version from {spec!r}; expected e.g. '3.11.* *_cpython'")
    return f"{match.group(1)}.{match.group(2)}"


def python_min(config: Mapping[str, Sequence[str]]) -> str:
    if config.get("python_min"):
        return python_minor(config["python_min"][0])
    if config.get("python"):
        return min((python_minor(v) for v in config["python"]), key=lambda v: tuple(map(int, v.split("."))))
    raise ToolError("the configuration has neither python_min nor python; re-render .ci_support/")


def _names(specs: Sequence[str] | None) -> tuple[str, ...]:
    return tuple(spec.split()[0] for spec in specs or () if spec.strip())


def plan_steps(config_path: Path, recipe_dir: Path) -> list[Step]:
    """All steps for one configuration, top-level first, then the outputs in conda-build's build order."""
    from feedstock_tools.conda.recipe_render import render_recipe
    from feedstock_tools.proofs.rehearsal.target import target_for

    config = load_config(config_path)
    # conda-build renders on the machine that builds: osx-64's cross-python lines need osx-arm64 there
    target = (config.get("target_platform") or ["linux-64"])[0]
    machine = target_for(target, recipe_dir.parent).build_subdir
    rendered = render_recipe(recipe_dir, config_path, build_subdir=machine)
    if rendered.top_level is None:
        raise ToolError(f"the recipe skips {config_path.name} (build/skip is true); pick another config")
    pass1 = python_min(config)
    # conda-build exports the whole variant (every key with its value for this loop), not only used keys.
    base = {key: values[0] for key, values in config.items() if values and isinstance(values[0], str)}
    base["python"] = next((v for v in config.get("python", []) if python_minor(v) == pass1), f"{pass1}.*")
    top = rendered.top_level
    steps = [
        Step(
            name=top.name,
            version=top.version,
            build_number=int(top.build.get("number", 0)),
            build_string="",
            variant=base,
            has_script=True,
            python=_host_python(top.requirements.host, base["python"]) or pass1,
            host=tuple(top.requirements.host),
            build=tuple(top.requirements.build),
            script_env=tuple(top.build.get("script_env") or ()),
        )
    ]
    for output in rendered.outputs:
        variant = {**base, **{k: str(v) for k, v in output.variant.items()}}
        steps.append(
            Step(
                name=output.name,
                version=output.version,
                build_number=output.build_number,
                build_string=output.build_string,
                variant=variant,
                has_script=output.script is not None,
                python=_host_python(output.requirements.host, variant["python"]) or pass1,
                host=tuple(output.requirements.host),
                run=tuple(output.requirements.run),
                build=tuple(output.requirements.build),
                ignore_run_exports_from=_names(output.build.get("ignore_run_exports_from")),
                ignore_run_exports=_names(output.build.get("ignore_run_exports")),
                missing_dso_whitelist=tuple(output.build.get("missing_dso_whitelist") or ()),
                script_env=tuple(output.build.get("script_env") or ()),
            )
        )
    return steps


def _host_python(host: Sequence[str], variant_python: str) -> str | None:
    """The X.Y of the ``python`` host requirement (a bare ``python`` takes the variant's), or None."""
    for spec in host:
        words = spec.split()
        if words and words[0] == "python":
            return python_minor(words[1] if len(words) > 1 else variant_python)
    return None
