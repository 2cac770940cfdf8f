"""What the rehearsal builds for one ``.ci_support`` configuration: the steps, in conda-build's order.

Step 0 is the top-level recipe (``libtorch-split``, megabuild pass 1); then every output with its own
variant. A configuration of several BLAS (one CI job building both, docs/reference/recipe.md) is one such
group per BLAS, each with its own top-level build, as conda-build and rattler-build run it. The list comes
from :mod:`feedstock_tools.conda.recipe_render`, the render emulation of ``recipe/meta.yaml``; this module
only turns it into what the harness needs (variant values as the environment sees them, the host
requirements to provide, the Python of the step).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from feedstock_tools.common.configuration import BLAS_KEY, Configuration, PythonVersion
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.path_safety import component
from megabuild import package_files

if TYPE_CHECKING:
    from feedstock_tools.conda.recipe_render import RenderedOutput

TOP_LEVEL_NAME = package_files.TOP_LEVEL
PYTORCH = package_files.PYTORCH


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
    # the BLAS of the step's group where the configuration builds several (None where it builds one)
    blas: str | None = None

    @property
    def label(self) -> str:
        """``pytorch-py3.11``, ``libtorch-cuda-linalg-magma``, ``libtorch``; ``libtorch-mkl``,
        ``pytorch-generic-py3.11`` in a configuration of several BLAS: one name per package variant."""
        parts = [self.name]
        if self.blas is not None:
            parts.append(self.blas)
        if "magma_variant" in self.variant and self.name == package_files.LIBTORCH_CUDA_LINALG:
            parts.append(self.variant["magma_variant"])
        if self.name == package_files.PYTORCH:
            parts.append(f"py{self.python}")
        return "-".join(parts)

    def host_names(self) -> list[str]:
        return [spec.split()[0] for spec in self.host if spec.strip()]

    def run_names(self) -> list[str]:
        return [spec.split()[0] for spec in self.run if spec.strip()]

    def build_names(self) -> list[str]:
        return [spec.split()[0] for spec in self.build if spec.strip()]


def work_name(config: Configuration) -> str:
    """A short directory name for a configuration: ``linux-64_generic+mkl_cuda12.9`` (a job of both BLAS),
    ``linux-64_mkl_cpu`` (one BLAS of it), ``linux-aarch64_generic_cuda12.9_tegra``."""
    flavour = "cpu" if config.cuda is None else f"cuda{config.cuda}"
    # linux-aarch64 CUDA 12.9 exists for servers and for Jetson: arm_variant_type tells them apart
    if config.cuda is not None and config.arm_variant is not None:
        flavour += f"_{config.arm_variant}"
    # the rehearsal deletes and recreates this directory: a value such as '12.9/../../x' must not steer it
    return component(
        f"{config.target_platform}_{'+'.join(config.blases) or 'generic'}_{flavour}",
        f"work directory name from {config.path.name} (target_platform, blas_impl, cuda_compiler_version, "
        "arm_variant_type)",
    )


def _names(specs: Sequence[str] | None) -> tuple[str, ...]:
    return tuple(spec.split()[0] for spec in specs or () if spec.strip())


def plan_steps(config: Configuration, recipe_dir: Path) -> list[Step]:
    """All steps for one configuration: per top-level build (one per BLAS where it builds several), the
    top level first, then its outputs in the render's order."""
    from feedstock_tools.conda.recipe_render import render_recipe
    from feedstock_tools.proofs.rehearsal.target import target_for

    # conda-build renders on the machine that builds: osx-64's cross-python lines need osx-arm64 there
    machine = target_for(config.target_platform, recipe_dir.parent).build_subdir
    rendered = render_recipe(recipe_dir, config, build_subdir=machine)
    if rendered.top_level is None:
        raise ToolError(f"the recipe skips {config.path.name} (build/skip is true); pick another config")
    pass1 = config.python_min
    # conda-build exports the whole variant (every key with its value for this loop), not only used keys.
    first = {key: values[0] for key in config if (values := config.values_of(key))}
    first["python"] = next((p.spec for p in config.pythons if p.version == pass1), f"{pass1}.*")
    several = len(config.blases) > 1
    steps: list[Step] = []
    for top in rendered.top_levels:
        base = {**first, **{k: str(v) for k, v in top.variant.items()}}
        blas = base.get(BLAS_KEY) if several else None
        steps.append(
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
                blas=blas,
            )
        )
        steps += _output_steps(rendered.outputs_of(top), base, pass1, blas)
    return steps


def _output_steps(
    outputs: Sequence[RenderedOutput], base: Mapping[str, str], pass1: str, blas: str | None
) -> list[Step]:
    steps = []
    for output in outputs:
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
                blas=blas,
            )
        )
    return steps


def _host_python(host: Sequence[str], variant_python: str) -> str | None:
    """The X.Y of the ``python`` host requirement (a bare ``python`` takes the variant's), or None."""
    for spec in host:
        words = spec.split()
        if words and words[0] == "python":
            return PythonVersion.parse(words[1] if len(words) > 1 else variant_python).version
    return None


def conda_build_order(steps: Sequence[Step], seed: int | None, cross: bool = False) -> list[Step]:
    """The steps in the order conda-build 26.7.1 runs them: each top-level build with its outputs
    (:func:`group_order`), every group in :func:`group_build_order`."""
    groups: list[list[Step]] = []
    for step in steps:
        if step.name == TOP_LEVEL_NAME or not groups:
            groups.append([])
        groups[-1].append(step)
    return [step for group in group_order(groups, seed) for step in group_build_order(group, seed, cross)]


def group_order(groups: list[list[Step]], seed: int | None) -> list[list[Step]]:
    """The top-level builds of a configuration of several BLAS, each followed by all its outputs: conda-build
    26.7.1 built libtorch-split for mkl, its outputs and their tests, then the same for generic (measured,
    PYTHONHASHSEED 0; the .ci_support file lists generic first), rattler-build 0.73.0 generic first. ``seed``
    None keeps the render's order; a number picks a permutation of its own (seed 0: mkl first)."""
    if seed is None:
        return groups

    def group_key(group: list[Step]) -> str:
        return hashlib.sha256(f"{seed}:{group[0].blas}".encode()).hexdigest()

    return sorted(groups, key=group_key)


def group_build_order(steps: Sequence[Step], seed: int | None, cross: bool = False) -> list[Step]:
    """One group's steps in the order conda-build 26.7.1 runs them: the top-level build first, then the
    outputs by name in dependency order, the names of one level sorted (conda_build/metadata.py 926-982
    ``_toposort_outputs``, conda/common/toposort.py 20-51 ``_toposort``; a name depends on the outputs its
    run, host and, unless cross-compiling, build requirements name), the variants of one name together.

    The variants of one name come in the order of Python's sets of strings (conda_build/variants.py 609-655,
    ``list_of_dicts_to_dict_of_lists``), so it changes with PYTHONHASHSEED (measured, conda-build 26.7.1, this
    recipe's CUDA configuration: seed 0 built pytorch for 3.12, 3.13, 3.10, 3.11, 3.14; seed 1 for 3.10,
    3.13, 3.11, 3.12, 3.14; seed 2 for 3.13, 3.14, 3.10, 3.12, 3.11). ``seed`` None keeps the render's
    order; a number picks a permutation of its own (a stand-in for the hash order, not CPython's)."""
    top, outputs = steps[0], list(steps[1:])
    names = list(dict.fromkeys(step.name for step in outputs))
    needs = {
        name: {
            dep
            for step in outputs
            if step.name == name
            for dep in (*step.run_names(), *step.host_names(), *([] if cross else step.build_names()))
            if dep in names and dep != name
        }
        for name in names
    }
    ordered: list[str] = []
    while needs:
        level = sorted(name for name, deps in needs.items() if not deps)
        if not level:
            raise ToolError(f"the outputs {', '.join(sorted(needs))} depend on each other in a circle")
        ordered += level
        needs = {name: deps - set(level) for name, deps in needs.items() if name not in level}

    def variant_key(step: Step) -> str:
        return hashlib.sha256(f"{seed}:{step.label}".encode()).hexdigest()

    by_name = {name: [step for step in outputs if step.name == name] for name in ordered}
    if seed is not None:
        by_name = {name: sorted(group, key=variant_key) for name, group in by_name.items()}
    return [top, *(step for name in ordered for step in by_name[name])]
