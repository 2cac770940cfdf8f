"""Which CUDA a build targets: the toolkit directory of conda-forge's CUDA packages and the GPU architectures.

Both depend on the machine the packages are for, not only on ``target_platform``: linux-aarch64 CUDA builds
come in two kinds, conda-forge's ``arm_variant_type`` (global pinning and its ``arm_variant_type.yaml``
migration): ``sbsa`` for servers (Grace, Ampere Altra, ...) and ``tegra`` for NVIDIA Jetson. NVIDIA's
toolchain treats the two as separate targets whose device code is not interchangeable, and conda-forge's
CUDA packages install them under different directories. Everything here is data, read by
:mod:`megabuild.environment`; a new combination is one new row.
"""

from __future__ import annotations

from megabuild.conda_env import CondaBuild
from megabuild.errors import MegabuildError

# conda-forge's value where the pinning gives none: its conda_build_config.yaml sets arm_variant_type to
# "sbsa" for every aarch64 CUDA build, and the arm-variant package's own default is sbsa.
DEFAULT_ARM_VARIANT = "sbsa"

# $PREFIX/targets/<name> of conda-forge's CUDA packages (NVIDIA's target names), per (target_platform, arm
# variant). Tegra's is aarch64-linux: pytorch-cpu-feedstock 74dd3d46 recipe/build.sh sets CUDA_TARGET to it
# when arm_variant_type is tegra, else sbsa-linux on linux-aarch64.
CUDA_TARGETS: dict[tuple[str, str | None], str] = {
    ("linux-64", None): "x86_64-linux",
    ("linux-aarch64", "sbsa"): "sbsa-linux",
    ("linux-aarch64", "tegra"): "aarch64-linux",
    # no targets/ directory on Windows (the toolkit is in %LIBRARY_PREFIX%, megabuild/windows.py): this name
    # only keys CUDA_ARCH_LISTS
    ("win-64", None): "windows",
}

# TORCH_CUDA_ARCH_LIST per (CUDA major.minor, CUDA target), as conda-forge's 2.13.0 build.sh (74dd3d46)
# chooses them: every architecture its CUDA packages support, PTX for the newest so future GPUs can JIT.
# CUDA 13 dropped Maxwell, Pascal and Volta (5.x-7.0). Tegra: the Jetson Orin family alone, compute
# capability 8.7 (NVIDIA's "CUDA GPU Compute Capability" table: Jetson AGX Orin, Orin NX, Orin Nano), with
# PTX; conda-forge builds tegra for CUDA 12.9 only, since from CUDA 13 / JetPack 7 Jetson is SBSA (its
# "How to build for ARM Tegra devices"), so CUDA 13.0 sbsa adds 8.7 to cover Orin (74dd3d46's 4518b3a9).
# CUDA 12.9 sbsa has no 8.7: a Jetson on CUDA 12 cannot run sbsa builds at all.
_SERVER_12_9 = ("5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0", "10.0", "12.0+PTX")
CUDA_ARCH_LISTS: dict[tuple[str, str], tuple[str, ...]] = {
    ("12.9", "x86_64-linux"): _SERVER_12_9,
    ("12.9", "sbsa-linux"): _SERVER_12_9,
    ("12.9", "aarch64-linux"): ("8.7+PTX",),
    # 12.8: conda-forge keeps win-64 there; its 2.13.0 bld.bat gives every 12.x the server list (CUDA 12.8 is
    # the first with sm_100/sm_120)
    ("12.8", "windows"): _SERVER_12_9,
    ("13.0", "x86_64-linux"): ("7.5", "8.0", "8.6", "9.0", "10.0", "11.0", "12.0+PTX"),
    ("13.0", "sbsa-linux"): ("7.5", "8.0", "8.6", "8.7", "9.0", "10.0", "11.0", "12.0+PTX"),
    ("13.0", "windows"): ("7.5", "8.0", "8.6", "9.0", "10.0", "11.0", "12.0+PTX"),
}

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


def cuda_arch_list(cuda: str, target: str) -> list[str]:
    """The TORCH_CUDA_ARCH_LIST entries for CUDA ``cuda`` (``12.9``, ``12.9.1``) on CUDA target ``target``."""
    major_minor = ".".join(cuda.split(".")[:2])
    archs = CUDA_ARCH_LISTS.get((major_minor, target))
    if archs is None:
        raise MegabuildError(
            f"no GPU architecture list for CUDA {cuda} on {target}: add one to CUDA_ARCH_LISTS in {_HERE}"
        )
    return sorted(archs, key=lambda arch: tuple(int(p) for p in arch.removesuffix("+PTX").split(".")))
