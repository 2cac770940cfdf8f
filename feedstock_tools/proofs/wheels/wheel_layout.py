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

5. checks the packages' linkage (:mod:`feedstock_tools.proofs.wheels.linkage`): every library each staged
   binary loads resolves to its own package, a package it depends on, a run requirement of the recipe's output
   for the wheel's configuration (``.ci_support``), the platform's system set, or a staging-table decision
   about a library the wheel bundles; otherwise one error line, and the work directory is left as it was.

Every target's wheel works: ``manylinux_*``/``linux_*`` (``.so``), ``macosx_*`` (``.dylib``) and
``win_*`` (``.dll``; staged once the staging table knows Windows). ``--file-list`` and ``--needs-list``
cut the small CI fixtures (file list; each binary's needed libraries) from a wheel.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import os
import re
import shutil
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from feedstock_tools.common import config_selector, inputs
from feedstock_tools.common.configuration import Configuration, read_configuration
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.feedstock import Feedstock
from feedstock_tools.common.path_safety import inside
from feedstock_tools.common.recipe_imports import RECIPE_DIR, REPO_ROOT
from feedstock_tools.proofs.wheels import linkage
from feedstock_tools.proofs.wheels.runtime_libraries import SHLIB_EXT
from megabuild import atomic_file, package_files, staging
from megabuild import errors as _megabuild_errors

UpstreamTrees = staging.UpstreamTrees
CI_SUPPORT = Feedstock(REPO_ROOT).ci_support

# torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl: name, version, python tag, abi tag, platform tag
# (manylinux_2_28_aarch64, linux_x86_64, macosx_14_0_arm64, win_amd64)
WHEEL_NAME = re.compile(
    r"^(?P<name>[^-]+)-(?P<version>[^-]+)-cp(?P<py>\d)(?P<minor>\d+)-[^-]+-"
    r"(?:(?:manylinux_\d+_\d+|linux)_(?P<linux>\w+)|macosx_(?P<macos>\d+_\d+)_(?P<mac>\w+)|win_(?P<win>\w+))\.whl$"
)
WHEEL_METADATA = re.compile(r"^torch-[^/]+\.dist-info/METADATA$")
# torch/version.py of a CUDA wheel: cuda: Optional[str] = '13.0'
WHEEL_CUDA = re.compile(r"^cuda(?:: [^=]+)? = '(?P<version>[\d.]+)'$", re.MULTILINE)
# conda's subdir per (platform, wheel architecture)
SUBDIRS = {
    ("linux", "x86_64"): "linux-64",
    ("linux", "aarch64"): "linux-aarch64",
    ("osx", "arm64"): "osx-arm64",
    ("osx", "x86_64"): "osx-64",
    ("win", "amd64"): "win-64",
}


@dataclass(frozen=True)
class WheelTag:
    version: str
    python: str  # "3.11"
    arch: str  # "x86_64", "aarch64", "arm64", "amd64"
    platform: linkage.Platform = "linux"
    macos: str = ""  # the wheel's minimum macOS, "14.0"

    @property
    def setuptools_dir(self) -> str:
        """The name setuptools >= 62.1 gives its build directory for this interpreter (``sysconfig``'s
        platform: ``linux-x86_64``, ``macosx-14.0-arm64``, ``win-amd64``)."""
        platform = {"linux": f"linux-{self.arch}", "osx": f"macosx-{self.macos}-{self.arch}"}.get(
            self.platform, f"win-{self.arch}"
        )
        return f"lib.{platform}-cpython-{self.python.replace('.', '')}"

    @property
    def site_packages(self) -> str:
        """``$SP_DIR`` relative to ``$PREFIX`` (``Lib/site-packages`` on Windows)."""
        return "Lib/site-packages" if self.platform == "win" else f"lib/python{self.python}/site-packages"

    @property
    def shlib_ext(self) -> str:
        return SHLIB_EXT[self.platform]

    @property
    def subdir(self) -> str:
        return SUBDIRS.get((self.platform, self.arch), f"{self.platform}-{self.arch}")


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
    atomic_file.write_bytes(destination, data)
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
            f"{wheel.name} is not a CPython wheel name for linux, macOS or Windows "
            "(name-version-cpXY-cpXY-platform.whl): pass a PyTorch wheel such as "
            "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
        )
    python = f"{match['py']}.{match['minor']}"
    if match["linux"]:
        return WheelTag(match["version"], python, match["linux"])
    if match["mac"]:
        return WheelTag(match["version"], python, match["mac"], "osx", match["macos"].replace("_", "."))
    return WheelTag(match["version"], python, match["win"], "win")


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
    return _finish_build_tree(built, src_dir, tag.shlib_ext)


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
    return _finish_build_tree(built, src_dir, tag.shlib_ext)


def _empty_setuptools_dir(src_dir: Path, tag: WheelTag) -> Path:
    built = src_dir / "build" / tag.setuptools_dir
    if built.exists():
        raise ToolError(f"{built} exists already: lay torch out into an empty directory")
    return built


def _finish_build_tree(built: Path, src_dir: Path, shlib_ext: str) -> UpstreamTrees:
    """Move the dist-info aside and give the setuptools tree its CMake install tree, as the build has."""
    metadata = src_dir / "build" / "metadata"
    metadata.mkdir(parents=True)
    for dist_info in built.glob("*.dist-info"):
        dist_info.rename(metadata / dist_info.name)
    # CMake's install step fills <SRC_DIR>/torch/{lib,include,share,bin}; setup.py copies them into the
    # setuptools tree. Hard links give the same files without doubling 700 MB on disk.
    install = src_dir / "torch"
    for name in staging.INSTALL_TREE_DIRS:
        if (built / "torch" / name).is_dir():
            shutil.copytree(built / "torch" / name, install / name, copy_function=os.link, symlinks=True)
    return staging.UpstreamTrees(install=install, setuptools=built, metadata=metadata, shlib_ext=shlib_ext)


def packages_with_files(trees: UpstreamTrees) -> list[str]:
    """The packages the trees have files for, in the table's order (a CPU build has no linalg library)."""
    grouped = staging.files_by_package(trees)
    return [package for package in package_files.PACKAGES if grouped[package]]


def stage_into_prefixes(trees: UpstreamTrees, tag: WheelTag, work: Path) -> dict[str, Path]:
    """Stage each package into its own fresh prefix, the way conda-build builds one output at a time."""
    prefixes: dict[str, Path] = {}
    for package in packages_with_files(trees):
        prefix = work / "packages" / package
        if prefix.exists():
            raise ToolError(f"{prefix} exists already: stage into an empty work directory")
        staging.stage_package(package, trees, prefix, prefix / tag.site_packages)
        prefixes[package] = prefix
    return prefixes


def merge_prefixes(prefixes: dict[str, Path], environment: Path) -> None:
    """Install the packages into ``environment`` as conda does: every path from exactly one package."""
    owner: dict[Path, str] = {}
    for package, prefix in prefixes.items():
        for source in staging.entries_below(prefix):
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
                continue
            try:  # hard links where it can, as conda links a package's files (conda 26.7.1 core/link.py:100)
                os.link(source, target)
            except OSError:
                shutil.copy2(source, target)


def package_sizes(prefixes: dict[str, Path]) -> list[PackageSize]:
    rows = []
    for package, prefix in prefixes.items():
        entries = list(staging.entries_below(prefix))
        links = [entry for entry in entries if entry.is_symlink()]
        size = sum(entry.lstat().st_size for entry in entries if not entry.is_symlink())
        rows.append(PackageSize(package, len(entries) - len(links), len(links), size))
    return rows


def not_shipped(trees: UpstreamTrees) -> tuple[int, int]:
    """Count and size of the wheel files the staging table deliberately leaves out (each rule says why)."""
    placements = staging.files_by_package(trees).get(package_files.NOT_SHIPPED, [])
    roots = trees.roots()
    size = sum((roots[p.tree] / p.path).lstat().st_size for p in placements)
    return len(placements), size


def format_table(rows: list[PackageSize], dropped: tuple[int, int]) -> str:
    lines = [
        "| package | files | symlinks | size (MB) |",
        "|---|---:|---:|---:|",
        *(f"| {r.package} | {r.files} | {r.links} | {r.bytes / 1e6:.1f} |" for r in rows),
        f"| {package_files.NOT_SHIPPED} | {dropped[0]} | 0 | {dropped[1] / 1e6:.1f} |",
    ]
    return "\n".join(lines)


def wheel_cuda_version(wheel: Path) -> str:
    """The CUDA version the wheel was built for (its ``torch/version.py``), ``"None"`` for a CPU wheel."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            text = archive.read("torch/version.py").decode()
    except (KeyError, zipfile.BadZipFile, OSError):
        return "None"
    match = WHEEL_CUDA.search(text)
    return match["version"] if match else "None"


def find_config(wheel: Path, tag: WheelTag) -> Configuration:
    """The ``.ci_support`` configuration of the wheel's target: its subdir and CUDA version, chosen as
    ``--platform``/``--cuda``/``--blas`` choose, cut to generic BLAS where it builds that (win-64 builds MKL
    only)."""
    cuda = wheel_cuda_version(wheel)
    fields = {"platform": tag.subdir, "cuda": "cpu" if cuda == "None" else cuda}
    preferred = [
        config_selector.ConfigFilter(**fields, blas="generic"),
        config_selector.ConfigFilter(**fields),
    ]
    config = config_selector.resolve_by_fields(
        CI_SUPPORT, preferred, "--config (the one to check the linkage against)"
    )
    return config.for_blas("generic") if "generic" in config.blases else config


def run(
    wheel: Path,
    work: Path,
    config: Configuration | None = None,
    reader: linkage.BinaryReader = linkage.read_binary,
) -> str:
    """Lay out, stage, merge and check ``wheel``; the report (tables and linkage summary) as text.

    ``config``: the ``.ci_support`` configuration whose rendered recipe gives each package's run
    requirements (default: :func:`find_config`); ``reader``: how a staged file's needs are read (lief)."""
    if work.exists() and any(work.iterdir()):
        raise ToolError(f"work directory {work} is not empty: pass a new or empty --work directory")
    started = time.monotonic()
    tag = parse_wheel_name(wheel)
    config = config if config is not None else find_config(wheel, tag)
    with staging_errors_as_tool_errors(work):
        print(f"laying out {wheel.name} as a build tree under {work / 'src'} ...", flush=True)
        trees = lay_out_wheel_as_build_tree(wheel, work / "src")
        packages = packages_with_files(trees)
        print(f"staging {', '.join(packages)} with recipe/megabuild's staging table ...", flush=True)
        prefixes = stage_into_prefixes(trees, tag, work)
        print(f"merging the packages into {work / 'env'} as conda install would ...", flush=True)
        merge_prefixes(prefixes, work / "env")
        recipe_for = config.path.name
        print(f"checking the linkage of every binary against the recipe for {recipe_for} ...", flush=True)
        specs = linkage.recipe_packages(RECIPE_DIR, config, prefixes, tag.python, tag.platform)
        report = linkage.LinkageCheck(specs, tag.platform, wheel=True, reader=reader).run()
        report.raise_for_errors()
    return "\n\n".join(
        [
            format_table(package_sizes(prefixes), not_shipped(trees)),
            format_decisions(trees),
            linkage.format_report(report),
            f"{wheel.name}: done in {time.monotonic() - started:.0f} s",
        ]
    )


def format_decisions(trees: UpstreamTrees) -> str:
    """The bundled third-party files of this wheel, grouped by the staging table's decision about them."""
    grouped: dict[str, list[str]] = {}
    decisions = {}
    for placement in staging.files_by_package(trees)[package_files.NOT_SHIPPED]:
        bundled = placement.rule.bundled
        if bundled is not None and placement.tree == "install":
            grouped.setdefault(bundled.library, []).append(placement.path)
            decisions[bundled.library] = bundled
    lines = ["| bundled in the wheel | files | conda build | conda-forge package |", "|---|---:|---|---|"]
    for library, paths in grouped.items():
        bundled = decisions[library]
        lines.append(f"| {library} | {len(paths)} | {bundled.decision} | {bundled.conda_package or '-'} |")
    return "\n".join(lines) if grouped else "no bundled third-party library"


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
        if isinstance(exc, _megabuild_errors.MegabuildError):  # (an interruption is not one)
            raise ToolError(str(exc)) from None
        raise


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "wheel-layout",
        help="stage a real PyTorch wheel with the recipe's staging table, check its linkage, report",
        description=(
            "Lay a PyTorch wheel out as the megabuild's build tree, stage its packages (libtorch, pytorch "
            "and, from a CUDA wheel, libtorch-cuda-linalg) with recipe/megabuild into separate prefixes, "
            "merge them into WORK/env as conda install would, check that every library each binary loads "
            "is in its package, a package it depends on, a run requirement of the recipe or the system "
            "(lief), and print each package's file count and size and each bundled library's decision."
        ),
    )
    parser.add_argument(
        "wheel",
        type=Path,
        help="a CPython PyTorch wheel of linux, macOS or Windows, e.g. torch-2.13.0-cp312-cp312-"
        "macosx_14_0_arm64.whl",
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
    action.add_argument(
        "--needs-list",
        type=Path,
        metavar="OUT",
        help="instead: write each binary's needed libraries and search paths (lief, read from the zip) to "
        "OUT (.gz: gzipped), the linkage check's test fixture",
    )
    parser.add_argument(
        "--config",
        type=Path,
        help="with --work: the configuration (name, unique part, glob or .yaml path) whose recipe outputs "
        "the linkage is checked against "
        "(default: the one of the wheel's platform and CUDA version with generic BLAS)",
    )
    parser.add_argument(
        "--provenance",
        default="",
        help="with --file-list/--needs-list: where the wheel came from (a comment line)",
    )
    parser.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> None:
    wanted = "a PyTorch wheel (.whl; 'pip download torch==2.13.0 --no-deps' gives one)"
    inputs.input_file(args.wheel, "wheel", wanted, (".whl",))
    lists = args.file_list if args.file_list is not None else args.needs_list
    if args.provenance and lists is None:
        raise ToolError("--provenance describes a --file-list or --needs-list; give one with it, or neither")
    if args.config is not None and args.work is None:
        raise ToolError("--config chooses the recipe the layout under --work is checked against; give --work")
    if args.file_list is not None:
        inputs.output_file(args.file_list, "--file-list")
    elif args.needs_list is not None:
        inputs.output_file(args.needs_list, "--needs-list")
    else:
        inputs.work_dir(args.work, "--work")
        if args.config is not None:  # the one configuration selector: a name, a part, a glob, a path
            args.config = read_configuration(
                config_selector.resolve_one(str(args.config), CI_SUPPORT, outside=True)
            )
    if args.file_list is not None:
        count = write_file_list(args.wheel, args.file_list, args.provenance)
        print(f"wrote the {count} files of {args.wheel.name} to {args.file_list}")
    elif args.needs_list is not None:
        digest = hashlib.sha256(args.wheel.read_bytes()).hexdigest()
        header = f"The binaries of {args.wheel.name}, sha256 {digest}. {args.provenance}".strip()
        count = linkage.write_needs_list(linkage.wheel_needs(args.wheel), args.needs_list, header)
        print(f"wrote the needs of the {count} binaries of {args.wheel.name} to {args.needs_list}")
    else:
        print(run(args.wheel, args.work, args.config))
