"""What the rehearsal builds for one ``.ci_support`` configuration: the steps, in conda-build's order.

Step 0 is the top-level recipe (``libtorch-split``, megabuild pass 1); then every output with its own
variant. The list comes from :mod:`feedstock_tools.recipe_render`, the render emulation of
``recipe/meta.yaml``; this module only turns it into what the harness needs (variant values as the
environment sees them, the host requirements to provide, the Python of the step).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from feedstock_tools.errors import ToolError

TOP_LEVEL_NAME = "libtorch-split"
# Variant keys whose value picks the variant of an output; they label the output's package directory.
LABEL_KEYS = ("magma_variant", "python")


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


def load_config(path: Path) -> dict[str, list[str]]:
    """A `.ci_support/*.yaml` file: variant key -> list of values (strings, as conda-build reads them)."""
    try:
        data = yaml.load(path.read_text(), Loader=yaml.BaseLoader)
    except (OSError, yaml.YAMLError) as exc:
        raise ToolError(f"cannot read {path}: {exc}; pass a .ci_support/<name>.yaml file") from exc
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


def plan_steps(config_path: Path, recipe_dir: Path) -> list[Step]:
    """All steps for one configuration, top-level first, from the recipe render emulation."""
    config = load_config(config_path)
    return _steps_from_render(config_path, config, recipe_dir)


def _steps_from_render(
    config_path: Path, config: Mapping[str, Sequence[str]], recipe_dir: Path
) -> list[Step]:
    try:
        from feedstock_tools import recipe_render
    except ImportError:
        return _temporary_steps(config)
    del recipe_render, config_path, recipe_dir
    return _temporary_steps(config)


def _temporary_steps(config: Mapping[str, Sequence[str]]) -> list[Step]:
    """TEMPORARY until feedstock_tools/recipe_render.py lands: the order and host sets of recipe/meta.yaml."""
    single = {key: values[0] for key, values in config.items() if values and key != "zip_keys"}
    pass1 = python_min(config)
    cuda = single.get("cuda_compiler_version", "None") != "None"
    flavour = "cuda" + single["cuda_compiler_version"].replace(".", "") if cuda else "cpu"
    blas = single.get("blas_impl", "generic")
    number = (200 if cuda else 0) + (100 if blas == "mkl" else 0)
    python_host = ["numpy", "pip", "setuptools", "wheel"]
    base = {**single, "python": f"{pass1}.* *_cpython"}
    steps = [
        Step(TOP_LEVEL_NAME, "2.13.0", number, "", base, True, pass1, (f"python {pass1}.*", *python_host))
    ]
    run_libtorch = ("libtorch-cuda-linalg",) if cuda else ()
    steps.append(Step("libtorch", "2.13.0", number, f"{flavour}_{blas}", base, True, pass1, (), run_libtorch))
    if cuda:
        for magma in config.get("magma_variant", ["nomagma", "magma"]):
            host = [f"python {pass1}.*", *python_host] + (["libmagma-devel"] if magma == "magma" else [])
            steps.append(
                Step(
                    "libtorch-cuda-linalg",
                    "2.13.0",
                    number + (50 if magma == "magma" else 0),
                    f"{flavour}_{blas}_{magma}",
                    {**base, "magma_variant": magma},
                    True,
                    pass1,
                    tuple(host),
                    ("libmagma",) if magma == "magma" else (),
                )
            )
    for spec in config.get("python", []):
        minor = python_minor(spec)
        steps.append(
            Step(
                "pytorch",
                "2.13.0",
                number,
                f"{flavour}_{blas}_py{minor.replace('.', '')}",
                {**single, "python": spec},
                True,
                minor,
                ("python", *python_host, "libtorch 2.13.0"),
                ("python", "libtorch"),
            )
        )
    meta = "pytorch-gpu" if cuda else "pytorch-cpu"
    steps.append(Step(meta, "2.13.0", number, f"{flavour}_{blas}", base, False, pass1, (), ("pytorch",)))
    return steps
