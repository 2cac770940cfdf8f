"""A local conda channel made of the recipe's packages, as metadata: what solve-check hands the real solver.

Every output of every ``.ci_support`` configuration, rendered by :mod:`feedstock_tools.conda.recipe_render`,
becomes a repodata record with its real name, version, build string and build number; its ``depends`` are
its rendered run requirements plus what conda-build would add: the run_exports of its host requirements
(weak and strong) and of its build requirements (strong only), the sibling outputs' own run_exports,
``pin_run_as_build`` of the configuration, less ``ignore_run_exports(_from)``. Run-exports of other packages
and the records of the dependencies come from ``solve_metadata.yaml`` (one place, each entry cited).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from feedstock_tools.ci.ci_support import combined_spec
from feedstock_tools.ci.forge_config import read_forge_settings
from feedstock_tools.common import config_selector
from feedstock_tools.common.configuration import Configuration, PythonVersion
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.feedstock import Feedstock
from feedstock_tools.conda.recipe_render import RenderedOutput, apply_pin_expressions, render_recipe
from feedstock_tools.conda.yaml_load import safe_load
from megabuild import atomic_file

METADATA_FILE = Path(__file__).with_name("solve_metadata.yaml")
SUBDIRS = ("linux-64", "linux-aarch64", "osx-64", "osx-arm64", "win-64", "noarch")

Record = dict[str, Any]
Progress = Callable[[str], None]


@dataclass(frozen=True)
class RunExport:
    requirement: str  # name as rendered, "{subdir}" filled in per output
    env: str  # "host" or "build"
    exports: tuple[tuple[str, str | None, str | None], ...]
    as_written: bool = False  # the export is the requirement itself (arm-variant's "arm-variant * <kind>")
    # the requirement's version is that of this other requirement of the same environment (cross-python's
    # is the build Python's: its run requirement ties the two)
    version_of: str | None = None
    # the export is the pinning's value of this key at the requirement's version ("3.10.* *_cpython")
    pinned_export: str | None = None
    fixed: tuple[str, ...] = ()  # exports that do not follow the requirement's version (vs2022's runtimes)
    # the version the host solve installs where the rendering gives a range (libcudss-dev <0.8 -> 0.7.1.4)
    solved_version: str | None = None


@dataclass
class Channel:
    """Repodata records per subdir."""

    records: dict[str, list[Record]] = field(default_factory=lambda: {s: [] for s in SUBDIRS})

    def add(self, record: Record) -> None:
        self.records[record["subdir"]].append(record)

    def all_records(self) -> Iterable[Record]:
        for records in self.records.values():
            yield from records

    def write(self, directory: Path) -> Path:
        """``directory/<subdir>/repodata.json`` for every subdir (empty ones too: the solver reads noarch)."""
        for subdir, records in self.records.items():
            (directory / subdir).mkdir(parents=True, exist_ok=True)
            packages = {file_name(record): record for record in records}
            if len(packages) != len(records):
                names = sorted(file_name(r) for r in records)
                twice = sorted({n for n in names if names.count(n) > 1})
                raise ToolError(f"two records with the same file name {twice[:3]} in {subdir}")
            repodata = {"info": {"subdir": subdir}, "packages": {}, "packages.conda": packages}
            atomic_file.write_text(
                directory / subdir / "repodata.json", json.dumps(repodata, indent=1, sort_keys=True)
            )
        return directory


def file_name(record: Mapping[str, Any]) -> str:
    return f"{record['name']}-{record['version']}-{record['build']}.conda"


def record(
    name: str,
    version: str,
    build: str,
    build_number: int,
    subdir: str,
    *,
    depends: Sequence[str] = (),
    constrains: Sequence[str] = (),
    track_features: str = "",
) -> Record:
    entry: Record = {
        "name": name,
        "version": version,
        "build": build,
        "build_number": build_number,
        "subdir": subdir,
        "depends": list(dict.fromkeys(depends)),
        "constrains": list(dict.fromkeys(constrains)),
    }
    if track_features:
        entry["track_features"] = track_features
    return entry


# ---- the metadata file -------------------------------------------------------------------------------------


def load_metadata(path: Path = METADATA_FILE) -> dict[str, Any]:
    try:
        data = safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ToolError(f"cannot read {path}: {str(exc).splitlines()[0]}; restore it from git") from exc
    if not isinstance(data, dict) or not {"run_exports", "dependencies"} <= set(data):
        raise ToolError(f"{path} needs the lists run_exports and dependencies; restore it from git")
    return data


def run_export_table(metadata: Mapping[str, Any]) -> list[RunExport]:
    table = []
    for entry in metadata["run_exports"]:
        exports = tuple((str(n), _pin(lo), _pin(hi)) for n, lo, hi in entry.get("exports") or ())
        table.append(
            RunExport(
                str(entry["requirement"]),
                str(entry["env"]),
                exports,
                as_written=bool(entry.get("as_written")),
                version_of=_optional(entry.get("version_of")),
                pinned_export=_optional(entry.get("pinned_export")),
                fixed=tuple(str(spec) for spec in entry.get("fixed") or ()),
                solved_version=_optional(entry.get("solved_version")),
            )
        )
    return table


def _pin(value: Any) -> str | None:
    return None if value is None else str(value)


_optional = _pin


# ---- our packages ------------------------------------------------------------------------------------------


def build_subdir_of(feedstock_root: Path, target: str) -> str:
    """The machine CI builds ``target`` on (conda-forge.yml build_platform): cross-python lines need it."""
    settings = read_forge_settings(Feedstock(feedstock_root).forge_yml)
    key = target.replace("-", "_")
    return settings.build_platform.get(key, key).replace("_", "-")


def spec_name(spec: str) -> str:
    return spec.split(maxsplit=1)[0] if spec.split() else ""


def spec_version(spec: str) -> str | None:
    """``"libmagma-devel 2.10.0.*"`` -> ``"2.10.0"``; None when the spec names no single version."""
    words = spec.split()
    if len(words) < 2:
        return None
    match = re.fullmatch(r"=*([0-9][0-9A-Za-z.]*?)(\.\*)?", words[1])
    return match.group(1) if match else None


def applied_run_exports(
    output: RenderedOutput,
    table: Sequence[RunExport],
    siblings: Mapping[str, Sequence[str]],
    pinning: Mapping[str, Any],
    subdir: str,
) -> list[str]:
    """What conda-build adds to ``output``'s run requirements from its build and host environments."""
    ignore_from = {spec_name(s) for s in output.build.get("ignore_run_exports_from") or ()}
    ignore = {spec_name(s) for s in output.build.get("ignore_run_exports") or ()}
    added: list[str] = []
    for env, specs in (("build", output.requirements.build), ("host", output.requirements.host)):
        for spec in specs:
            name = spec_name(spec)
            if name in ignore_from:
                continue
            if env == "host" and name in siblings and name != output.name:
                added += siblings[name]
            for entry in table:
                if entry.env != env or entry.requirement.format(subdir=subdir) != name:
                    continue
                if entry.as_written:
                    added.append(spec)
                    continue
                added += entry.fixed
                if not entry.exports and not entry.pinned_export:
                    continue
                version = _export_version(spec, entry, specs, pinning)
                if version is None:
                    raise ToolError(
                        f"{output.name}: the run_exports of {name} need its version, but the rendering "
                        f"({spec!r}) and the pinning give none; pin {name} in recipe/meta.yaml"
                    )
                if entry.pinned_export:
                    pinned = _pinned_value(pinning, entry.pinned_export, version)
                    added.append(f"{entry.pinned_export} {pinned}")
                for exported, min_pin, max_pin in entry.exports:
                    added.append(f"{exported} {apply_pin_expressions(version, min_pin, max_pin)}".strip())
    return [spec for spec in added if spec_name(spec) not in ignore]


def _export_version(
    spec: str, entry: RunExport, environment: Sequence[str], pinning: Mapping[str, Any]
) -> str | None:
    """The version a run_export is computed from: the requirement's own (rendering, else pinning) or, with
    ``version_of``, the single version the environment's requirement of that name gives."""
    if entry.version_of is None:
        return spec_version(spec) or _pinned_version(pinning, spec_name(spec)) or entry.solved_version
    versions = [spec_version(s) for s in environment if spec_name(s) == entry.version_of]
    return next((v for v in versions if v), None)


def _pinned_value(pinning: Mapping[str, Any], key: str, version: str) -> str:
    """The pinning's value of ``key`` at ``version``: python 3.10 -> "3.10.* *_cpython"."""
    for value in pinning.get(key) or []:
        if spec_version(f"{key} {str(value).split()[0]}") == version:
            return str(value)
    raise ToolError(
        f"conda-forge's pinning has no {key} {version}; pass --pinning with a complete conda-forge-pinning"
    )


def _pinned_version(pinning: Mapping[str, Any], name: str) -> str | None:
    values = pinning.get(name.replace("-", "_")) or []
    return spec_version(f"{name} {values[0]}") if values else None


def pin_run_as_build(run: Sequence[str], host: Sequence[str], config: Mapping[str, Any]) -> list[str]:
    """conda-build's pin_run_as_build: a bare run requirement gets the pins applied to its host version."""
    pins = config.get("pin_run_as_build") or {}
    host_versions = {spec_name(s): spec_version(s) for s in host}
    pinned = []
    for spec in run:
        name = spec_name(spec)
        version = host_versions.get(name)
        if spec.strip() == name and name in pins and version:
            rule = pins[name]
            pinned.append(
                f"{name} {apply_pin_expressions(version, rule.get('min_pin'), rule.get('max_pin'))}"
            )
        else:
            pinned.append(spec)
    return pinned


def package_records(
    feedstock_root: Path,
    recipe_dir: Path,
    configs: Sequence[Configuration],
    *,
    metadata: Mapping[str, Any],
    pinning_dir: Path,
    progress: Progress,
) -> list[Record]:
    """One record per output of every configuration (outputs repeated across configurations once)."""
    table = run_export_table(metadata)
    records: dict[tuple[str, str], Record] = {}
    for index, config in enumerate(configs, start=1):
        target = config.target_platform
        if target not in SUBDIRS:
            raise ToolError(
                f"{config.path.name}: target_platform {target!r} is not a conda subdir "
                f"({', '.join(SUBDIRS[:-1])}); re-render with 'python -m feedstock_tools render-ci'"
            )
        progress(f"rendering {config.path.name} ({index}/{len(configs)})")
        build_subdir = build_subdir_of(feedstock_root, target)
        rendered = render_recipe(recipe_dir, config, build_subdir=build_subdir)
        pinning = pinning_spec(feedstock_root, pinning_dir, target)
        siblings = {o.name: list(o.run_exports) for o in rendered.outputs if o.run_exports}
        for output in rendered.outputs:
            run = pin_run_as_build(output.requirements.run, output.requirements.host, config)
            depends = [*run, *applied_run_exports(output, table, siblings, pinning, target)]
            entry = record(
                output.name,
                output.version,
                output.build_string,
                output.build_number,
                target,
                depends=depends,
                constrains=output.requirements.run_constrained,
                track_features=str(output.build.get("track_features") or ""),
            )
            records.setdefault((target, file_name(entry)), entry)
    return list(records.values())


@cache
def pinning_spec(feedstock_root: Path, pinning_dir: Path, subdir: str) -> Mapping[str, Any]:
    """conda-forge's pinning with the recipe's config and the feedstock's migrations, for ``subdir``
    (noarch reads linux-64's: a noarch record's version is the same everywhere)."""
    lookup = "linux-64" if subdir == "noarch" else subdir
    return combined_spec(feedstock_root, pinning_dir, lookup, environ={})


# ---- the dependencies --------------------------------------------------------------------------------------


def dependency_records(
    metadata: Mapping[str, Any],
    feedstock_root: Path,
    pinning_dir: Path,
    configs: Sequence[Configuration],
) -> list[Record]:
    """The metadata-only records of ``solve_metadata.yaml``'s dependencies, at the pinning's versions."""
    records: list[Record] = []
    for entry in metadata["dependencies"]:
        name = str(entry["name"])
        for subdir in entry["subdirs"]:
            pythons: list[str | None] = [None]
            if entry.get("per_python"):  # compiled per Python: one build for each pinned version
                pythons = list(_values(pinning_spec(feedstock_root, pinning_dir, subdir), "python"))
            for value in _versions(entry, subdir, feedstock_root, pinning_dir, configs):
                if entry.get("pinned_build"):  # python: "3.13.* *_cp313" -> 3.13, the ABI tag _cp313
                    python_version = PythonVersion.parse(value)
                    version, abi = python_version.version, python_version.abi
                else:  # "3.9.* *netlib" -> 3.9, "2.10.0" -> 2.10.0, "sbsa" -> sbsa
                    version, abi = spec_version(f"{name} {value}") or value, ""
                for build in entry["builds"]:
                    if subdir not in build.get("subdirs", [subdir]):
                        continue
                    for python in pythons:
                        records.append(_dependency(name, version, abi, build, subdir=subdir, python=python))
    return records


def _values(spec: Mapping[str, Any], key: str) -> list[str]:
    values = spec.get(key)
    if not values:
        raise ToolError(
            f"conda-forge's pinning has no {key}; pass --pinning with a complete conda-forge-pinning"
        )
    return [str(v) for v in (values if isinstance(values, list) else [values])]


def _versions(
    entry: Mapping[str, Any],
    subdir: str,
    root: Path,
    pinning_dir: Path,
    configs: Sequence[Configuration],
) -> list[str]:
    version = entry["version"]
    if not isinstance(version, Mapping):
        return [str(version)]
    if "pinning" in version:
        return _values(pinning_spec(root, pinning_dir, subdir), str(version["pinning"]))
    values: list[str] = []
    for config in configs:
        for value in config.values_of(str(version["configs"])):
            if value != "None" and value not in values:
                values.append(value)
    return values


def _dependency(
    name: str, version: str, abi: str, build: Mapping[str, Any], *, subdir: str, python: str | None
) -> Record:
    fields = {"version": version, "major": version.split(".", maxsplit=1)[0]}

    def fill(specs: Sequence[str]) -> list[str]:
        return [spec.format(**fields) for spec in specs]

    depends = fill(build.get("depends", []))
    build_string = str(build["build"]) + abi
    if python is not None:
        py_version = PythonVersion.parse(python).version
        depends.append(f"python {apply_pin_expressions(py_version, 'x.x', 'x.x')}")
        build_string = f"py{py_version.replace('.', '')}{build_string}"
    number = int(build_string.rsplit("_", 1)[-1]) if build_string.rsplit("_", 1)[-1].isdigit() else 0
    return record(
        name,
        version,
        build_string,
        number,
        subdir,
        depends=depends,
        constrains=fill(build.get("constrains", [])),
        track_features=str(build.get("track_features", "")),
    )


def build_channel(
    feedstock_root: Path,
    recipe_dir: Path,
    ci_support: Path,
    *,
    pinning_dir: Path,
    progress: Progress,
    metadata_path: Path = METADATA_FILE,
) -> Channel:
    """The recipe's packages and their dependencies; a one-line ToolError when a dependency has no record."""
    metadata = load_metadata(metadata_path)
    configs = config_selector.configurations(ci_support)
    channel = Channel()
    for entry in package_records(
        feedstock_root, recipe_dir, configs, metadata=metadata, pinning_dir=pinning_dir, progress=progress
    ):
        channel.add(entry)
    for entry in dependency_records(metadata, feedstock_root, pinning_dir, configs):
        channel.add(entry)
    missing = missing_dependencies(channel)
    if missing:
        name, wanted_by = next(iter(sorted(missing.items())))
        raise ToolError(
            f"no record of {name} (needed by {wanted_by}); add it to the dependencies of {metadata_path}"
        )
    return channel


def missing_dependencies(channel: Channel) -> dict[str, str]:
    """Names some record depends on that no record (nor a virtual package) provides."""
    provided = {r["name"] for r in channel.all_records()}
    missing: dict[str, str] = {}
    for entry in channel.all_records():
        for spec in entry["depends"]:
            name = spec_name(spec)
            if not name.startswith("__") and name not in provided:
                missing.setdefault(name, f"{entry['name']} {entry['build']}")
    return missing
