"""Test helpers: the real 2.13.0 wheels as their small fixtures (tests/data), and test doubles made of them.

* ``torch-2.13.0-<target>-wheel-files.txt.gz``: the wheel's zip directory (``wheel-layout --file-list``);
* ``torch-2.13.0-<target>-wheel-needs.txt.gz``: each binary's needed libraries and search paths, read with
  lief from the real wheel (``wheel-layout --needs-list``).

A *skeleton wheel* (a test double) has the listed names and modes and no contents; the reader
``linkage.StagedWheelNeeds`` (``bump`` uses it too) answers for a staged file with what the real wheel's
binary of that path needs.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

from feedstock_tools.common.configuration import Configuration, read_configuration
from feedstock_tools.proofs.wheels.linkage import BinaryNeeds, read_needs_list
from feedstock_tools.proofs.wheels.wheel_layout import ListedFile, read_file_list

DATA = Path(__file__).resolve().parent / "data"
CI_SUPPORT = DATA.parents[1] / ".ci_support"


@dataclass(frozen=True)
class WheelFixture:
    """One real wheel as the fixtures keep it."""

    target: str  # the fixtures' name part: cuda130, cuda130-aarch64, macos-arm64, cp312-win_amd64
    wheel_name: str
    subdir: str
    shlib: str

    @property
    def files(self) -> list[ListedFile]:
        return read_file_list(DATA / f"torch-2.13.0-{self.target}-wheel-files.txt.gz")

    @property
    def needs(self) -> dict[str, BinaryNeeds]:
        return read_needs_list(DATA / f"torch-2.13.0-{self.target}-wheel-needs.txt.gz")


WHEELS = (
    WheelFixture("cuda130", "torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl", "linux-64", ".so"),
    WheelFixture(
        "cuda130-aarch64", "torch-2.13.0-cp312-cp312-manylinux_2_28_aarch64.whl", "linux-aarch64", ".so"
    ),
    WheelFixture("macos-arm64", "torch-2.13.0-cp312-cp312-macosx_14_0_arm64.whl", "osx-arm64", ".dylib"),
    WheelFixture("cp312-win_amd64", "torch-2.13.0-cp312-cp312-win_amd64.whl", "win-64", ".dll"),
)


def ci_config(subdir: str, cuda: str) -> Configuration:
    """The .ci_support file of a target, cut to generic BLAS where it builds that (win-64 builds MKL only):
    what find_config picks for that wheel, found here by reading the files directly."""
    configs = [read_configuration(path) for path in sorted(CI_SUPPORT.glob("*.yaml"))]
    candidates = [c for c in configs if c.target_platform == subdir and (c.cuda or "None") == cuda]
    generic = [config for config in candidates if "generic" in config.blases]
    (config,) = generic or candidates
    return config.for_blas("generic") if "generic" in config.blases else config


def write_skeleton_wheel(files: list[ListedFile], directory: Path, name: str) -> Path:
    """Test double of a wheel: every listed path with its mode, and no contents."""
    wheel = directory / name
    with zipfile.ZipFile(wheel, "w") as archive:
        for listed_file in files:
            member = zipfile.ZipInfo(listed_file.path)
            member.external_attr = (0o100000 | listed_file.mode) << 16
            archive.writestr(member, b"")
    return wheel


def binaries_and_markers(files: list[ListedFile], needs: dict[str, BinaryNeeds]) -> list[ListedFile]:
    """The members a linkage run needs: the binaries, and what makes a zip a torch wheel for wheel-layout."""
    markers = {"torch/__init__.py", "torch/version.py"}
    return [
        f for f in files if f.path in needs or f.path in markers or f.path.endswith(".dist-info/METADATA")
    ]
