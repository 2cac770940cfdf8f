"""The linkage check: every library a staged package's binaries load comes from somewhere it may rely on.

conda-build runs such a check after each output (``conda_build/post.py``, ``check_overlinking_impl``; the
recipe turns its errors on). This is the same idea for the packages the project stages itself (a real wheel
with ``wheel-layout``, every configuration of the rehearsal), read with ``lief``, the library conda-build
reads binaries with:

* ELF: ``DT_NEEDED`` searched in ``DT_RUNPATH`` (else ``DT_RPATH``) with ``$ORIGIN``; Mach-O: the
  ``LC_LOAD_DYLIB`` family with ``@rpath`` (``LC_RPATH``), ``@loader_path`` and absolute install names; PE:
  the import and delay-import tables, searched beside the file and in ``Library/bin`` (the directories
  Windows' loader searches for torch._C's DLLs: see ``_find_in_environment``).
* A needed library resolves, in this order, to a file of the same package or of a package it depends on
  (its run requirements among the staged packages, transitively); to the output's ``missing_dso_whitelist``;
  to the platform's system set (:data:`runtime_libraries.SYSTEM`); to a conda-forge package that is a run
  requirement of the output (:data:`runtime_libraries.PROVIDERS`); and, for an official wheel only, to a
  staging-table decision about a library the wheel bundles (``package_files.Bundled``) or to
  :data:`runtime_libraries.WHEEL_ONLY`.
* Anything else is an error, one line per library: which files need it and where it was expected. A
  library found in a staged package the output does not depend on, or in a conda-forge package that is not
  its run requirement, is an error too (conda-build calls it overlinking). A run requirement whose libraries
  no file loads is a warning (overdepending).
"""

from __future__ import annotations

import fnmatch
import gzip
import json
import os
import posixpath
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from feedstock_tools.common.configuration import Configuration
from feedstock_tools.common.errors import ToolError
from feedstock_tools.proofs.wheels.runtime_libraries import (
    PROVIDERS,
    SHLIB_EXT,
    SYSTEM,
    WHEEL_ONLY,
    Platform,
    Provider,
)
from megabuild import atomic_file, package_files, staging

Format = Literal["ELF", "MachO", "PE"]
# Leading bytes of the files the check reads. Mach-O: 64-bit little-endian and universal ("fat") binaries.
_MAGIC = {b"\x7fELF": "ELF", b"\xcf\xfa\xed\xfe": "MachO", b"\xca\xfe\xba\xbe": "MachO"}


@dataclass(frozen=True)
class BinaryNeeds:
    """What the loader reads from one binary: its format, the libraries it loads and where it looks."""

    format: Format
    needed: tuple[str, ...]
    search_paths: tuple[str, ...] = ()  # ELF: RUNPATH (else RPATH) entries; Mach-O: LC_RPATH entries


def binary_format(head: bytes) -> Format | None:
    if head[:2] == b"MZ":
        return "PE"
    return _MAGIC.get(head[:4])  # type: ignore[return-value]


def parse_binary(data: bytes | Path) -> BinaryNeeds | None:
    """Read a binary's needs with lief; None for a file that is no ELF, Mach-O or PE binary.

    Only the load commands and dynamic section are parsed (symbols, relocations and signatures left out):
    about half the time on libtorch_cuda.so (docs/records/2026-11-28-ci-time.md)."""
    import lief  # a dev requirement (requirements-dev.txt); imported here so --help works without it

    lief.logging.disable()
    form = binary_format(data[:4] if isinstance(data, bytes) else _head(data))
    parser = {"ELF": _parse_elf, "MachO": _parse_macho, "PE": _parse_pe}.get(form or "")
    return parser(lief, data if isinstance(data, bytes) else str(data)) if parser else None


def _parse_elf(lief: Any, source: bytes | str) -> BinaryNeeds | None:
    config = lief.ELF.ParserConfig()
    for part in ("relocations", "dyn_symbols", "symtab_symbols", "symbol_versions", "notes", "overlay"):
        setattr(config, f"parse_{part}", False)
    elf = lief.ELF.parse(source, config)
    if elf is None:
        return None
    tags = lief.ELF.DynamicEntry.TAG
    runpath = [e.runpath for e in elf.dynamic_entries if e.tag == tags.RUNPATH]
    rpath = [e.rpath for e in elf.dynamic_entries if e.tag == tags.RPATH]
    # glibc's ld.so ignores DT_RPATH when DT_RUNPATH is present
    paths = [p for entry in (runpath or rpath) for p in entry.split(":") if p]
    return BinaryNeeds("ELF", tuple(elf.libraries), tuple(paths))


def _parse_macho(lief: Any, source: bytes | str) -> BinaryNeeds | None:
    fat = lief.MachO.parse(source, lief.MachO.ParserConfig.quick)
    if fat is None:
        return None
    macho = fat.at(0)  # a universal binary's slices load the same libraries
    own_id = lief.MachO.LoadCommand.TYPE.ID_DYLIB
    needed = tuple(lib.name for lib in macho.libraries if lib.command != own_id)
    return BinaryNeeds("MachO", needed, tuple(command.path for command in macho.rpaths))


def _parse_pe(lief: Any, source: bytes | str) -> BinaryNeeds | None:
    config = lief.PE.ParserConfig()
    config.parse_signature = config.parse_rsrc = config.parse_reloc = config.parse_exceptions = False
    pe = lief.PE.parse(source, config)
    if pe is None:
        return None
    names = [imported.name for imported in pe.imports] + [imported.name for imported in pe.delay_imports]
    return BinaryNeeds("PE", tuple(dict.fromkeys(names)))


def _head(path: Path) -> bytes:
    with path.open("rb") as handle:
        return handle.read(4)


def read_binary(path: Path) -> BinaryNeeds | None:
    """The real reader: a regular file whose first bytes are a binary's, parsed with lief."""
    if path.is_symlink() or not path.is_file() or binary_format(_head(path)) is None:
        return None
    return parse_binary(path)


BinaryReader = Callable[[Path], "BinaryNeeds | None"]


# ---- needs lists: the load commands of a wheel's binaries, a small test fixture ---------------------------


def wheel_needs(wheel: Path) -> Iterator[tuple[str, BinaryNeeds]]:
    """Every binary member of ``wheel`` with its needs (read from the zip, nothing extracted)."""
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            if member.is_dir() or member.file_size < 64:
                continue
            with archive.open(member) as handle:
                if binary_format(handle.read(4)) is None:
                    continue
            needs = parse_binary(archive.read(member))
            if needs is not None:
                yield member.filename, needs


def write_needs_list(entries: Iterable[tuple[str, BinaryNeeds]], destination: Path, header: str) -> int:
    """One JSON array per binary: path, format, search paths, needed libraries (gzipped for .gz)."""
    rows = [json.dumps([path, n.format, list(n.search_paths), list(n.needed)]) for path, n in entries]
    lines = [
        f"# {header}",
        "# One binary per line: [path in the wheel, format, RUNPATH/RPATH or LC_RPATH entries, needed].",
        "# Written by: python -m feedstock_tools wheel-layout WHEEL --needs-list THIS_FILE",
        *rows,
    ]
    data = ("\n".join(lines) + "\n").encode()
    if destination.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    atomic_file.write_bytes(destination, data)
    return len(rows)


def read_needs_list(path: Path) -> dict[str, BinaryNeeds]:
    data = path.read_bytes()
    text = (gzip.decompress(data) if path.suffix == ".gz" else data).decode()
    needs = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, form, search, needed = json.loads(line)
            needs[name] = BinaryNeeds(form, tuple(needed), tuple(search))
    return needs


@dataclass(frozen=True)
class StagedWheelNeeds:
    """A reader (``read_binary``'s shape) for a wheel staged into packages without its binaries' contents
    (a skeleton of the wheel's file list): a staged file's needs are those of the wheel member it came from,
    as a needs list records them (``$PREFIX/lib/x`` was ``torch/lib/x``, ``$SP_DIR/y`` was ``y``,
    win-64's ``Library/bin/x`` was ``torch/lib/x``: the staging table)."""

    needs: Mapping[str, BinaryNeeds]
    packages: Path  # the folder of the staged packages, one subfolder each
    site_packages: str

    def __call__(self, path: Path) -> BinaryNeeds | None:
        if path.is_symlink():
            return None
        relative = path.relative_to(self.packages).as_posix().split("/", 1)[1]
        if relative.startswith("Library/bin/"):
            member = "torch/lib/" + relative.removeprefix("Library/bin/")
        elif relative.startswith(self.site_packages + "/"):
            member = relative.removeprefix(self.site_packages + "/")
        else:
            member = f"torch/{relative}"
        return self.needs.get(member)


# ---- what a package may rely on ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PackageSpec:
    """One staged package as the recipe renders it for the configuration."""

    name: str
    prefix: Path
    run: tuple[str, ...]  # run requirement names (explicit and from run_exports)
    allowlist: tuple[str, ...] = ()  # build/missing_dso_whitelist patterns


def run_requirements(
    output_run: Iterable[str],
    build_host: Iterable[str],
    ignored_from: Iterable[str],
    ignored: Iterable[str],
    platform: Platform,
) -> tuple[str, ...]:
    """An output's run requirement names: its explicit ones, and what its build and host requirements add
    through run_exports (per :data:`PROVIDERS`), less ``ignore_run_exports(_from)``."""
    ignored_from, ignored = set(ignored_from), set(ignored)
    exporters = [name for name in build_host if name not in ignored_from]
    exported = [
        provider.package
        for provider in PROVIDERS
        if platform in provider.platforms
        and provider.package not in ignored
        and any(fnmatch.fnmatchcase(name, pattern) for name in exporters for pattern in provider.exported_by)
    ]
    return tuple(dict.fromkeys([*output_run, *exported]))


# ---- the check --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Resolution:
    kind: Literal["package", "allowlist", "run requirement", "system", "wheel decision"]
    source: str  # the package, pattern, run requirement or decision that provides it


@dataclass
class LinkageReport:
    binaries: int = 0
    needs: int = 0
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # wheel decisions used: decision text -> files resolved by it
    decisions: dict[str, list[str]] = field(default_factory=dict)

    def raise_for_errors(self) -> None:
        if self.errors:
            others = (
                f" (and {len(self.errors) - 1} more: {'; '.join(self.errors[1:3])})"
                if self.errors[1:]
                else ""
            )
            raise ToolError(
                f"{self.errors[0]}{others}: ship the library in that package, or add the package that "
                "provides it as a run requirement (feedstock_tools/proofs/wheels/runtime_libraries.py)"
            )


@dataclass
class _Need:
    package: str
    file: str  # relative to the environment
    library: str


class LinkageCheck:
    """Check packages staged into separate prefixes, as they would be installed into one environment."""

    def __init__(
        self,
        packages: Sequence[PackageSpec],
        platform: Platform,
        *,
        wheel: bool = False,
        reader: BinaryReader = read_binary,
        machine_runtime: tuple[str, ...] = (),
    ) -> None:
        """``wheel``: accept the staging table's bundled-library decisions (an official wheel's binaries);
        ``machine_runtime``: library names this machine's compiler runtime provides (the rehearsal compiles
        with the machine's gcc, standing in for conda-forge's compiler runtime packages)."""
        self.packages = {spec.name: spec for spec in packages}
        self.platform = platform
        self.wheel = wheel
        self.reader = reader
        self.machine_runtime = machine_runtime
        self.owner: dict[str, str] = {}  # path relative to the environment -> package
        self.links: dict[str, str] = {}  # symlink path -> its target, relative to the environment
        for spec in packages:
            for entry in staging.entries_below(spec.prefix):
                relative = entry.relative_to(spec.prefix).as_posix()
                self.owner[relative] = spec.name
                if entry.is_symlink():
                    self.links[relative] = posixpath.normpath(
                        posixpath.join(posixpath.dirname(relative), os.readlink(entry))
                    )

    def depends_on(self, name: str) -> set[str]:
        """The package and the staged packages it needs at run time, transitively."""
        seen, todo = {name}, [name]
        while todo:
            for requirement in self.packages[todo.pop()].run:
                if requirement in self.packages and requirement not in seen:
                    seen.add(requirement)
                    todo.append(requirement)
        return seen

    def run(self, checked: Collection[str] | None = None) -> LinkageReport:
        """Check the binaries of the ``checked`` packages (default: all); the others only provide files."""
        report = LinkageReport()
        missing: dict[tuple[str, str], list[_Need]] = {}
        checked = set(self.packages if checked is None else checked)
        used: dict[str, set[str]] = {name: set() for name in checked}
        for name, spec in self.packages.items():
            if name not in checked:
                continue
            for entry in staging.entries_below(spec.prefix):
                needs = self.reader(entry)
                if needs is None:
                    continue
                report.binaries += 1
                relative = entry.relative_to(spec.prefix).as_posix()
                for library in needs.needed:
                    report.needs += 1
                    outcome = self._resolve(name, relative, library, needs)
                    if isinstance(outcome, str):
                        need = _Need(name, relative, library)
                        missing.setdefault((_base(library), outcome), []).append(need)
                    elif outcome.kind == "run requirement":
                        used[name].add(outcome.source)
                    elif outcome.kind == "wheel decision":
                        report.decisions.setdefault(outcome.source, []).append(f"{name}:{relative}")
        for (library, problem), needers in missing.items():
            files = ", ".join(f"{need.package}:{need.file}" for need in needers[:3])
            more = f" and {len(needers) - 3} more" if len(needers) > 3 else ""
            report.errors.append(f"{files}{more} need(s) {library}: {problem}")
        for name in checked:
            unused = [
                requirement
                for requirement in self.packages[name].run
                if (provider := self._provider(requirement)) is not None
                and requirement not in used[name]
                and not any(library in self.machine_runtime for library in provider.libraries)
            ]
            if unused:
                report.warnings.append(
                    f"{name}: no file loads a library of run requirement(s) {', '.join(unused)} "
                    "(overdepending)"
                )
        return report

    # ---- resolving one need ----------------------------------------------------------------------------

    def _resolve(self, package: str, file: str, library: str, needs: BinaryNeeds) -> Resolution | str:
        """How the loader satisfies this need, or the problem (text) that makes it an error."""
        found = self._find_in_environment(file, library, needs)
        steps = (self._in_packages, self._in_allowlist, self._in_system, self._in_run_requirements)
        for step in steps:
            outcome = step(package, library, found)
            if outcome is not None:
                return outcome
        decision = _wheel_decision(_base(library), self.platform) if self.wheel else None
        if decision is not None:
            return Resolution("wheel decision", decision)
        return f"no package provides it ({self._expected(_base(library), package)})"

    def _in_packages(self, package: str, library: str, found: str | None) -> Resolution | str | None:
        if found is None:
            return None
        if self.owner[found] in self.depends_on(package):
            return Resolution("package", self.owner[found])
        if self._allowed(package, library, found):
            return None  # the allow-list step names it
        return f"found in {self.owner[found]} ({found}), which {package} does not depend on (overlinking)"

    def _in_allowlist(self, package: str, library: str, found: str | None) -> Resolution | None:
        pattern = self._allowed(package, library, found)
        return Resolution("allowlist", pattern) if pattern else None

    def _allowed(self, package: str, library: str, found: str | None) -> str:
        """The output's missing_dso_whitelist pattern matching the need, as conda-build matches it: the
        prefix-relative path when found, else the name behind conda-build's unresolved ``$RPATH/``."""
        candidates = (found or "", f"$RPATH/{_base(library)}", library)
        for pattern in self.packages[package].allowlist:
            if any(fnmatch.fnmatch(candidate, pattern) for candidate in candidates):
                return pattern
        return ""

    def _in_system(self, package: str, library: str, found: str | None) -> Resolution | str | None:
        if self._is_system(library) or _base(library) in self.machine_runtime:
            return Resolution("system", library)
        if self.platform == "osx" and library.startswith("/"):
            return f"an absolute install name outside the environment and the macOS system ({package})"
        return None

    def _in_run_requirements(self, package: str, library: str, found: str | None) -> Resolution | str | None:
        base = _base(library)
        for provider in PROVIDERS:
            if self.platform not in provider.platforms:
                continue
            if _matches(base, provider.libraries, self._case_sensitive):
                if provider.package in self.packages[package].run:
                    return Resolution("run requirement", provider.package)
                return (
                    f"conda-forge's {provider.package} provides it, but it is not a run requirement of "
                    f"{package} (overlinking)"
                )
        return None

    def _find_in_environment(self, file: str, library: str, needs: BinaryNeeds) -> str | None:
        """The environment path the loader would find ``library`` at, among the staged files."""
        directory = posixpath.dirname(file)
        candidates: list[str] = []
        if needs.format == "ELF":
            if "/" in library:
                candidates.append(posixpath.join(directory, library))
            else:
                candidates += [
                    posixpath.join(self._expand(p, directory), library) for p in needs.search_paths
                ]
        elif needs.format == "MachO":
            if library.startswith("@rpath/"):
                rest = library.removeprefix("@rpath/")
                candidates += [posixpath.join(self._expand(p, directory), rest) for p in needs.search_paths]
            elif library.startswith(("@loader_path/", "@executable_path/")):
                candidates.append(posixpath.join(directory, library.split("/", 1)[1]))
        else:
            # PE: beside the file, then conda's Library/bin. Not through PATH: CPython loads an extension
            # module with LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR (python/cpython
            # 003b808e Python/dynload_win.c, bpo-36085), which searches the module's own directory and those
            # added with os.add_dll_directory; 2.13.0's torch/__init__.py adds sys.exec_prefix/Library/bin
            # before it imports torch._C (the win_amd64 wheel's torch/__init__.py lines 175, 241-242, 445)
            candidates += [posixpath.join(directory, library), posixpath.join("Library/bin", library)]
        for candidate in candidates:
            resolved = self._resolve_links(posixpath.normpath(candidate))
            if resolved is not None:
                return resolved
        return None

    @staticmethod
    def _expand(search_path: str, directory: str) -> str:
        for token in ("$ORIGIN", "${ORIGIN}", "@loader_path", "@executable_path"):
            search_path = search_path.replace(token, directory or ".")
        return search_path

    def _resolve_links(self, path: str) -> str | None:
        """``path`` if a staged package has it; through staged directory symlinks (torch/lib -> lib)."""
        for _ in range(40):  # a link cycle is not a library
            if path.startswith("/") or path.startswith(".."):
                return None
            if path in self.owner and path not in self.links:
                return path
            if path in self.links:
                path = self.links[path]
                continue
            parts = path.split("/")
            for index in range(1, len(parts)):
                head = "/".join(parts[:index])
                if head in self.links:
                    path = posixpath.normpath(posixpath.join(self.links[head], *parts[index:]))
                    break
            else:
                return None
        return None

    @property
    def _case_sensitive(self) -> bool:
        """Windows' loader compares DLL names without case (the wheel imports MSVCP140.dll, vc14_runtime
        ships msvcp140.dll); ELF and Mach-O loaders compare bytes."""
        return self.platform != "win"

    def _is_system(self, library: str) -> bool:
        system = SYSTEM[self.platform]
        if self.platform == "osx":
            return library.startswith("/") and _matches(library, system)
        return _matches(_base(library), system, self._case_sensitive)

    def _provider(self, package: str) -> Provider | None:
        return next((p for p in PROVIDERS if p.package == package and self.platform in p.platforms), None)

    def _expected(self, library: str, package: str) -> str:
        """The package the staging table would put ``library`` into, from its install-tree rules."""
        shlib = SHLIB_EXT[self.platform]
        for rule in package_files.rules_for(shlib):
            if staging.rule_claims(rule, "install", f"lib/{library}", shlib) and rule.action == "copy":
                return f"expected in {rule.package}, by the staging rule {rule.pattern!r}"
        return f"expected from a run requirement of {package}"


def _base(library: str) -> str:
    return library.replace("\\", "/").rsplit("/", 1)[-1]


def _matches(name: str, patterns: Iterable[str], case_sensitive: bool = True) -> bool:
    match = fnmatch.fnmatchcase if case_sensitive else fnmatch.fnmatch
    if not case_sensitive:
        name = name.lower()
        patterns = [p.lower() for p in patterns]
    return any(match(name, pattern) for pattern in patterns)


def _wheel_decision(library: str, platform: Platform) -> str | None:
    """The decision that accepts a wheel binary's need of a library the conda build does not ship."""
    shlib = SHLIB_EXT[platform]
    for rule in package_files.rules_for(shlib):
        if rule.bundled is not None and staging.rule_claims(rule, "install", f"lib/{library}", shlib):
            return _describe_bundled(rule.bundled)
    for wheel_only in WHEEL_ONLY:
        if _matches(library, wheel_only.libraries):
            return f"{wheel_only.what}: absent in the conda build ({wheel_only.evidence})"
    return None


def _describe_bundled(bundled: Any) -> str:
    """``package_files.Bundled`` as one phrase: the library and what the conda build has instead."""
    instead = f"{bundled.decision}: {bundled.conda_package}" if bundled.conda_package else bundled.decision
    return f"{bundled.library} -> {instead}"


# ---- the recipe's view of the packages -------------------------------------------------------------------


def recipe_packages(
    recipe_dir: Path,
    config: Configuration | Path,
    prefixes: Mapping[str, Path],
    python: str,
    platform: Platform,
) -> list[PackageSpec]:
    """Each staged package with the run requirements and ``missing_dso_whitelist`` that ``recipe_dir``'s
    output of that name has for ``config`` (a ``.ci_support`` configuration, or its file); per-Python
    outputs for ``python``."""
    from feedstock_tools.conda.recipe_render import render_recipe

    rendered = render_recipe(recipe_dir, config)
    specs = []
    for name, prefix in prefixes.items():
        outputs = rendered.by_name(name)
        # the Python of the wheel; of the linalg builds the one without MAGMA, which no wheel links
        matching = sorted(
            (o for o in outputs if str(o.variant.get("python", python)).startswith(python)),
            key=lambda o: o.variant.get("magma_variant") == "magma",
        )
        if not matching:
            raise ToolError(
                f"the recipe builds no {name} for Python {python} with {config.name}: pass the "
                "--config of the wheel's platform and CUDA version"
            )
        output = matching[0]
        build = output.build
        names = output.requirements.names
        linkage = Linkage(
            names("run"),
            [*names("build"), *names("host")],
            [spec.split()[0] for spec in build.get("ignore_run_exports_from") or []],
            [spec.split()[0] for spec in build.get("ignore_run_exports") or []],
            build.get("missing_dso_whitelist") or [],
        )
        specs.append(package_spec(name, prefix, linkage, platform))
    return specs


@dataclass(frozen=True)
class Linkage:
    """What a rendered output says about its linkage: requirement names and build-section settings."""

    run: Sequence[str]
    build_and_host: Sequence[str]
    ignore_run_exports_from: Sequence[str]
    ignore_run_exports: Sequence[str]
    missing_dso_whitelist: Sequence[str]


def package_spec(name: str, prefix: Path, output: Linkage, platform: Platform) -> PackageSpec:
    """The package as the check sees it: its run requirements (explicit and run-exported), its allow-list."""
    run = run_requirements(
        output.run, output.build_and_host, output.ignore_run_exports_from, output.ignore_run_exports, platform
    )
    return PackageSpec(name, prefix, run, tuple(output.missing_dso_whitelist))


def format_report(report: LinkageReport) -> str:
    lines = [f"linkage: {report.needs} needed libraries of {report.binaries} binaries resolved"]
    if report.decisions:
        lines.append("needs of the wheel's binaries accepted by a bundled-library decision:")
        for decision, needers in report.decisions.items():
            files = list(dict.fromkeys(needers))
            shown = ", ".join(files[:3]) + (", ..." if files[3:] else "")
            lines.append(f"  {decision} ({len(needers)} needs of {shown})")
    lines += [f"warning: {warning}" for warning in report.warnings]
    return "\n".join(lines)
