"""Prove the package split on real PyTorch binaries: a release wheel staged the way the megabuild stages.

The megabuild itself cannot run without a PyTorch source tree, but an official wheel holds the very files
the build installs. This tool

1. lays the wheel out as the build tree the driver stages from: the setuptools tree
   ``build/lib.<platform>-cpython-3XX`` (the wheel's packages), the CMake install tree
   ``<SRC_DIR>/torch/{lib,include,share,bin}`` and the ``torch-*.dist-info`` metadata;
2. stages ``libtorch`` and ``pytorch`` with the driver's own staging (``recipe/megabuild``), each into a
   prefix of its own, as conda-build gives each output a fresh host prefix;
3. merges the packages into one environment prefix as ``conda install`` would (files and symlinks copied,
   a path two packages both provide is a clobber and an error);
4. reports each package's file count and size as a table.

``python -m feedstock_tools wheel-layout WHEEL`` runs steps 1-4; the test suite goes on to import torch
and build the CMake consumer in the merged prefix.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

from feedstock_tools.errors import ToolError
from feedstock_tools.path_safety import inside
from feedstock_tools.recipe_imports import import_megabuild

_package_files = import_megabuild("package_files")
_staging = import_megabuild("staging")
UpstreamTrees = _staging.UpstreamTrees

# torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl: name, version, python tag, abi tag, platform tag
WHEEL_NAME = re.compile(
    r"^(?P<name>[^-]+)-(?P<version>[^-]+)-cp(?P<py>\d)(?P<minor>\d+)-[^-]+-(?:manylinux_\d+_\d+|linux)_(?P<arch>\w+)\.whl$"
)
WHEEL_METADATA = re.compile(r"^torch-[^/]+\.dist-info/METADATA$")
# The packages the megabuild stages from one pass each; libtorch-cuda-linalg has no file in a CPU wheel.
STAGED_PACKAGES = (_package_files.LIBTORCH, _package_files.PYTORCH)


@dataclass(frozen=True)
class WheelTag:
    version: str
    python: str  # "3.11"
    arch: str  # "x86_64"

    @property
    def setuptools_dir(self) -> str:
        """The name setuptools >= 62.1 gives its build directory for this interpreter."""
        return f"lib.linux-{self.arch}-cpython-{self.python.replace('.', '')}"

    @property
    def site_packages(self) -> str:
        """``$SP_DIR`` relative to ``$PREFIX`` on Linux."""
        return f"lib/python{self.python}/site-packages"


@dataclass(frozen=True)
class PackageSize:
    package: str
    files: int
    links: int
    bytes: int


def parse_wheel_name(wheel: Path) -> WheelTag:
    match = WHEEL_NAME.match(wheel.name)
    if not match:
        raise ToolError(
            f"{wheel.name} is not a Linux CPython wheel name (name-version-cpXY-cpXY-platform.whl): "
            "pass a PyTorch wheel such as torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
        )
    return WheelTag(match["version"], f"{match['py']}.{match['minor']}", match["arch"])


def lay_out_wheel_as_build_tree(wheel: Path, src_dir: Path) -> UpstreamTrees:
    """Extract ``wheel`` into ``src_dir`` shaped like a finished ``setup.py build`` of PyTorch."""
    if not wheel.is_file():
        raise ToolError(f"wheel not found: {wheel} (pip download torch==2.13.0 --no-deps gives it)")
    tag = parse_wheel_name(wheel)
    built = src_dir / "build" / tag.setuptools_dir
    metadata = src_dir / "build" / "metadata"
    if built.exists():
        raise ToolError(f"{built} exists already: lay the wheel out into an empty directory")
    try:
        archive = zipfile.ZipFile(wheel)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ToolError(f"{wheel} is not a readable wheel ({exc}): download it again") from None
    with archive:
        members = archive.infolist()
        names = {member.filename for member in members}
        if "torch/__init__.py" not in names or not any(WHEEL_METADATA.match(name) for name in names):
            raise ToolError(
                f"{wheel.name} holds no torch/__init__.py and torch-*.dist-info: not a PyTorch wheel; pass "
                "one such as torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
            )
        # Every member is checked before anything is written, as pip refuses a wheel with a file "trying to
        # install outside the target directory" (pip 23.2.1 _internal/operations/install/wheel.py,
        # assert_no_path_traversal); zipfile's extractall would silently rename such a member instead.
        targets = {member.filename: inside(built, member.filename, "wheel member") for member in members}
        archive.extractall(built)
        # zipfile drops the permission bits; the wheel records them (torch_shm_manager is executable). Only
        # the permission bits: set-user/group-ID and sticky bits have no business in a package.
        for member in members:
            mode = member.external_attr >> 16 & 0o777
            if mode and not member.is_dir():
                targets[member.filename].chmod(mode)
    metadata.mkdir(parents=True)
    for dist_info in built.glob("*.dist-info"):
        dist_info.rename(metadata / dist_info.name)
    # CMake's install step fills <SRC_DIR>/torch/{lib,include,share,bin}; setup.py copies them into the
    # setuptools tree. Hard links give the same files without doubling 700 MB on disk.
    install = src_dir / "torch"
    for name in _staging.INSTALL_TREE_DIRS:
        if (built / "torch" / name).is_dir():
            shutil.copytree(built / "torch" / name, install / name, copy_function=os.link, symlinks=True)
    return _staging.UpstreamTrees(install=install, setuptools=built, metadata=metadata)


def stage_into_prefixes(trees: UpstreamTrees, tag: WheelTag, work: Path) -> dict[str, Path]:
    """Stage each package into its own fresh prefix, the way conda-build builds one output at a time."""
    prefixes: dict[str, Path] = {}
    for package in STAGED_PACKAGES:
        prefix = work / "packages" / package
        if prefix.exists():
            raise ToolError(f"{prefix} exists already: stage into an empty work directory")
        _staging.stage_package(package, trees, prefix, prefix / tag.site_packages)
        prefixes[package] = prefix
    return prefixes


def merge_prefixes(prefixes: dict[str, Path], environment: Path) -> None:
    """Install the packages into ``environment`` as conda does: every path from exactly one package."""
    owner: dict[Path, str] = {}
    for package, prefix in prefixes.items():
        for source in _staging.entries_below(prefix):
            relative = source.relative_to(prefix)
            if relative in owner:
                raise ToolError(
                    f"{relative} is in both {owner[relative]} and {package}: conda would clobber it"
                )
            owner[relative] = package
            target = environment / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_symlink():
                os.symlink(os.readlink(source), target)
            else:
                shutil.copy2(source, target)


def package_sizes(prefixes: dict[str, Path]) -> list[PackageSize]:
    rows = []
    for package, prefix in prefixes.items():
        entries = list(_staging.entries_below(prefix))
        links = [entry for entry in entries if entry.is_symlink()]
        size = sum(entry.lstat().st_size for entry in entries if not entry.is_symlink())
        rows.append(PackageSize(package, len(entries) - len(links), len(links), size))
    return rows


def not_shipped(trees: UpstreamTrees) -> tuple[int, int]:
    """Count and size of the wheel files the staging table deliberately leaves out (each rule says why)."""
    placements = _staging.files_by_package(trees).get(_package_files.NOT_SHIPPED, [])
    roots = trees.roots()
    size = sum((roots[p.tree] / p.path).lstat().st_size for p in placements)
    return len(placements), size


def format_table(rows: list[PackageSize], dropped: tuple[int, int]) -> str:
    lines = [
        "| package | files | symlinks | size (MB) |",
        "|---|---:|---:|---:|",
        *(f"| {r.package} | {r.files} | {r.links} | {r.bytes / 1e6:.1f} |" for r in rows),
        f"| {_package_files.NOT_SHIPPED} | {dropped[0]} | 0 | {dropped[1] / 1e6:.1f} |",
    ]
    return "\n".join(lines)


def run(wheel: Path, work: Path) -> str:
    if work.exists() and any(work.iterdir()):
        raise ToolError(f"work directory {work} is not empty: pass a new or empty --work directory")
    tag = parse_wheel_name(wheel)
    print(f"laying out {wheel.name} as a build tree under {work / 'src'} ...", flush=True)
    trees = lay_out_wheel_as_build_tree(wheel, work / "src")
    print("staging libtorch and pytorch with recipe/megabuild's staging table ...", flush=True)
    prefixes = stage_into_prefixes(trees, tag, work)
    print(f"merging the packages into {work / 'env'} as conda install would ...", flush=True)
    merge_prefixes(prefixes, work / "env")
    return format_table(package_sizes(prefixes), not_shipped(trees))


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "wheel-layout",
        help="stage a real PyTorch wheel with the recipe's staging table and report the packages",
        description=(
            "Lay a PyTorch wheel out as the megabuild's build tree, stage libtorch and pytorch with "
            "recipe/megabuild into separate prefixes, merge them into WORK/env as conda install would, "
            "and print each package's file count and size."
        ),
    )
    parser.add_argument(
        "wheel", type=Path, help="a Linux CPython PyTorch wheel, e.g. torch-2.13.0+cpu-...whl"
    )
    parser.add_argument("--work", type=Path, required=True, help="new or empty directory for the trees")
    parser.set_defaults(func=lambda args: print(run(args.wheel, args.work)))
