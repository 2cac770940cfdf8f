"""Which CUDA a build targets: the toolkit directory of conda-forge's CUDA packages and the GPU architectures.

Both depend on the machine the packages are for, not only on ``target_platform``: linux-aarch64 CUDA builds
come in two kinds, conda-forge's ``arm_variant_type`` (global pinning and its ``arm_variant_type.yaml``
migration): ``sbsa`` for servers (Grace, Ampere Altra, ...) and ``tegra`` for NVIDIA Jetson. NVIDIA's
toolchain treats the two as separate targets whose device code is not interchangeable, and conda-forge's
CUDA packages install them under different directories. The toolkit directories are data here, read by
:mod:`megabuild.environment`; a new combination is one new row.

The GPU architectures are the recipe's: ``recipe/meta.yaml`` holds each configuration's list
(``cuda_arch_list``), constrains ``__cuda_arch`` (CEP 46) to its first entry and hands it to every pass
through ``script_env`` as ``MEGABUILD_CUDA_ARCH_LIST`` (recipe-v1: ``script.env``). The driver builds with
that value and refuses one the recipe's bound would misread: not oldest first, or ``+PTX`` anywhere but on
the newest entry (docs/reference/solver-picks.md, "Which GPUs a CUDA build runs on").
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from megabuild.conda_env import CondaBuild
from megabuild.errors import MegabuildError

# conda-forge's value where the pinning gives none: its conda_build_config.yaml sets arm_variant_type to
# "sbsa" for every aarch64 CUDA build, and the arm-variant package's own default is sbsa.
DEFAULT_ARM_VARIANT = "sbsa"

# $PREFIX/targets/<name> of conda-forge's CUDA packages (NVIDIA's target names), per (target_platform, arm
# variant). Tegra's is aarch64-linux: pytorch-cpu-feedstock 74dd3d46 recipe/build.sh sets CUDA_TARGET to it
# when arm_variant_type is tegra, else sbsa-linux on linux-aarch64. (Windows has no targets/ directory: the
# toolkit is in %LIBRARY_PREFIX%, megabuild/windows.py.)
CUDA_TARGETS: dict[tuple[str, str | None], str] = {
    ("linux-64", None): "x86_64-linux",
    ("linux-aarch64", "sbsa"): "sbsa-linux",
    ("linux-aarch64", "tegra"): "aarch64-linux",
}

# the recipe's GPU architectures of the configuration, in TORCH_CUDA_ARCH_LIST's spelling (its script_env)
ARCH_LIST_VARIABLE = "MEGABUILD_CUDA_ARCH_LIST"
_ARCH = re.compile(r"(?P<major>[0-9]+)\.(?P<minor>[0-9])(?P<ptx>\+PTX)?")

_HERE = "recipe/megabuild/cuda_targets.py"


def arm_variant(build: CondaBuild) -> str | None:
    """``sbsa``/``tegra`` for linux-aarch64 (the variant's arm_variant_type), None elsewhere."""
    if build.target_platform != "linux-aarch64":
        return None
    return build.variant.get("arm_variant_type") or DEFAULT_ARM_VARIANT


def cuda_target(build: CondaBuild) -> str:
    """NVIDIA's name of the build's CUDA target (``sbsa-linux``); its toolkit is $PREFIX/targets/<name>."""
    variant = arm_variant(build)
    target = CUDA_TARGETS.get((build.target_platform, variant))
    if target is None:
        kind = build.target_platform + (f" with arm_variant_type={variant}" if variant else "")
        raise MegabuildError(f"no CUDA target directory for {kind}: add it to CUDA_TARGETS in {_HERE}")
    return target


def _arch_key(arch: str) -> tuple[int, int]:
    match = _ARCH.fullmatch(arch)
    assert match is not None  # checked by cuda_arch_list
    return int(match["major"]), int(match["minor"])


def cuda_arch_list(caller: Mapping[str, str]) -> list[str]:
    """The GPU architectures to build for, oldest first: ``MEGABUILD_CUDA_ARCH_LIST`` of the caller's
    environment (``7.5;8.0;12.0+PTX``), which recipe/meta.yaml's script_env sets; a MegabuildError naming the
    problem and the fix when it is missing or breaks a rule the recipe's __cuda_arch bound relies on."""
    text = caller.get(ARCH_LIST_VARIABLE, "").strip()
    fix = "fix cuda_arch_list in recipe/meta.yaml (its script_env passes it to every pass)"
    if not text:
        configuration = (
            f"CUDA {caller.get('cuda_compiler_version', '?')} on {caller.get('target_platform', '?')}"
            + (f" {caller['arm_variant_type']}" if caller.get("arm_variant_type") else "")
        )
        raise MegabuildError(
            f"{ARCH_LIST_VARIABLE} is empty or not set: no GPU architectures for {configuration}; add its "
            "list to cuda_arch_list in recipe/meta.yaml and build with conda-build or rattler-build, which "
            "pass it (script_env)"
        )
    archs = text.split(";")
    bad = [arch for arch in archs if not _ARCH.fullmatch(arch)]
    if bad:
        raise MegabuildError(
            f"{ARCH_LIST_VARIABLE}={text}: {bad[0]!r} is not an architecture (X.Y or X.Y+PTX); {fix}"
        )
    keys = [_arch_key(arch) for arch in archs]
    if keys != sorted(set(keys)):
        raise MegabuildError(
            f"{ARCH_LIST_VARIABLE}={text}: not ordered oldest first without repeats (the recipe takes the "
            f"first entry as the oldest for __cuda_arch); {fix}"
        )
    if [arch for arch in archs if arch.endswith("+PTX")] != [archs[-1]]:
        raise MegabuildError(
            f"{ARCH_LIST_VARIABLE}={text}: only the newest architecture "
            f"({archs[-1].removesuffix('+PTX')}) must carry +PTX: newer GPUs run it by JIT, which is why "
            f"__cuda_arch has no upper bound; {fix}"
        )
    return archs
