"""Which CUDA a build targets: the toolkit directory of conda-forge's CUDA packages and the GPU architectures.

Both depend on the machine the packages are for, not only on ``target_platform``: linux-aarch64 CUDA builds
come in two kinds, conda-forge's ``arm_variant_type`` (global pinning and its ``arm_variant_type.yaml``
migration): ``sbsa`` for servers (Grace, Ampere Altra, ...) and ``tegra`` for NVIDIA Jetson. NVIDIA's
toolchain treats the two as separate targets whose device code is not interchangeable, and conda-forge's
CUDA packages install them under different directories. Everything here is data, read by
:mod:`megabuild.environment`; a new combination is one new row.

The GPU architectures live in ``cuda_arch_lists.json`` beside this file, plain data that three readers
share: this module (``TORCH_CUDA_ARCH_LIST`` of the build), ``recipe/meta.yaml`` (conda-build's
``load_file_data``) and ``recipe-v1/recipe.yaml`` (rattler-build's ``load_from_file``), which both constrain
``__cuda_arch`` (CEP 46) to the oldest architecture of the list; so a list is ordered oldest first and only
its newest architecture carries ``+PTX`` (checked here, docs/recipe.md "Which GPUs a CUDA build runs on").
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

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

# TORCH_CUDA_ARCH_LIST per machine kind (target_platform, plus " <arm_variant_type>" on linux-aarch64) and
# CUDA major.minor, as conda-forge's 2.13.0 build.sh and bld.bat (74dd3d46) choose them: every architecture
# its CUDA packages support, PTX for the newest so future GPUs can JIT. CUDA 13 dropped Maxwell, Pascal and
# Volta (5.x-7.0). Tegra: the Jetson Orin family alone, compute capability 8.7 (NVIDIA's "CUDA GPU Compute
# Capability" table: Jetson AGX Orin, Orin NX, Orin Nano), with PTX; conda-forge builds tegra for CUDA 12.9
# only, since from CUDA 13 / JetPack 7 Jetson is SBSA (its "How to build for ARM Tegra devices"), so CUDA
# 13.0 sbsa adds 8.7 to cover Orin (74dd3d46's 4518b3a9). CUDA 12.9 sbsa has no 8.7: a Jetson on CUDA 12
# cannot run sbsa builds at all. win-64 builds CUDA 12.8 (docs/recipe.md "Windows"), with the server list
# conda-forge's bld.bat gives every 12.x (12.8 is the first CUDA with sm_100/sm_120).
ARCH_LISTS_FILE = Path(__file__).with_name("cuda_arch_lists.json")
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


def machine_kind(build: CondaBuild) -> str:
    """The key of ``cuda_arch_lists.json`` for this build: ``linux-64``, ``linux-aarch64 tegra``, ``win-64``
    (the recipes compute the same key from target_platform and arm_variant_type)."""
    variant = arm_variant(build)
    return build.target_platform + (f" {variant}" if variant else "")


def _arch_key(arch: str) -> tuple[int, int]:
    match = _ARCH.fullmatch(arch)
    assert match is not None  # checked by load_arch_lists
    return int(match["major"]), int(match["minor"])


def check_arch_list(archs: object, where: str) -> list[str]:
    """``archs`` if it is a list the recipes can read: ``X.Y`` entries oldest first, ``+PTX`` on the newest
    alone; else a MegabuildError naming ``where``, the problem and the rule."""
    fix = f"fix it in {ARCH_LISTS_FILE.name}"
    if not isinstance(archs, list) or not archs or not all(isinstance(a, str) for a in archs):
        raise MegabuildError(f'{where}: not a list of architectures such as ["7.5", "12.0+PTX"]; {fix}')
    bad = [arch for arch in archs if not _ARCH.fullmatch(arch)]
    if bad:
        raise MegabuildError(f"{where}: {bad[0]!r} is not an architecture (X.Y or X.Y+PTX); {fix}")
    keys = [_arch_key(arch) for arch in archs]
    if keys != sorted(set(keys)):
        raise MegabuildError(
            f"{where}: not ordered oldest first without repeats (the recipes take the first entry as the "
            f"oldest for __cuda_arch); {fix}"
        )
    if [arch for arch in archs if arch.endswith("+PTX")] != [archs[-1]]:
        raise MegabuildError(
            f"{where}: only the newest architecture ({archs[-1].removesuffix('+PTX')}) must carry +PTX: "
            f"newer GPUs run it by JIT, which is why __cuda_arch has no upper bound; {fix}"
        )
    return archs


@functools.cache
def load_arch_lists(path: Path = ARCH_LISTS_FILE) -> dict[str, dict[str, list[str]]]:
    """``cuda_arch_lists.json``: machine kind -> CUDA major.minor -> architectures, every list checked."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MegabuildError(f"{path}: cannot read it as JSON ({exc}); restore it from git") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise MegabuildError(
            f"{path}: not a mapping of machine kind to {{CUDA version: architectures}}; restore it from git"
        )
    return {
        kind: {cuda: check_arch_list(archs, f"{path}: {kind!r} CUDA {cuda}") for cuda, archs in lists.items()}
        for kind, lists in data.items()
    }


def cuda_arch_list(cuda: str, kind: str) -> list[str]:
    """The TORCH_CUDA_ARCH_LIST entries for CUDA ``cuda`` (``12.9``, ``12.9.1``) on machine kind ``kind``
    (:func:`machine_kind`), oldest first."""
    major_minor = ".".join(cuda.split(".")[:2])
    archs = load_arch_lists().get(kind, {}).get(major_minor)
    if archs is None:
        raise MegabuildError(
            f"no GPU architecture list for CUDA {cuda} on {kind}: add one to {ARCH_LISTS_FILE.name} "
            f"beside {_HERE}"
        )
    return list(archs)


def oldest_arch(archs: list[str]) -> str:
    """The lower bound of ``__cuda_arch`` for a build of ``archs``: its oldest architecture, without +PTX."""
    return archs[0].removesuffix("+PTX")
