"""Prove the package split on real PyTorch binaries: a release wheel staged the way the megabuild stages.

The megabuild itself cannot run without a PyTorch source tree, but an official wheel holds the very files
the build installs. This tool

1. lays the wheel out as the build tree the driver stages from: the setuptools tree
   ``build/lib.<platform>-cpython-3XX`` (the wheel's packages), the CMake install tree
   ``<SRC_DIR>/torch/{lib,include,share,bin}`` and the ``torch-*.dist-info`` metadata;
2. stages every package the tree has files for (``libtorch``, ``pytorch`` and, from a CUDA wheel,
   ``libtorch-cuda-linalg``) with the driver's own staging (``recipe/megabuild``), each into a prefix of
   its own, as conda-build gives each output a fresh host prefix;
3. merges the packages into one environment prefix as ``conda install`` would (files and symlinks copied,
   a path two packages both provide is a clobber and an error);
4. reports each package's file count and size as a table.

``python -m feedstock_tools wheel-layout WHEEL`` runs steps 1-4; the test suite goes on to import torch
and build the CMake consumer in the merged prefix; ``gpu-check``
(``feedstock_tools/proofs/gpu_check.py``) uses the same steps on a CUDA torch. A file the staging
table does not place (a ``StagingError`` of the driver) is a one-line error, and the work directory is
left as it was.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import os
import re
import shutil
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.path_safety import inside
from feedstock_tools.common.recipe_imports import import_megabuild

_package_files = import_megabuild("package_files")
_staging = import_megabuild("staging")
_megabuild_errors = import_megabuild("errors")
UpstreamTrees = _staging.UpstreamTrees

# torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl: name, version, python tag, abi tag, platform tag
WHEEL_NAME = re.compile(
    r"^(?P<name>[^-]+)-(?P<version>[^-]+)-cp(?P<py>\d)(?P<minor>\d+)-[^-]+-(?:manylinux_\d+_\d+|linux)_(?P<arch>\w+)\.whl$"
)
WHEEL_METADATA = re.compile(r"^torch-[^/]+\.dist-info/METADATA$")


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


@dataclass(frozen=True)
class ListedFile:
    """One file of a wheel's zip directory: what a file list fixture keeps of a wheel too big for CI."""

    mode: int
    size: int
    path: str


def wheel_files(wheel: Path) -> list[ListedFile]:
    with zipfile.ZipFile(wheel) as archive:
        return [
            ListedFile(member.external_attr >> 16 & 0o7777, member.file_size, member.filename)
            for member in archive.infolist()
            if not member.is_dir()
        ]


def write_file_list(wheel: Path, destination: Path, provenance: str) -> int:
    """Write ``wheel``'s files (mode, size, path; tab-separated, gzipped when the name ends in .gz)."""
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    files = wheel_files(wheel)
    lines = [
        f"# Every file of {wheel.name}, sha256 {digest}: mode (octal), size (bytes), path.",
        f"# {provenance}",
        "# Written by: python -m feedstock_tools wheel-layout WHEEL --file-list THIS_FILE --provenance TEXT",
        *(f"{f.mode:o}\t{f.size}\t{f.path}" for f in files),
    ]
    data = ("\n".join(lines) + "\n").encode()
    if destination.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    destination.write_bytes(data)
    return len(files)


def read_file_list(path: Path) -> list[ListedFile]:
    data = path.read_bytes()
    text = (gzip.decompress(data) if path.suffix == ".gz" else data).decode()
    files = []
    for line in text.splitlines():
        if line and not line.startswith("#"):
            mode, size, name = line.split("\t", 2)
            files.append(ListedFile(int(mode, 8), int(size), name))
    return files


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
    built = _empty_setuptools_dir(src_dir, tag)
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
    return _finish_build_tree(built, src_dir)


def lay_out_installed_torch(site_packages: Path, tag: WheelTag, src_dir: Path) -> UpstreamTrees:
    """Copy an installed torch (``torch``, ``torchgen``, ``functorch``, ``torch-*.dist-info`` of
    ``site_packages``) into ``src_dir`` shaped like a finished ``setup.py build``, as a wheel would be.

    For machines where no wheel can be downloaded but a pip-installed torch is at hand. ``__pycache__``
    directories are left out: Python wrote them after installing, no build installs them.
    """
    if not (site_packages / "torch" / "__init__.py").is_file():
        raise ToolError(f"no torch package in {site_packages}: pass the site-packages of an installed torch")
    built = _empty_setuptools_dir(src_dir, tag)
    ignore = shutil.ignore_patterns("__pycache__")
    for name in (
        "torch",
        "torchgen",
        "functorch",
        *(d.name for d in site_packages.glob("torch-*.dist-info")),
    ):
        if (site_packages / name).is_dir():
            shutil.copytree(site_packages / name, built / name, symlinks=True, ignore=ignore)
    return _finish_build_tree(built, src_dir)


def _empty_setuptools_dir(src_dir: Path, tag: WheelTag) -> Path:
    built = src_dir / "build" / tag.setuptools_dir
    if built.exists():
        raise ToolError(f"{built} exists already: lay torch out into an empty directory")
    return built


def _finish_build_tree(built: Path, src_dir: Path) -> UpstreamTrees:
    """Move the dist-info aside and give the setuptools tree its CMake install tree, as the build has."""
    metadata = src_dir / "build" / "metadata"
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


def packages_with_files(trees: UpstreamTrees) -> list[str]:
    """The packages the trees have files for, in the table's order (a CPU build has no linalg library)."""
    grouped = _staging.files_by_package(trees)
    return [package for package in _package_files.PACKAGES if grouped[package]]


def stage_into_prefixes(trees: UpstreamTrees, tag: WheelTag, work: Path) -> dict[str, Path]:
    """Stage each package into its own fresh prefix, the way conda-build builds one output at a time."""
    prefixes: dict[str, Path] = {}
    for package in packages_with_files(trees):
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
    with staging_errors_as_tool_errors(work):
        print(f"laying out {wheel.name} as a build tree under {work / 'src'} ...", flush=True)
        trees = lay_out_wheel_as_build_tree(wheel, work / "src")
        packages = packages_with_files(trees)
        print(f"staging {', '.join(packages)} with recipe/megabuild's staging table ...", flush=True)
        prefixes = stage_into_prefixes(trees, tag, work)
        print(f"merging the packages into {work / 'env'} as conda install would ...", flush=True)
        merge_prefixes(prefixes, work / "env")
    return format_table(package_sizes(prefixes), not_shipped(trees))


@contextlib.contextmanager
def staging_errors_as_tool_errors(work: Path) -> Iterator[None]:
    """A failed layout leaves ``work`` as empty as it was, and the driver's one-line error is the tool's."""
    existed = work.exists()
    try:
        yield
    except BaseException as exc:
        for name in ("src", "packages", "env"):
            shutil.rmtree(work / name, ignore_errors=True)
        if not existed:
            shutil.rmtree(work, ignore_errors=True)
        if isinstance(exc, _megabuild_errors.MegabuildError):
            raise ToolError(str(exc)) from None
        raise


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "wheel-layout",
        help="stage a real PyTorch wheel with the recipe's staging table and report the packages",
        description=(
            "Lay a PyTorch wheel out as the megabuild's build tree, stage its packages (libtorch, pytorch "
            "and, from a CUDA wheel, libtorch-cuda-linalg) with recipe/megabuild into separate prefixes, "
            "merge them into WORK/env as conda install would, and print each package's file count and size."
        ),
    )
    parser.add_argument(
        "wheel", type=Path, help="a Linux CPython PyTorch wheel, e.g. torch-2.13.0+cpu-...whl"
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--work", type=Path, help="new or empty directory for the trees")
    action.add_argument(
        "--file-list",
        type=Path,
        metavar="OUT",
        help="instead: write the wheel's file list (mode, size, path) to OUT (.gz: gzipped), a small "
        "test fixture of a wheel too big for CI",
    )
    parser.add_argument(
        "--provenance", default="", help="with --file-list: where the wheel came from (a comment line)"
    )
    parser.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> None:
    if args.file_list is not None:
        count = write_file_list(args.wheel, args.file_list, args.provenance)
        print(f"wrote the {count} files of {args.wheel.name} to {args.file_list}")
    else:
        print(run(args.wheel, args.work))
