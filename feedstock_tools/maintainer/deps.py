"""``deps``: the dependency-version table (Package | Upstream | Recipe | Conda-forge | Source).

For every dependency the feedstock tracks, the version upstream PyTorch uses (from its source tree or
a built wheel), the recipe's pin, conda-forge's global pin, and where upstream sets it. Rows where the
version conda would install disagrees with upstream are flagged. Every input is optional: a missing or
unreadable one leaves its column empty and adds a note.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from feedstock_tools.common import inputs
from feedstock_tools.common.configuration import CUDA_KEY, NO_CUDA, cuda_versions
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.conda.pinning import add_pinning_argument, locate_pinning
from feedstock_tools.conda.recipe_files import check_recipe
from feedstock_tools.conda.selectors import KNOWN_SUBDIRS
from feedstock_tools.maintainer.conda_pins import (
    PinReadError,
    conda_forge_pins,
    read_variant_file,
    recipe_pins,
)
from feedstock_tools.maintainer.source_tree import CorruptArchive, SourceTree, open_tree
from feedstock_tools.maintainer.upstream_versions import (
    REQUIREMENT_FILES,
    FileVersion,
    WheelMetadata,
    read_wheel,
    submodules,
    tree_requirement,
)
from feedstock_tools.maintainer.version_compare import values_agree
from megabuild import atomic_file

DEFAULT_RECIPE = REPO_ROOT / "recipe"


@dataclass(frozen=True)
class Dependency:
    """One row of the table and where to look for each of its columns."""

    name: str
    conda_names: tuple[str, ...]  # requirement names in meta.yaml
    pinning_keys: tuple[str, ...]  # variant keys in conda_build_config.yaml files
    python_name: str | None = None  # PyPI name, looked up in wheel METADATA and requirement files
    upstream_files: tuple[FileVersion, ...] = ()  # tried in order, before the requirement files
    wheel_first: bool = True  # whether a wheel's declaration outranks the tree's files
    wheel_names: tuple[str, ...] = ()  # other PyPI names a CUDA wheel requires it under (nvidia-*-cu13 ...)


_CI = ".ci/docker"
_SUBMODULE = "third_party"

# The data of this tool: which dependencies, their conda names, and where upstream records them
# (CI install scripts and pin files, vendored submodules' own version files).
DEPENDENCIES: tuple[Dependency, ...] = (
    Dependency(
        "cuda",
        ("cuda-version",),
        ("cuda_compiler_version",),
        upstream_files=(
            FileVersion(
                f"{_CI}/common/install_cuda.sh", r"install_cuda\s+(\d+\.\d+(?:\.\d+)?)\s", every=True
            ),
        ),
        wheel_first=False,
        wheel_names=("cuda-toolkit", "nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12"),
    ),
    Dependency(
        "cudnn",
        ("libcudnn-dev", "cudnn"),
        ("libcudnn_dev", "cudnn"),
        upstream_files=(FileVersion(f"{_CI}/common/install_cuda.sh", r"CUDNN_VERSION=([\d.]+)", every=True),),
        wheel_first=False,
        wheel_names=("nvidia-cudnn-cu13", "nvidia-cudnn-cu12"),
    ),
    Dependency(
        "magma",
        ("libmagma-devel", "libmagma", "magma"),
        ("libmagma_devel", "libmagma", "magma"),
        upstream_files=(
            FileVersion(f"{_CI}/common/install_magma.sh", r"MAGMA_VERSION=[\"']?([\d.]+)"),
            FileVersion(f"{_CI}/common/install_magma_conda.sh", r"MAGMA_VERSION=[\"']?([\d.]+)"),
        ),
    ),
    Dependency(
        "libabseil",
        ("libabseil",),
        ("libabseil",),
        upstream_files=(
            FileVersion(f"{_SUBMODULE}/abseil-cpp/CMakeLists.txt", r"project\(absl[^)]*?VERSION\s+(\d+)"),
            FileVersion(f"{_SUBMODULE}/**/abseil-cpp/CMakeLists.txt", r"project\(absl[^)]*?VERSION\s+(\d+)"),
        ),
    ),
    Dependency(
        "libuv",
        ("libuv",),
        ("libuv",),
        upstream_files=(
            FileVersion(
                f"{_SUBMODULE}/tensorpipe/third_party/libuv/include/uv/version.h",
                r"UV_VERSION_MAJOR\s+(\d+).*?UV_VERSION_MINOR\s+(\d+).*?UV_VERSION_PATCH\s+(\d+)",
            ),
        ),
    ),
    Dependency(
        "mkl",
        ("mkl-devel", "mkl"),
        ("mkl_devel", "mkl"),
        upstream_files=(FileVersion(f"{_CI}/common/install_mkl.sh", r"MKL_VERSION=[\"']?([\d.]+)"),),
    ),
    Dependency(
        "nccl",
        ("nccl",),
        ("nccl",),
        upstream_files=(
            FileVersion(f"{_CI}/ci_commit_pins/nccl.txt", r"^v?(\d+)\.(\d+)\.(\d+)"),
            FileVersion(f"{_CI}/ci_commit_pins/nccl-cu1*.txt", r"^v?(\d+)\.(\d+)\.(\d+)"),
            FileVersion(
                f"{_SUBMODULE}/nccl/nccl/makefiles/version.mk",
                r"NCCL_MAJOR\s*:=\s*(\d+).*?NCCL_MINOR\s*:=\s*(\d+).*?NCCL_PATCH\s*:=\s*(\d+)",
            ),
        ),
        wheel_first=False,
        wheel_names=("nvidia-nccl-cu13", "nvidia-nccl-cu12"),
    ),
    Dependency(
        "protobuf",
        ("libprotobuf",),
        ("libprotobuf",),
        upstream_files=(
            FileVersion(f"{_SUBMODULE}/protobuf/version.json", r"\"protobuf_version\"\s*:\s*\"([\d.]+)\""),
            FileVersion(f"{_CI}/common/install_protobuf.sh", r"protobuf-all-([\d.]+)\.tar"),
        ),
    ),
    Dependency(
        "sleef",
        ("sleef",),
        ("sleef",),
        upstream_files=(
            FileVersion(
                f"{_SUBMODULE}/sleef/CMakeLists.txt",
                r"SLEEF_VERSION_MAJOR\s+(\d+)\).*?SLEEF_VERSION_MINOR\s+(\d+)\).*?SLEEF_VERSION_PATCHLEVEL\s+(\d+)\)",
            ),
        ),
    ),
    Dependency(
        "fmt",
        ("fmt",),
        ("fmt",),
        upstream_files=(
            FileVersion(f"{_SUBMODULE}/fmt/include/fmt/base.h", r"#define FMT_VERSION (\d+)", packed=True),
            FileVersion(f"{_SUBMODULE}/fmt/include/fmt/core.h", r"#define FMT_VERSION (\d+)", packed=True),
        ),
    ),
    Dependency(
        "pybind11",
        ("pybind11",),
        ("pybind11",),
        upstream_files=(
            FileVersion(
                f"{_SUBMODULE}/pybind11/include/pybind11/detail/common.h",
                r"PYBIND11_VERSION_MAJOR\s+(\d+).*?PYBIND11_VERSION_MINOR\s+(\d+).*?PYBIND11_VERSION_PATCH\s+(\w+)",
            ),
        ),
    ),
    Dependency(
        "eigen",
        ("eigen",),
        ("eigen",),
        upstream_files=(
            FileVersion(
                f"{_SUBMODULE}/eigen/Eigen/src/Core/util/Macros.h",
                r"EIGEN_WORLD_VERSION\s+(\d+).*?EIGEN_MAJOR_VERSION\s+(\d+).*?EIGEN_MINOR_VERSION\s+(\d+)",
            ),
        ),
    ),
    Dependency(
        "onednn",
        ("onednn",),
        ("onednn",),
        upstream_files=(
            FileVersion(
                f"{_SUBMODULE}/ideep/mkl-dnn/CMakeLists.txt", r"project\([^)]*?VERSION\s+\"?([\d.]+)"
            ),
        ),
    ),
    Dependency("filelock", ("filelock",), ("filelock",), "filelock"),
    Dependency("fsspec", ("fsspec",), ("fsspec",), "fsspec"),
    Dependency("jinja2", ("jinja2",), ("jinja2",), "jinja2"),
    Dependency("networkx", ("networkx",), ("networkx",), "networkx"),
    Dependency("numpy", ("numpy",), ("numpy",), "numpy"),
    Dependency("pyyaml", ("pyyaml",), ("pyyaml",), "pyyaml"),
    Dependency("requests", ("requests",), ("requests",), "requests"),
    Dependency("setuptools", ("setuptools",), ("setuptools",), "setuptools"),
    Dependency("six", ("six",), ("six",), "six"),
    Dependency("sympy", ("sympy",), ("sympy",), "sympy"),
    Dependency(
        "typing-extensions",
        ("typing_extensions", "typing-extensions"),
        ("typing_extensions",),
        "typing-extensions",
    ),
    Dependency(
        "triton",
        ("triton",),
        ("triton",),
        "triton",
        upstream_files=(FileVersion(f"{_CI}/triton_version.txt", r"^([\d.]+)"),),
    ),
)


@dataclass
class Row:
    package: str
    upstream: list[str] = field(default_factory=list)
    recipe: list[str] = field(default_factory=list)
    conda_forge: list[str] = field(default_factory=list)
    source: str = ""
    mismatch: bool = False
    reason: str = ""


@dataclass
class Table:
    rows: list[Row]
    notes: list[str]
    inputs: dict[str, str]


def _upstream(
    dependency: Dependency, tree: SourceTree | None, wheel: WheelMetadata | None
) -> tuple[list[str], str]:
    def from_wheel() -> tuple[list[str], str] | None:
        if wheel is None:
            return None
        if dependency.python_name and dependency.python_name in wheel.requires:
            return [wheel.requires[dependency.python_name]], "wheel METADATA Requires-Dist"
        for name in dependency.wheel_names:
            if name in wheel.requires:
                return [wheel.requires[name]], f"wheel METADATA Requires-Dist ({name})"
        if dependency.name == "cuda" and wheel.cuda:
            return [wheel.cuda], "wheel torch/version.py"
        return None

    def from_tree() -> tuple[list[str], str] | None:
        if tree is None:
            return None
        for locator in dependency.upstream_files:
            found = locator.find(tree)
            if found:
                return found
        if dependency.python_name:
            return tree_requirement(tree, dependency.python_name)
        return None

    order = (from_wheel, from_tree) if dependency.wheel_first else (from_tree, from_wheel)
    for lookup in order:
        found = lookup()
        if found:
            return found
    return [], ""


def _submodule_of(path: str, modules: dict[str, str]) -> str | None:
    """The submodule (from .gitmodules) a tree path lies in, the innermost one."""
    owners = [module for module in modules if path == module or path.startswith(f"{module}/")]
    return max(owners, key=len) if owners else None


def _with_submodule(source: str, modules: dict[str, str]) -> str:
    module = _submodule_of(source, modules)
    return f"{source} (submodule {modules[module]})" if module else source


def _unchecked_submodules(dependency: Dependency, tree: SourceTree, modules: dict[str, str]) -> list[str]:
    """Submodules ``dependency``'s version files live in that the tree lists but does not contain."""
    missing = []
    for locator in dependency.upstream_files:
        module = _submodule_of(locator.path, modules)
        if module and not tree.glob(f"{module}/*") and module not in missing:
            missing.append(module)
    return missing


def _first_present(pins: dict[str, list[str]] | dict[str, set[str]], keys: tuple[str, ...]) -> list[str]:
    for key in keys:
        if key in pins:
            return sorted(value for value in pins[key] if value != "None") or ["*"]
    return []


# Variants the recipe is rendered under, so lines behind CUDA, BLAS and MAGMA selectors are all seen.
RENDER_VARIANTS: tuple[dict[str, Any], ...] = (
    {"blas_impl": "mkl", "magma_variant": "magma"},
    {"blas_impl": "generic", "magma_variant": "nomagma"},
)


def _read_from_tarball(path: str) -> bool:
    """Whether the table may read this file of a release tarball (its version files and requirement lists)."""
    patterns = [locator.path for dependency in DEPENDENCIES for locator in dependency.upstream_files]
    return any(fnmatch.fnmatch(path, pattern) for pattern in [*patterns, *REQUIREMENT_FILES, ".gitmodules"])


def _load_upstream(
    upstream: Path | None, wheel: Path | None, notes: list[str]
) -> tuple[SourceTree | None, WheelMetadata | None]:
    tree = None
    if upstream is None:
        notes.append("no upstream source tree given (--upstream): upstream values from the wheel only")
    else:
        try:
            tree = open_tree(upstream, wanted=_read_from_tarball)
        except CorruptArchive as exc:  # a broken download: a table from it would be silently incomplete
            raise ToolError(str(exc)) from None
        except (ValueError, OSError) as exc:  # given, so meant: never a table without it and exit 0
            raise ToolError(
                f"--upstream {upstream}: unreadable ({exc}); give a PyTorch source tree or release tarball"
            ) from None
    wheel_metadata = None
    if wheel is None:
        notes.append("no wheel given (--wheel): Python requirements from the source tree only")
    else:
        try:
            wheel_metadata = read_wheel(wheel)
        except (ValueError, OSError, UnicodeDecodeError, zipfile.BadZipFile) as exc:
            raise ToolError(
                f"--wheel {wheel}: unreadable ({exc}); give a torch wheel or its METADATA"
            ) from None
    return tree, wheel_metadata


def _load_pinning(pinning: Path | None, subdir: str, notes: list[str]) -> dict[str, list[str]]:
    """The pinning's values; the command always has one (conda/pinning.py stops it otherwise), a caller of
    :func:`build_table` may pass None for a table without the column."""
    if pinning is None or not pinning.is_dir():
        notes.append(f"conda-forge pinning not found at {pinning}: Conda-forge column empty")
        return {}
    try:
        return conda_forge_pins(pinning, subdir)
    except PinReadError as exc:
        raise ToolError(
            f"conda-forge pinning unreadable ({exc}); give a complete conda-forge-pinning"
        ) from None


def _load_recipe(
    recipe: Path | None, subdir: str, cf_pins: dict[str, list[str]], notes: list[str]
) -> tuple[dict[str, set[str]], dict[str, list[str]]]:
    """The recipe's requirement specs by conda name, and its conda_build_config.yaml values."""
    if recipe is None or not (recipe / "meta.yaml").is_file():
        notes.append(f"no meta.yaml in {recipe}: Recipe column empty")
        return {}, {}
    check_recipe(recipe, known=cf_pins)  # a broken recipe file stops deps as it stops every command
    try:
        variant_pins = {}
        if (recipe / "conda_build_config.yaml").is_file():
            variant_pins = read_variant_file(recipe / "conda_build_config.yaml", subdir)
        merged = {**cf_pins, **variant_pins}
        base = {key: values[0] for key, values in merged.items() if values}
        platform = {"target_platform": subdir, "build_platform": subdir}
        cudas = cuda_versions(merged) or [NO_CUDA]
        # Every CUDA version with the first render variant (CUDA + MKL), then the CPU ones.
        variants = [{**base, **platform, CUDA_KEY: c, **RENDER_VARIANTS[0]} for c in cudas]
        variants += [{**base, **platform, CUDA_KEY: NO_CUDA, **v} for v in RENDER_VARIANTS[1:]]
        return recipe_pins(recipe, subdir, variants), variant_pins
    except PinReadError as exc:
        raise ToolError(f"recipe unreadable ({exc}); fix it or give another --recipe") from None


def _compare(
    upstream_values: list[str], recipe_values: list[str], cf_values: list[str], required_by_wheel: bool
) -> tuple[bool, str]:
    """Whether what conda installs (the recipe's bound, else conda-forge's pin) agrees with upstream."""
    if required_by_wheel and upstream_values and not recipe_values:
        return False, "the upstream wheel requires it at run time; the recipe does not list it"
    constraining = [value for value in recipe_values if value != "*"]
    agree, reason = values_agree(upstream_values, constraining or cf_values)
    bounded = [value for value in upstream_values if value not in ("*", "")]
    if agree and bounded and recipe_values and not constraining and not cf_values:
        # Upstream bounds a Python package, the recipe lists it without a bound and conda-forge has
        # no global pin: the bound is lost in the conda package.
        return False, f"recipe does not carry upstream's {', '.join(bounded)}"
    return agree, reason


def build_table(
    upstream: Path | None, wheel: Path | None, recipe: Path | None, pinning: Path | None, subdir: str
) -> Table:
    notes: list[str] = []
    inputs = {
        "upstream": str(upstream or ""),
        "wheel": str(wheel or ""),
        "recipe": str(recipe or ""),
        "pinning": str(pinning or ""),
        "subdir": subdir,
    }
    tree, wheel_metadata = _load_upstream(upstream, wheel, notes)
    modules = submodules(tree) if tree is not None else {}
    cf_pins = _load_pinning(pinning, subdir, notes)
    recipe_specs, recipe_variant_pins = _load_recipe(recipe, subdir, cf_pins, notes)
    rows = []
    for dependency in DEPENDENCIES:
        upstream_values, source = _upstream(dependency, tree, wheel_metadata)
        source = _with_submodule(source, modules)
        if tree is not None and not upstream_values:
            notes += [
                f"{dependency.name}: submodule {module} is listed in .gitmodules but not checked out "
                "(run `git submodule update --init --recursive`, or use the release tarball)"
                for module in _unchecked_submodules(dependency, tree, modules)
            ]
        recipe_values = sorted(
            set(_first_present(recipe_specs, dependency.conda_names))
            | set(_first_present(recipe_variant_pins, dependency.pinning_keys))
        )
        cf_values = _first_present(cf_pins, dependency.pinning_keys)
        from_wheel = source.startswith("wheel METADATA")
        agree, reason = _compare(upstream_values, recipe_values, cf_values, from_wheel)
        rows.append(
            Row(
                package=dependency.name,
                upstream=upstream_values,
                recipe=recipe_values,
                conda_forge=cf_values,
                source=source,
                mismatch=not agree,
                reason=reason,
            )
        )
    return Table(rows=rows, notes=notes, inputs=inputs)


def render_markdown(table: Table) -> str:
    def cell(values: list[str]) -> str:
        return ", ".join(f"`{value}`" for value in values)

    lines = [
        "| Package | Upstream | Recipe | Conda-forge | Source |",
        "|---|---|---|---|---|",
    ]
    for row in table.rows:
        name = f"**{row.package}** ⚠" if row.mismatch else row.package
        lines.append(
            f"| {name} | {cell(row.upstream)} | {cell(row.recipe)} | {cell(row.conda_forge)} | {row.source} |"
        )
    mismatches = [row for row in table.rows if row.mismatch]
    if mismatches:
        lines += ["", "Mismatches (⚠):", ""]
        lines += [f"- {row.package}: {row.reason}" for row in mismatches]
    if table.notes:
        lines += ["", "Notes:", ""]
        lines += [f"- {note}" for note in table.notes]
    return "\n".join(lines) + "\n"


def render_json(table: Table) -> str:
    return json.dumps(asdict(table), indent=2) + "\n"


def _write(path: Path, text: str) -> None:
    # the driver's atomic write: an interrupted run never leaves half a table, nor a temporary file, behind
    atomic_file.write_text(path, text)


def _check_inputs(args: argparse.Namespace) -> None:
    """Before anything is read: the outputs can be written, and every input given is what it claims."""
    for option, path in (("--markdown", args.markdown), ("--json", args.json)):
        if path is not None:
            inputs.output_file(path, option)
    # Inputs left out leave their column empty (with a note); inputs given must be what they claim.
    if args.upstream is not None:
        if args.upstream.is_dir():
            inputs.input_dir(args.upstream, "--upstream", "a PyTorch source tree or release tarball")
        else:
            inputs.input_file(args.upstream, "--upstream", "a PyTorch source tree or release tarball")
    if args.wheel is not None:
        wanted = "a torch wheel (.whl), its METADATA (or PyPI's <wheel>.whl.metadata) or its .dist-info"
        if args.wheel.is_dir():
            inputs.input_dir(args.wheel, "--wheel", wanted, holding="METADATA")
        else:
            # PyPI serves a wheel's METADATA beside it as <wheel>.whl.metadata (PEP 658)
            inputs.input_file(args.wheel, "--wheel", wanted, (".whl", "METADATA", ".whl.metadata"))
    inputs.input_dir(args.recipe, "--recipe", "the recipe directory (recipe/)", holding="meta.yaml")


def run(args: argparse.Namespace) -> int:
    if args.subdir not in KNOWN_SUBDIRS:
        raise ToolError(f"unknown --subdir {args.subdir!r}; use one of {', '.join(KNOWN_SUBDIRS)}")
    _check_inputs(args)
    pinning_dir = locate_pinning(args.pinning)
    table = build_table(args.upstream, args.wheel, args.recipe, pinning_dir, args.subdir)
    markdown = render_markdown(table)
    if args.markdown:
        _write(args.markdown, markdown)
    if args.json:
        _write(args.json, render_json(table))
    if not args.markdown and not args.json:
        print(markdown, end="")
    if args.fail_on_mismatch and any(row.mismatch for row in table.rows):
        return 2
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "deps",
        help="dependency-version table: upstream vs recipe vs conda-forge pins",
        description=(
            "Compile the table 'Package | Upstream | Recipe | Conda-forge | Source' for the "
            "dependencies this feedstock tracks (cuda, magma, mkl, nccl, protobuf, sleef, numpy, "
            "sympy, triton, ...). Upstream values come from a PyTorch source tree or release tarball "
            "(.ci/docker install scripts and pins, third_party/ version files, requirement files) "
            "and from a built wheel's METADATA; the recipe's pins from recipe/meta.yaml and "
            "conda_build_config.yaml; conda-forge's from the shared pinning. Rows where what conda "
            "installs disagrees with upstream are flagged with a warning sign. Inputs left out leave "
            "their column empty and add a note; an input given that is missing, empty or unreadable is an "
            "error. Prints Markdown unless --markdown/--json name files."
        ),
    )
    parser.add_argument("--upstream", type=Path, help="PyTorch source tree directory or release tarball")
    parser.add_argument(
        "--wheel",
        type=Path,
        help="built torch wheel (.whl), its METADATA (as PyPI serves it: <wheel>.whl.metadata) or .dist-info",
    )
    parser.add_argument(
        "--recipe", type=Path, default=DEFAULT_RECIPE, help="recipe directory (default: %(default)s)"
    )
    add_pinning_argument(parser)
    parser.add_argument(
        "--subdir", default="linux-64", help="conda platform whose selectors apply (default: %(default)s)"
    )
    parser.add_argument("--markdown", type=Path, help="write the Markdown table to this file")
    parser.add_argument("--json", type=Path, help="write the table as JSON to this file")
    parser.add_argument(
        "--fail-on-mismatch", action="store_true", help="exit with status 2 when any row is flagged"
    )
    parser.set_defaults(func=run)
