"""``python -m feedstock_tools bump VERSION --sha256 HASH``: the release bump a maintainer does.

It edits the recipe (version, source hash, build number 0, the Python floor, the run requirements upstream's
wheels declare), re-renders ``.ci_support`` and prints one table of what it changed and what needs a person:
the pins the recipe's own tests compare with bundled versions, the staging table against every platform's
wheel of the release, the linkage of those wheels' binaries against the bumped recipe, every patch hunk
judged against the release's files where the wheels carry them, and the CUDA versions upstream ships.
Exit 0 when nothing needs a person, 2 when something does, 1 (one line, nothing written) on bad input.

It fetches nothing: the wheels come from ``--wheels`` or pip's cache (:mod:`.wheel_source`), a real wheel
or its fixture set alike. docs/bump.md has the procedure and the 2.15.0 report.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from feedstock_tools.ci import ci_support
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.recipe_imports import REPO_ROOT, import_megabuild
from feedstock_tools.conda.pinning import add_pinning_argument, locate_pinning
from feedstock_tools.conda.recipe_render import load_variant_config
from feedstock_tools.maintainer import patch_hunks, render_v1
from feedstock_tools.maintainer.conda_pins import conda_forge_pins
from feedstock_tools.maintainer.deps import DEPENDENCIES
from feedstock_tools.maintainer.upstream_versions import normalise_name, parse_requirement
from feedstock_tools.maintainer.version_compare import satisfies, version_key
from feedstock_tools.proofs import linkage, solve_channel, solve_check, wheel_layout
from feedstock_tools.release import recipe_edit, wheel_source
from feedstock_tools.release.wheel_source import TARGETS, WheelSource

_package_files = import_megabuild("package_files")
_staging = import_megabuild("staging")

CHANGED = "changed"
SAME = "unchanged"
PERSON = "needs a person"

# conda's spelling of a release (X.Y.Z, or X.Y.Z.rcN for upstream's vX.Y.Z-rcN; meta.yaml's comment)
VERSION = re.compile(r"^\d+\.\d+\.\d+(?:\.rc\d+)?$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")

# Requires-Dist names conda-forge's CUDA packages stand for: the recipe gets them through the run_exports
# of its CUDA -dev host packages, so they are compared in the CUDA rows, not as run requirements.
CUDA_STACK = re.compile(r"^(cuda-toolkit|nvidia-.*)$")
# Bundled versions the recipe's tests compare with conda-forge's pins (tests/test_recipe_patches.py):
# key of the pinning, header in the wheel, how the header spells the version, how the pin spells it.
BUNDLED_PINS = (
    (
        "fmt",
        "torch/include/fmt/base.h",
        r"#define FMT_VERSION (\d+)",
        lambda v: f"{int(v) // 10000}.{int(v) // 100 % 100}",
    ),
    (
        "pybind11_abi",
        "torch/include/pybind11/detail/internals.h",
        r"#\s*define PYBIND11_INTERNALS_VERSION (\d+)",
        str,
    ),
)
# The oldest CUDA the release's CMake accepts (Caffe2's public/cuda.cmake: "if(CUDA_VERSION VERSION_LESS X)")
CUDA_CMAKE = "torch/share/cmake/Caffe2/public/cuda.cmake"
CUDA_FLOOR = re.compile(r"if\(CUDA_VERSION VERSION_LESS ([\d.]+)\)")

# Where a source file of a patch is in a wheel, when the wheel carries its text (the installed headers,
# Caffe2's CMake modules, the Python sources; .in templates are configured, not copied). Evidence: the
# 2.13.0 wheel's share/cmake/Caffe2/{FindCUDAToolkit.cmake, public/cuda.cmake, public/utils.cmake} hash to
# the pre-image blobs of conda-forge's 2.13.0 patches (shared/docs/pytorch-build-facts.md, "Corrections");
# judged against the 2.13.0 linux-64 wheel, every hunk of 0003 and 0015 applies at its header's line, while
# the hunks on headers (0010, 0021, 0023) apply one line down: the install puts
# "#if !defined(TORCH_STABLE_ONLY) && !defined(TORCH_TARGET_VERSION)" above each header, so a header's
# offset is one line more than the source's.
_WHEEL_PATHS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^cmake/Modules/(FindCUDAToolkit\.cmake)$"), r"torch/share/cmake/Caffe2/\1"),
    (re.compile(r"^cmake/public/(.+\.cmake)$"), r"torch/share/cmake/Caffe2/public/\1"),
    (re.compile(r"^aten/src/(ATen/.+\.(?:h|cuh))$"), r"torch/include/\1"),
    (re.compile(r"^(c10/.+\.h)$"), r"torch/include/\1"),
    (re.compile(r"^(torch/csrc/.+\.(?:h|hpp))$"), r"torch/include/\1"),
    (re.compile(r"^(torch/(?!csrc/).+\.py)$"), r"\1"),
)
# The PEP 517 backend the driver builds with when a release's wheels name it in their WHEEL file
# ("Generator: scikit-build-core 1.1.1" for 2.14.1 and 2.15.0, "setuptools (81.0.0)" for 2.13.0): the recipe
# names it in the host, which is also how the rehearsal picks the stand-in (proofs/rehearsal/standins.py).
SKBUILD = "scikit-build-core"
_GENERATOR = re.compile(r"^Generator: (?P<name>[\w.-]+) \(?(?P<version>[\d.]+)\)?$", re.MULTILINE)
# Files of the feedstock a bump may write (the recipe and what render-ci writes): kept to restore on failure.
_WRITTEN = (
    "recipe/meta.yaml",
    "recipe/conda_build_config.yaml",
    f"{render_v1.V1_DIRNAME}/recipe.yaml",
    f"{render_v1.V1_DIRNAME}/conda_build_config.yaml",
    ".ci_support",
    ".github/workflows",
    "templates",
)


@dataclass(frozen=True)
class Row:
    area: str
    item: str
    old: str
    new: str
    status: str
    action: str = ""


@dataclass
class Release:
    """A release's wheels and what they declare."""

    version: str
    wheels: dict[str, WheelSource]  # by subdir
    metadata: dict[str, str] = field(default_factory=dict)  # by subdir: METADATA text

    def file_text(self, member: str) -> tuple[str, patch_hunks.FileText] | None:
        """The member's lines from the first platform's wheel that has it, with that subdir."""
        for subdir, source in self.wheels.items():
            text = source.file_text(member)
            if text is not None:
                return subdir, text
        return None

    def text(self, member: str) -> tuple[str, str] | None:
        """The member's text from the first platform's wheel that has it, with that subdir."""
        for subdir, source in self.wheels.items():
            text = source.text(member)
            if text is not None:
                return subdir, text
        return None


def wheel_member(source_path: str) -> str | None:
    for pattern, replacement in _WHEEL_PATHS:
        if pattern.match(source_path):
            return pattern.sub(replacement, source_path)
    return None


def patch_paths(root: Path) -> list[Path]:
    return sorted((root / "recipe" / "patches").glob("*.patch"))


def dist_info_member(source: WheelSource, name: str) -> str | None:
    for listed in source.files():
        parts = listed.path.split("/")
        if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == name:
            return listed.path
    return None


def _header(text: str, key: str) -> list[str]:
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith(f"{key}:")]


def load_release(directories: list[Path], version: str) -> Release:
    """Every target's wheel of ``version``, each checked to be what its name says."""
    release = Release(version, wheel_source.find_wheels(directories, version))
    for subdir, source in release.wheels.items():
        target = next(t for t in TARGETS if t.subdir == subdir)
        metadata_member = dist_info_member(source, "METADATA")
        metadata = source.text(metadata_member) if metadata_member else None
        if metadata is None:
            raise ToolError(
                f"{source.name}: no torch-*.dist-info/METADATA text: not a PyTorch wheel "
                "(or a fixture set without texts); cut it again"
            )
        declared = (_header(metadata, "Version") or ["?"])[0].split("+")[0]
        if _header(metadata, "Name") != ["torch"] or declared != version:
            raise ToolError(
                f"{source.name}: its METADATA says {_header(metadata, 'Name')[:1]} {declared}, "
                f"not torch {version}: "
                "the file is misnamed; download the wheel again"
            )
        wheel_member_name = dist_info_member(source, "WHEEL")
        tags = _header(source.text(wheel_member_name) or "", "Tag") if wheel_member_name else []
        if not any(tag.endswith(f"-{target.platform_tag}") for tag in tags):
            raise ToolError(
                f"{source.name}: its WHEEL file tags it {', '.join(tags) or 'nothing'}, "
                f"not {target.platform_tag}: "
                "the file is misnamed; download the wheel again"
            )
        release.metadata[subdir] = metadata
    return release


# ---- what the release declares -------------------------------------------------------------------------


def python_floor(release: Release) -> str:
    """The oldest Python of the release (``Requires-Python: >=3.11`` -> ``3.11``), the same on every wheel."""
    floors = set()
    for subdir, metadata in release.metadata.items():
        spec = (_header(metadata, "Requires-Python") or [""])[0]
        match = re.fullmatch(r">=\s*(\d+\.\d+)(?:\.0)?", spec)
        if not match:
            raise ToolError(
                f"{release.wheels[subdir].name}: Requires-Python {spec!r} is not '>=X.Y': "
                "set the Python floor by hand"
            )
        floors.add(match[1])
    if len(floors) != 1:
        raise ToolError(
            f"the wheels of {release.version} disagree on Requires-Python ({', '.join(sorted(floors))})"
        )
    return floors.pop()


def requirements(release: Release) -> dict[str, tuple[str, str]]:
    """Every Requires-Dist of the wheels (extras left out): normalised name -> (spec, marker), the first
    wheel's declaration of each name."""
    found: dict[str, tuple[str, str]] = {}
    for metadata in release.metadata.values():
        for line in _header(metadata, "Requires-Dist"):
            parsed = parse_requirement(line)
            if parsed and "extra" not in parsed[2]:
                found.setdefault(parsed[0], (parsed[1], parsed[2]))
    return found


def conda_spec(pypi_spec: str, recipe_spec: str) -> str:
    """The conda spec of a PyPI spec, keeping the recipe's upper bounds that upstream does not state:
    ``~=3.9.0`` -> ``3.9.*``; ``>=4.13.0`` with the recipe's ``>=4.10.0`` -> ``>=4.13.0``;
    ``>=77.0.3`` with ``>=77.0.3,<82`` -> ``>=77.0.3,<82``."""
    if pypi_spec == "*":
        return ""
    if pypi_spec.startswith("~="):
        parts = pypi_spec[2:].split(".")
        return ".".join(parts[:-1]) + ".*"
    upstream = sorted(pypi_spec.split(","), key=lambda part: not part.startswith(">"))
    kept = [part for part in recipe_spec.replace(" ", "").split(",") if part.startswith("<")]
    if any(part.startswith("<") for part in upstream):
        kept = []
    return ",".join(upstream + kept)


def _conda_name(pypi_name: str, recipe_names: list[str]) -> str | None:
    for name in recipe_names:
        if normalise_name(name) == pypi_name:
            return name
    for dependency in DEPENDENCIES:
        if dependency.python_name and normalise_name(dependency.python_name) == pypi_name:
            return dependency.conda_names[0]
    return None


def backend_change(release: Release, meta: str) -> tuple[str, list[Row]]:
    """The build backend of the release (its wheels' WHEEL Generator) in the recipe's host: scikit-build-core
    at the lowest version any wheel names, or none for a setuptools release."""
    generators: dict[str, set[str]] = {}
    for source in release.wheels.values():
        member = dist_info_member(source, "WHEEL")
        match = _GENERATOR.search(source.text(member) or "") if member else None
        if match:
            generators.setdefault(match["name"], set()).add(match["version"])
    if len(generators) != 1:
        named = ", ".join(sorted(generators)) or "none"
        return meta, [
            Row(
                "build backend",
                "WHEEL Generator",
                "",
                named,
                PERSON,
                "the wheels disagree or name none: set the host's backend by hand",
            )
        ]
    ((name, versions),) = generators.items()
    tools = {tool.split()[0]: tool for tool in recipe_edit.python_host_tools(meta)}
    old = tools.get(SKBUILD, "(no scikit-build-core)")
    if name == SKBUILD:
        spec = ">=" + min(versions, key=version_key)
        new_meta = recipe_edit.set_python_host_tool(meta, SKBUILD, spec)
        new = f"{SKBUILD} {spec}"
    else:
        new_meta = recipe_edit.set_python_host_tool(meta, SKBUILD, None)
        new = "(no scikit-build-core)"
    shown = ", ".join(f"{name} {v}" for v in sorted(versions, key=version_key))
    row = Row(
        "build backend",
        "host (WHEEL Generator: " + shown + ")",
        old,
        new,
        CHANGED if new_meta != meta else SAME,
        "setuptools stays in the host until the tarball's pyproject.toml [build-system] says otherwise"
        if new_meta != meta
        else "",
    )
    return new_meta, [row]


def requirement_changes(release: Release, meta: str) -> tuple[str, list[Row]]:
    """The pytorch output's run requirements brought to the wheels' Requires-Dist, and their rows."""
    recipe = recipe_edit.run_requirements(meta)
    rows = []
    upstream = requirements(release)
    for pypi_name, (spec, marker) in upstream.items():
        if CUDA_STACK.match(pypi_name):
            continue  # compared in the CUDA rows
        name = _conda_name(pypi_name, list(recipe))
        shown = f"{pypi_name} {spec}" + (f" ; {marker}" if marker else "")
        if name is None or name not in recipe:
            rows.append(
                Row(
                    "run requirement",
                    pypi_name,
                    "(not in the recipe)",
                    shown,
                    PERSON,
                    "add its conda-forge package to the pytorch output's run requirements (with the selector "
                    "its marker means) or say why not in meta.yaml",
                )
            )
            continue
        old_spec = recipe[name][0]
        new_spec = conda_spec(spec, old_spec)
        if new_spec == old_spec:
            rows.append(Row("run requirement", name, old_spec or "(any)", new_spec or "(any)", SAME))
            continue
        meta = recipe_edit.set_run_requirement(meta, name, new_spec)
        rows.append(
            Row("run requirement", name, old_spec or "(any)", new_spec or "(any)", CHANGED, f"from {shown}")
        )
    tracked = {normalise_name(d.python_name) for d in DEPENDENCIES if d.python_name}
    for name in recipe:
        if normalise_name(name) in tracked and normalise_name(name) not in upstream:
            rows.append(
                Row(
                    "run requirement",
                    name,
                    recipe[name][0] or "(any)",
                    "(not required upstream)",
                    PERSON,
                    "drop it from the pytorch output's run requirements, or say why it stays",
                )
            )
    return meta, rows


# ---- what the wheels hold ------------------------------------------------------------------------------


def tree_paths(member: str) -> list[tuple[str, str]]:
    """The (tree, path) places a wheel member takes in the build tree wheel-layout lays a wheel out as."""
    first = member.split("/", 1)[0]
    if first.endswith(".dist-info"):
        return [("metadata", member)]
    places = [("setuptools", member)]
    parts = member.split("/")
    if len(parts) > 2 and parts[0] == "torch" and parts[1] in _staging.INSTALL_TREE_DIRS:
        places.append(("install", "/".join(parts[1:])))
    return places


def claims(source: WheelSource, shlib_ext: str) -> tuple[dict[str, list[str]], list[str], list[str]]:
    """The staging table over a wheel's files: rule -> claimed paths, unclaimed paths, doubly claimed ones."""
    rules = _package_files.rules_for(shlib_ext)
    claimed: dict[str, list[str]] = {}
    unclaimed, twice = [], []
    for listed in source.files():
        for tree, path in tree_paths(listed.path):
            owners = [rule for rule in rules if _staging.rule_claims(rule, tree, path, shlib_ext)]
            if not owners:
                unclaimed.append(f"{tree}:{path}")
            elif len(owners) > 1:
                twice.append(f"{tree}:{path}")
            for rule in owners:
                claimed.setdefault(f"{rule.tree}:{rule.pattern}", []).append(path)
    return claimed, unclaimed, twice


def _shlib(subdir: str) -> str:
    return {"linux": ".so", "osx": ".dylib", "win": ".dll"}[subdir.split("-", maxsplit=1)[0]]


def _examples(paths: list[str], count: int = 3) -> str:
    return ", ".join(paths[:count]) + (f" (+{len(paths) - count} more)" if len(paths) > count else "")


def staging_rows(release: Release, previous: Release | None) -> list[Row]:
    rows = []
    for subdir, source in release.wheels.items():
        shlib = _shlib(subdir)
        claimed, unclaimed, twice = claims(source, shlib)
        files = len(source.files())
        if unclaimed:
            rows.append(
                Row(
                    "staging",
                    f"{subdir}: new files",
                    "",
                    f"{len(unclaimed)}: {_examples(unclaimed, 8)}",
                    PERSON,
                    "add a rule for each to recipe/megabuild/package_files.py: Rule(tree, path, package or "
                    "NOT_SHIPPED, why), or one glob that claims no other file",
                )
            )
        if twice:
            rows.append(
                Row(
                    "staging",
                    f"{subdir}: claimed twice",
                    "",
                    _examples(twice),
                    PERSON,
                    "make the rules of recipe/megabuild/package_files.py disjoint",
                )
            )
        old = previous.wheels.get(subdir) if previous else None
        if old is None:
            rows.append(
                Row(
                    "staging",
                    f"{subdir}: rules gone",
                    "",
                    "unknown: no wheel of the recipe's version",
                    PERSON,
                    "pass the current version's wheels too (--wheels) to see which rules claim nothing now",
                )
            )
        else:
            old_claimed, _, _ = claims(old, shlib)
            gone = sorted(rule for rule in old_claimed if rule not in claimed)
            if gone:
                rows.append(
                    Row(
                        "staging",
                        f"{subdir}: rules gone",
                        f"claim files of {old.name}",
                        _examples(gone, 4),
                        PERSON,
                        "drop each rule, or keep it for a configuration the PyPI wheel does not show",
                    )
                )
            added = len({f.path for f in source.files()} - {f.path for f in old.files()})
            removed = len({f.path for f in old.files()} - {f.path for f in source.files()})
            rows.append(
                Row(
                    "staging",
                    f"{subdir}: files",
                    f"{len(old.files())}",
                    f"{files} (+{added} / -{removed})",
                    SAME,
                )
            )
        if not unclaimed and not twice and old is None:
            rows.append(
                Row("staging", f"{subdir}: files", "", f"{files}, every one placed by one rule", SAME)
            )
    return rows


def _config_for(root: Path, subdir: str, cuda: str | None) -> Path | None:
    """The rendered configuration the linkage of a wheel is checked against: its subdir, generic BLAS where
    there is one, the CUDA version nearest the wheel's (CPU for a CPU wheel)."""
    configs = []
    for path in sorted((root / ".ci_support").glob("*.yaml")):
        variant = load_variant_config(path)
        if variant.get("target_platform") != [subdir]:
            continue
        config_cuda = str(variant.get("cuda_compiler_version", ["None"])[0])
        if (cuda is None) != (config_cuda == "None") or variant.get("arm_variant_type") == ["tegra"]:
            continue
        distance = abs(version_key(config_cuda)[-1] - version_key(cuda)[-1]) if cuda else 0
        major = abs(version_key(config_cuda)[0] - version_key(cuda)[0]) if cuda else 0
        configs.append(((major, distance, variant.get("blas_impl") != ["generic"]), path))
    return min(configs)[1] if configs else None


def solve_record_rows(meta: str) -> list[Row]:
    """solve-check's records (solve_metadata.yaml) of the pytorch run requirements against the bumped specs:
    a record no spec admits makes solve-check drop every build that requires it."""
    records: dict[str, list[str]] = {}
    for entry in solve_channel.load_metadata()["dependencies"]:
        if isinstance(entry.get("version"), str):
            records.setdefault(str(entry["name"]), []).append(entry["version"])
    rows = []
    for name, (spec, _) in recipe_edit.run_requirements(meta).items():
        versions = records.get(name, [])
        if spec and versions and not any(satisfies(version, spec) for version in versions):
            rows.append(
                Row(
                    "solve-check record",
                    name,
                    ", ".join(versions),
                    spec,
                    PERSON,
                    "add conda-forge's real record of a version the spec admits to "
                    "feedstock_tools/proofs/solve_metadata.yaml (with its source)",
                )
            )
    return rows


def needed_libraries(source: WheelSource) -> set[str]:
    return {library for needs in source.needs().values() for library in needs.needed}


def solve_request_rows(floor: str) -> list[Row]:
    """solve-check's requests (solve_requests.yaml) for a Python below the release's floor: they expect a
    solution the bumped recipe no longer builds."""
    rows = []
    for request in solve_check.load_requests()[1]:
        for spec in request.specs:
            match = re.fullmatch(r"python (\d+\.\d+)\.\*", spec)
            if match and version_key(match[1]) < version_key(floor):
                rows.append(
                    Row(
                        "solve-check request",
                        request.name,
                        "expects a solution",
                        f"no Python {match[1]} build",
                        PERSON,
                        "expect 'fails: python' on every machine in feedstock_tools/proofs/"
                        "solve_requests.yaml, or drop the request",
                    )
                )
    return rows


def linkage_rows(root: Path, release: Release, previous: Release | None) -> list[Row]:
    """Each wheel's binaries staged by the table and checked against the bumped recipe (the needs lists),
    after the libraries they need that the current version's binaries did not (or no longer)."""
    rows = []
    for subdir, source in release.wheels.items():
        old = previous.wheels.get(subdir) if previous else None
        if old is not None:
            new_needs, old_needs = needed_libraries(source), needed_libraries(old)
            added, gone = sorted(new_needs - old_needs), sorted(old_needs - new_needs)
            change = ", ".join([*(f"+{n}" for n in added), *(f"-{n}" for n in gone)]) or "none"
            rows.append(
                Row(
                    "needs",
                    subdir,
                    f"{len(old_needs)} libraries",
                    f"{len(new_needs)}: {change}",
                    SAME,
                    "" if not added else "the linkage row says whether each resolves",
                )
            )
        cuda = _cuda_of(source)
        config = _config_for(root, subdir, cuda)
        if config is None:
            rows.append(
                Row("linkage", subdir, "", f"no configuration for CUDA {cuda}", PERSON, "render-ci first")
            )
            continue
        needs = source.needs()
        markers = {"torch/__init__.py", "torch/version.py"}
        members = [
            f
            for f in source.files()
            if f.path in needs or f.path in markers or f.path.endswith(".dist-info/METADATA")
        ]
        try:
            report = _check_skeleton(root, source.name, members, needs, config)
        except ToolError as exc:
            rows.append(
                Row("linkage", subdir, config.name, str(exc), PERSON, "place the binary in the staging table")
            )
            continue
        if report.errors:
            rows.append(
                Row(
                    "linkage",
                    subdir,
                    config.name,
                    f"{len(report.errors)} unresolved: {_examples(report.errors, 2)}",
                    PERSON,
                    "add the providing package as a run requirement, or a row to runtime_libraries.py",
                )
            )
        else:
            rows.append(
                Row(
                    "linkage",
                    subdir,
                    config.name,
                    f"{report.needs} needs of {report.binaries} binaries resolve",
                    SAME,
                )
            )
    return rows


def _check_skeleton(
    root: Path, name: str, members: list, needs: Mapping[str, linkage.BinaryNeeds], config: Path
) -> linkage.LinkageReport:
    with tempfile.TemporaryDirectory(prefix="bump-linkage-") as scratch:
        work = Path(scratch)
        wheel = work / name
        with zipfile.ZipFile(wheel, "w") as archive:
            for listed in members:
                info = zipfile.ZipInfo(listed.path)
                info.external_attr = (0o100000 | listed.mode) << 16
                archive.writestr(info, b"")
        tag = wheel_layout.parse_wheel_name(wheel)
        with wheel_layout.staging_errors_as_tool_errors(work / "out"):
            trees = wheel_layout.lay_out_wheel_as_build_tree(wheel, work / "out" / "src")
            prefixes = wheel_layout.stage_into_prefixes(trees, tag, work / "out")
            specs = linkage.recipe_packages(root / "recipe", config, prefixes, tag.python, tag.platform)
            reader = linkage.StagedWheelNeeds(needs, work / "out" / "packages", tag.site_packages)
            return linkage.LinkageCheck(specs, tag.platform, wheel=True, reader=reader).run()


def _cuda_of(source: WheelSource) -> str | None:
    match = wheel_layout.WHEEL_CUDA.search(source.text("torch/version.py") or "")
    return match["version"] if match else None


def cuda_rows(root: Path, release: Release) -> list[Row]:
    rows = []
    built: dict[str, list[str]] = {}
    for path in sorted((root / ".ci_support").glob("*.yaml")):
        variant = load_variant_config(path)
        versions = [str(v) for v in variant.get("cuda_compiler_version", []) if str(v) != "None"]
        built.setdefault(variant["target_platform"][0], []).extend(versions)
    upstream = requirements(release)
    for subdir, source in release.wheels.items():
        cuda = _cuda_of(source)
        ours = sorted(set(built.get(subdir, [])), key=version_key)
        if cuda is None:
            rows.append(Row("CUDA", subdir, ", ".join(ours) or "CPU only", "PyPI wheel: CPU", SAME))
            continue
        status = SAME if cuda in ours else PERSON
        action = (
            ""
            if status == SAME
            else (
                f"PyPI's default CUDA {cuda} is not a configuration here (conda-forge's pinning and "
                "migrations decide which CUDA versions are built); upstream's other CUDA builds are not "
                "on PyPI"
            )
        )
        rows.append(Row("CUDA", f"{subdir}: PyPI's build", ", ".join(ours), cuda, status, action))
    toolkit = upstream.get("cuda-toolkit")
    if toolkit:
        libraries = ", ".join(
            f"{name} {spec}" for name, (spec, _) in upstream.items() if name.startswith("nvidia-")
        )
        rows.append(
            Row(
                "CUDA",
                "PyPI's CUDA stack",
                "",
                f"cuda-toolkit {toolkit[0]}; {libraries}",
                SAME,
                "conda-forge's packages come through the -dev host packages' run_exports",
            )
        )
    floor = release.text(CUDA_CMAKE)
    if floor and (match := CUDA_FLOOR.search(floor[1])):
        oldest = min((v for versions in built.values() for v in versions), key=version_key, default=None)
        ok = oldest is None or version_key(oldest) >= version_key(match[1])
        rows.append(
            Row(
                "CUDA",
                "oldest CUDA the release's CMake accepts",
                oldest or "",
                match[1],
                SAME if ok else PERSON,
                "" if ok else f"drop CUDA {oldest} (recipe/conda_build_config.yaml, migrations)",
            )
        )
    return rows


def bundled_rows(root: Path, release: Release) -> list[Row]:
    rows = []
    configs = [load_variant_config(p) for p in sorted((root / ".ci_support").glob("*.yaml"))]
    for key, header, pattern, spelling in BUNDLED_PINS:
        found = release.text(header)
        match = re.search(pattern, found[1]) if found else None
        pins = sorted({str(v) for config in configs for v in config.get(key, [])})
        if not match:
            rows.append(
                Row(
                    "bundled version",
                    key,
                    ", ".join(pins),
                    f"unknown: no {header} in the wheels",
                    PERSON,
                    "find the bundled version in the release tarball",
                )
            )
            continue
        bundled = spelling(match[1])
        status = SAME if pins == [bundled] else PERSON
        rows.append(
            Row(
                "bundled version",
                key,
                ", ".join(pins),
                f"{bundled} ({header})",
                status,
                ""
                if status == SAME
                else "conda-forge's pin and the bundled version differ: override the key in "
                "recipe/conda_build_config.yaml once conda-forge has that version, or keep the bundled copy "
                "(tests/test_recipe_patches.py compares them)",
            )
        )
    return rows


def patch_rows(root: Path, release: Release) -> list[Row]:
    rows = []
    unknown = 0
    for patch in patch_paths(root):
        diffs = patch_hunks.parse_patch(patch.read_text())
        evidence: dict[str, patch_hunks.FileText] = {}
        origin: dict[str, str] = {}
        for diff in diffs:
            source_path = diff.old_path or diff.path
            member = wheel_member(source_path)
            found = release.file_text(member) if member else None
            if found:
                evidence[source_path] = found[1]
                origin[source_path] = f"{found[0]} wheel's {member}"
        for judgement in patch_hunks.judge_patch(diffs, evidence):
            verdict = judgement.verdict
            if verdict is patch_hunks.Verdict.UNKNOWN:
                unknown += 1
                continue
            where = origin.get(judgement.hunk.path, "")
            status = SAME if verdict is patch_hunks.Verdict.APPLIES else PERSON
            rows.append(
                Row(
                    "patch",
                    f"{patch.name[:4]} {judgement.hunk.name()}",
                    verdict.value,
                    f"{judgement.detail}" + (f" ({where})" if where else ""),
                    status,
                    "" if status == SAME else "refresh the hunk on the release's text, or drop the patch",
                )
            )
    if unknown:
        rows.append(
            Row(
                "patch",
                f"{unknown} hunks",
                "unknown",
                "their files are not in any wheel",
                PERSON,
                "apply every patch strictly on the release tarball (git apply --check)",
            )
        )
    return rows


# ---- the bump ------------------------------------------------------------------------------------------


@dataclass
class Bump:
    rows: list[Row]

    @property
    def needs_a_person(self) -> bool:
        return any(row.status == PERSON for row in self.rows)


def check_arguments(version: str, sha256: str) -> None:
    if not VERSION.match(version):
        raise ToolError(
            f"version {version!r} is not X.Y.Z (or X.Y.Z.rcN): give the release as conda spells "
            "it, e.g. 2.15.0"
        )
    if not SHA256.match(sha256):
        raise ToolError(
            f"--sha256 {sha256!r} is not 64 lower-case hex digits: give sha256sum of "
            f"pytorch-v{version}.tar.gz"
        )


def _snapshot(root: Path) -> dict[Path, bytes]:
    files: dict[Path, bytes] = {}
    for name in _WRITTEN:
        path = root / name
        for entry in [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()):
            files[entry] = entry.read_bytes()
    return files


def _restore(root: Path, snapshot: dict[Path, bytes]) -> None:
    """Put every file a failed bump may have written back as it was, and remove the ones it added."""
    for name in _WRITTEN:
        path = root / name
        if path.is_dir():
            for entry in path.rglob("*"):
                if entry.is_file() and entry not in snapshot:
                    entry.unlink()
    for path, data in snapshot.items():
        path.write_bytes(data)


def bump(root: Path, version: str, sha256: str, wheel_dirs: list[Path], pinning: Path) -> Bump:
    """Bump the feedstock at ``root`` to ``version``; all or nothing."""
    check_arguments(version, sha256)
    meta_path, config_path = root / recipe_edit.META, root / recipe_edit.CONFIG
    for path in (meta_path, config_path):
        if not path.is_file():
            raise ToolError(f"{path} not found: pass the feedstock root with --root")
    meta, config = meta_path.read_text(), config_path.read_text()
    current = recipe_edit.read_version(meta)
    if version_key(version) <= version_key(current.version):
        raise ToolError(f"{version} is not newer than the recipe's {current.version}: give the new release")
    release = load_release(wheel_dirs, version)
    previous = _previous_release(wheel_dirs, current.version)
    rows = [
        Row("source", "version", current.version, version, CHANGED),
        Row(
            "source",
            "sha256",
            current.sha256[:12] + "...",
            sha256[:12] + "...",
            CHANGED,
            f"must be sha256sum of pytorch-v{version}.tar.gz (GitHub release asset)",
        ),
        Row("source", "build number", str(current.build), "0", SAME if current.build == 0 else CHANGED),
    ]
    new_meta = recipe_edit.set_version(meta, version, sha256)
    floor = python_floor(release)
    pinned_floor = conda_forge_pins(pinning, "linux-64").get("python_min", ["?"])[0]
    written_floor = floor if version_key(floor) > version_key(str(pinned_floor)) else None
    old_skip = recipe_edit.python_floor_skip(meta) or f"(pinning's python_min {pinned_floor})"
    new_meta, new_config = recipe_edit.set_python_floor(new_meta, config, written_floor)
    rows.append(
        Row(
            "python",
            "oldest Python (Requires-Python)",
            old_skip,
            f"{floor}"
            + (
                " (python_min + pytorch skip py<" + floor.replace(".", "") + ")"
                if written_floor
                else " (the pinning's python_min)"
            ),
            CHANGED
            if new_meta != recipe_edit.set_version(meta, version, sha256) or new_config != config
            else SAME,
        )
    )
    new_meta, backend_rows = backend_change(release, new_meta)
    rows += backend_rows
    new_meta, requirement_rows = requirement_changes(release, new_meta)
    rows += requirement_rows
    rows += solve_record_rows(new_meta)
    rows += solve_request_rows(floor)
    rows += staging_rows(release, previous)
    rows += patch_rows(root, release)
    snapshot = _snapshot(root)
    try:
        meta_path.write_text(new_meta)
        config_path.write_text(new_config)
        written = ci_support.write_files(root, pinning)  # render-ci, with convert-v1's recipe-v1/
    except BaseException:
        _restore(root, snapshot)
        raise
    rows.append(
        Row(
            "ci",
            ".ci_support, workflow and recipe-v1",
            "",
            f"{len(written)} files rewritten (render-ci)",
            CHANGED if written else SAME,
        )
    )
    rows += bundled_rows(root, release)
    rows += cuda_rows(root, release)
    rows += linkage_rows(root, release, previous)
    return Bump(rows)


def _previous_release(wheel_dirs: list[Path], version: str) -> Release | None:
    """The recipe's current version's wheels, where they are at hand (for the staging rules gone)."""
    found = {}
    for target in TARGETS:
        source = wheel_source.find_wheel(wheel_dirs, version, target)
        if source is not None:
            found[target.subdir] = source
    return Release(version, found) if found else None


def format_table(rows: list[Row]) -> str:
    lines = ["| area | item | was | now | status | what to do |", "|---|---|---|---|---|---|"]
    for row in rows:
        cells = [
            row.area,
            row.item,
            row.old,
            row.new,
            f"**{row.status}**" if row.status == PERSON else row.status,
            row.action,
        ]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines)


def fixture_lines(source: WheelSource, root: Path) -> dict[str, list[int] | None]:
    """The lines of each member a fixture set keeps for the bump: whole WHEEL and version.py, METADATA's
    headers, the version lines of the bundled headers and of the CUDA floor, and each patch hunk's lines
    where it applies in this wheel (or where it expected them, when it conflicts), with 3 lines around."""
    keep: dict[str, list[int] | None] = {"torch/version.py": None}
    wheel_info = dist_info_member(source, "WHEEL")
    if wheel_info:
        keep[wheel_info] = None
    metadata = dist_info_member(source, "METADATA")
    if metadata:
        headers = (source.text(metadata) or "").split("\n\n", 1)[0]
        keep[metadata] = list(range(1, headers.count("\n") + 2))
    for member, pattern in [
        *((header, regex) for _, header, regex, _ in BUNDLED_PINS),
        (CUDA_CMAKE, CUDA_FLOOR),
    ]:
        text = source.text(member)
        if text is not None:
            keep[member] = [n for n, line in enumerate(text.split("\n"), 1) if re.search(pattern, line)]
    for patch in patch_paths(root):
        for diff in patch_hunks.parse_patch(patch.read_text()):
            member = wheel_member(diff.old_path or diff.path)
            text = source.file_text(member) if member else None
            if member is None or text is None:
                continue
            lines = keep.setdefault(member, [])
            for hunk in diff.hunks:
                judgement = patch_hunks.judge_hunk(hunk, text)
                start = judgement.line or hunk.old_start
                lines += range(max(1, start - 3), start + len(hunk.old_lines) + 3)  # type: ignore[union-attr]
    return keep


def cut(version: str, wheel_dirs: list[Path], out: Path, root: Path, provenance: str) -> list[Path]:
    """The fixture set of every target's real wheel of ``version`` (file list, needs list, texts)."""
    written = []
    for target in TARGETS:
        source = wheel_source.find_wheel(wheel_dirs, version, target)
        if not isinstance(source, wheel_source.ZipWheel):
            raise ToolError(
                f"no real wheel {target.wheel_name(version)} to cut: {target.pip_download(version)}"
            )
        written += wheel_source.cut_fixtures(source.path, out, fixture_lines(source, root), provenance)
    return written


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bump",
        help="bump the recipe to a new PyTorch release and report what needs a person",
        description=(
            "Set the recipe to VERSION (version, --sha256, build number 0), raise the Python floor to the "
            "wheels' Requires-Python, bring the pytorch run requirements to their Requires-Dist, re-render "
            ".ci_support, and print a table: each change, the bundled versions the recipe's pins must match, "
            "the staging table and the linkage against every platform's wheel, every patch hunk judged "
            "against the wheels' copies of the patched files, and the CUDA versions upstream ships. Reads "
            "the wheels (or their fixture sets) from --wheels or pip's cache; fetches nothing. Exit 2 when "
            "a row needs a person; bad input is one line, exit 1, nothing written."
        ),
    )
    parser.add_argument("version", help="the release as conda spells it: 2.15.0 (2.15.0.rc1 for v2.15.0-rc1)")
    parser.add_argument("--sha256", help="sha256sum of the release tarball pytorch-vVERSION.tar.gz")
    parser.add_argument(
        "--wheels",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="directory holding torch-VERSION-cp312-cp312-PLATFORM.whl for every platform, or their fixture "
        "sets (repeatable; default: pip's cache directory)",
    )
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="feedstock root (default: %(default)s)")
    parser.add_argument(
        "--cut-fixtures",
        type=Path,
        metavar="DIR",
        help="instead: write the fixture set of each real wheel of VERSION into DIR (the CI fixtures)",
    )
    parser.add_argument("--provenance", default="", help="with --cut-fixtures: where the wheels came from")
    add_pinning_argument(parser)
    parser.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    directories = args.wheels or [d for d in [wheel_source.pip_cache_dir()] if d]
    for directory in args.wheels:
        if not directory.is_dir():
            raise ToolError(f"--wheels {directory} is not a directory: pass the directory holding the wheels")
    if args.cut_fixtures is not None:
        if args.sha256:
            raise ToolError("--cut-fixtures writes fixtures and bumps nothing: leave --sha256 out")
        args.cut_fixtures.mkdir(parents=True, exist_ok=True)
        for path in cut(args.version, directories, args.cut_fixtures, args.root, args.provenance):
            print(f"wrote {path} ({path.stat().st_size} bytes)")
        return 0
    if not args.sha256:
        raise ToolError(
            f"--sha256 is required: give sha256sum of the release tarball pytorch-v{args.version}.tar.gz"
        )
    result = bump(args.root, args.version, args.sha256, directories, locate_pinning(args.pinning))
    print(format_table(result.rows))
    people = sum(row.status == PERSON for row in result.rows)
    print(
        f"\nbumped {args.root} to {args.version}: "
        + (f"{people} row(s) need a person" if people else "nothing needs a person")
    )
    return 2 if result.needs_a_person else 0
