"""What the solver should install, by rules stated once and evaluated on the recipe's own packages.

solve-check compares the real solver's pick (py-rattler) with an expectation computed here without any
solver: the recipe's builds are read off the channel's records of its own packages (subdir, flavour, BLAS,
arm variant, ``__cuda_arch`` bound, glibc floor, build number, Pythons), the machine's facts off its virtual
packages, and these rules decide:

1. **A GPU build fits a machine** whose driver (``__cuda``) is of the build's CUDA major or newer (a driver
   runs every toolkit of its major and older: cuda-version constrains ``__cuda >=<major>``), whose GPU meets
   the build's oldest architecture where the machine reports one (``__cuda_arch``, CEP 46; a client that
   does not detect it installs any), whose glibc meets the build's floor and its CUDA libraries' (cuDSS's
   records), and whose arm variant is the build's: the one the user installed (``arm-variant * tegra`` on a
   Jetson), else ``sbsa`` (tegra carries a track_feature).
2. **The highest build number wins** among the builds a request allows: the recipe's offsets rank a CUDA
   build above the CPU one, the newer CUDA above the older, MKL above generic BLAS, the MAGMA linalg above
   the other. So a GPU gets the newest CUDA build that fits it, and a machine no GPU build fits (no driver,
   an old GPU, an old glibc) the CPU build.
3. **A request narrows the builds**: ``nomkl`` to generic BLAS, a ``libtorch-cuda-linalg`` build glob to
   the linalg builds it matches, a constraint ``X <0a0`` to builds that need no X (a Windows CUDA build
   links MAGMA into torch, so it needs libmagma), ``python X.Y.*`` to builds for that Python; a request for
   ``libtorch`` alone installs no Python.
4. **What cannot be installed fails**, with the reason the solver gives, in the order it meets them: a
   package the subdir has no record of, no driver, a driver too old, a glibc too old, a GPU too old, an
   excluded package a build needs.
5. **A CUDA build's host** (its ``cuda-version X.Y.*`` and the CUDA libraries it asks for) solves where, in
   this order, the subdir has those libraries (else "No candidates were found"), the dependencies hold one of
   that CUDA major for the machine's arm variant (else the solver names the ``cuda-version`` range of the one
   it has: a Jetson has no CUDA 13 cuDSS), the machine's driver, where it has one, is of that major or newer
   (cuda-version constrains ``__cuda >=<major>``), and its glibc meets those libraries' floor.

Each request of ``solve_requests.yaml`` names its rule (``torch``, ``cpu``, ``gpu``, ``cpu and gpu``,
``host``); a name or spec with ``{python}`` is asked once per Python the recipe builds, ``{cuda}`` once per
CUDA configuration (its cuda-version and arm variant) on the machine that stands for its build machine, and
``{cuda_version}`` once per CUDA version the recipe builds on every machine of the table (not the arch
machines, which differ from theirs in ``__cuda_arch`` only, which no host package reads). The words of an
expectation are solve_check's (``cuda130 mkl magma py312``, ``fails: TEXT``, ``solves``).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from feedstock_tools.common.configuration import version_key
from feedstock_tools.common.errors import ToolError
from megabuild import package_files

LIBTORCH, LINALG, PYTORCH = package_files.PACKAGES
CPU, GPU = package_files.PYTORCH_CPU, package_files.PYTORCH_GPU
PYTHON_FIELD, CUDA_FIELD, CUDA_VERSION_FIELD = "{python}", "{cuda}", "{cuda_version}"
Version = tuple[int, ...]


@dataclass(frozen=True)
class Build:
    """One libtorch build of the recipe (each pytorch, linalg and metapackage build follows its libtorch)."""

    subdir: str
    flavour: str  # "cpu" / "cuda130"
    blas: str
    number: int
    cuda: Version | None  # (13, 0)
    arm: str | None  # "sbsa" / "tegra" for linux-aarch64 CUDA builds
    arch: Version | None  # its __cuda_arch bound: the oldest GPU architecture it has code for
    glibc: Version | None  # its own __glibc floor
    magma_in_torch: bool  # libtorch itself needs libmagma (Windows: no linalg package)
    pythons: frozenset[str]  # "3.12", the Pythons its pytorch builds are for


@dataclass(frozen=True)
class Facts:
    """What the rules read of the recipe's packages and their dependencies."""

    builds: tuple[Build, ...]
    names: Mapping[str, frozenset[str]]  # subdir -> the package names it has records of (noarch included)
    linalg: frozenset[str]  # subdirs with a libtorch-cuda-linalg package
    cuda_glibc: Mapping[tuple[str, str | None, int], Version]  # (subdir, arm, major) -> CUDA libraries' floor
    # (subdir, arm, major) -> the cuda-version specs of the CUDA libraries' records of that major
    cuda_libraries: Mapping[tuple[str, str | None, int], frozenset[str]]
    constrains: Mapping[str, tuple[str, ...]]  # package -> what its records constrain (nomkl: mkl <0.a0)
    architectures: tuple[str, ...]  # every GPU architecture the recipe names, oldest first

    @property
    def pythons(self) -> list[str]:
        found = {python for build in self.builds for python in build.pythons}
        return sorted(found, key=version_key)

    def cuda_configurations(self) -> list[tuple[str, str, str | None]]:
        """(subdir, CUDA version, arm variant) of every CUDA build, in order."""
        found = {(b.subdir, ".".join(map(str, b.cuda)), b.arm) for b in self.builds if b.cuda}
        return sorted(found, key=lambda c: (c[0], version_key(c[1]), c[2] or ""))

    def cuda_versions(self) -> list[str]:
        """Every CUDA version the recipe builds for, oldest first."""
        return sorted({cuda for _, cuda, _ in self.cuda_configurations()}, key=version_key)

    def summary(self) -> list[str]:
        """One line per subdir: its builds (BLAS variants, arm variant, __cuda_arch bound) and Pythons."""
        lines = []
        for subdir in sorted({b.subdir for b in self.builds}):
            builds = sorted((b for b in self.builds if b.subdir == subdir), key=lambda b: b.number)
            kinds: dict[tuple[str, str | None, Version | None], list[str]] = {}
            for b in sorted(builds, key=lambda b: (b.cuda or (0,), b.arm or "")):
                kinds.setdefault((b.flavour, b.arm, b.arch), []).append(b.blas)
            shown = [
                f"{flavour}{' ' + arm if arm else ''} ({', '.join(sorted(blas))}"
                + (f"; __cuda_arch >={_dotted(arch)}" if arch else "")
                + ")"
                for (flavour, arm, arch), blas in kinds.items()
            ]
            pythons = sorted({p for b in builds for p in b.pythons}, key=version_key)
            lines.append(f"{subdir}: {', '.join(shown)}; Pythons {' '.join(pythons)}")
        return lines

    def bounds(self, subdir: str, arm: str | None) -> list[str]:
        """The __cuda_arch bounds of the CUDA builds of a subdir and arm variant, oldest first."""
        found = {b.arch for b in self.builds if b.subdir == subdir and b.arm == arm and b.arch}
        return [".".join(map(str, arch)) for arch in sorted(found)]


@dataclass(frozen=True)
class MachineFacts:
    subdir: str
    driver: Version | None  # __cuda
    arch: Version | None  # __cuda_arch
    glibc: Version | None  # __glibc (None: not Linux)
    arm: str | None  # the arm variant its builds must have (linux-aarch64)
    installed_arm: str | None  # the arm-variant the user installed (it stays in every solve)

    @classmethod
    def of(cls, subdir: str, virtual: Iterable[str], installed: Iterable[str]) -> MachineFacts:
        versions = {text.split("=")[0]: version_key(text.split("=")[1]) for text in virtual if "=" in text}
        installed_arm = next(
            (spec.split()[-1] for spec in installed if spec.split()[0] == "arm-variant"), None
        )
        default_arm = "sbsa" if subdir == "linux-aarch64" else None
        return cls(
            subdir,
            versions.get("__cuda"),
            versions.get("__cuda_arch"),
            versions.get("__glibc"),
            installed_arm or default_arm,
            installed_arm,
        )


# ---- the facts, read off the channel's records ---------------------------------------------------------


def _bound(specs: Iterable[str], name: str) -> Version | None:
    """The lower bound of ``name >=X`` among ``specs`` (``__cuda_arch >=7.5`` -> (7, 5))."""
    for spec in specs:
        match = re.fullmatch(rf"{re.escape(name)} >=([0-9.]+)(?:,.*)?", spec)
        if match:
            return version_key(match[1])
    return None


def _arm(depends: Iterable[str]) -> str | None:
    return next((spec.split()[-1] for spec in depends if spec.split()[0] == "arm-variant"), None)


def facts_of(records: Iterable[Mapping[str, object]], architectures: Sequence[str]) -> Facts:
    """The recipe's builds and what the rules need of the dependencies, from a solve channel's records."""
    records = list(records)
    pythons: dict[tuple[str, str], set[str]] = {}
    for entry in records:
        if entry["name"] == PYTORCH:
            flavour, blas, py = str(entry["build"]).split("_")[:3]
            arm = _arm(entry["depends"])  # type: ignore[arg-type]
            pythons.setdefault((str(entry["subdir"]), f"{flavour}_{blas}_{arm}"), set()).add(
                f"{py[2]}.{py[3:]}"
            )
    builds = []
    for entry in records:
        if entry["name"] != LIBTORCH:
            continue
        depends, constrains = list(entry["depends"]), list(entry["constrains"])  # type: ignore[call-overload]
        flavour, blas = str(entry["build"]).split("_")[:2]
        subdir, arm = str(entry["subdir"]), _arm(depends)
        builds.append(
            Build(
                subdir,
                flavour,
                blas,
                int(entry["build_number"]),  # type: ignore[call-overload]
                _bound(depends, "cuda-version"),
                arm,
                _bound(constrains, "__cuda_arch"),
                _bound(depends, "__glibc"),
                any(spec.split()[0] == "libmagma" for spec in depends),
                frozenset(pythons.get((subdir, f"{flavour}_{blas}_{arm}"), ())),
            )
        )
    names: dict[str, set[str]] = {}
    for entry in records:
        names.setdefault(str(entry["subdir"]), set()).add(str(entry["name"]))
    noarch = names.pop("noarch", set())
    cuda_glibc: dict[tuple[str, str | None, int], Version] = {}
    cuda_libraries: dict[tuple[str, str | None, int], set[str]] = {}
    for entry in records:
        depends = list(entry["depends"])  # type: ignore[call-overload]
        cuda, glibc = _bound(depends, "cuda-version"), _bound(depends, "__glibc")
        if entry["name"] in package_files.PACKAGES or cuda is None:
            continue
        key = (
            str(entry["subdir"]),
            _arm(depends) or ("sbsa" if entry["subdir"] == "linux-aarch64" else None),
            cuda[0],
        )
        cuda_libraries.setdefault(key, set()).update(s for s in depends if s.split()[0] == "cuda-version")
        if glibc is not None:
            cuda_glibc[key] = max(glibc, cuda_glibc.get(key, glibc))
    constrains: dict[str, tuple[str, ...]] = {}
    for entry in records:
        constrains[str(entry["name"])] = tuple(entry["constrains"])  # type: ignore[arg-type]
    return Facts(
        tuple(builds),
        {subdir: frozenset(found | noarch) for subdir, found in names.items()},
        frozenset(str(e["subdir"]) for e in records if e["name"] == LINALG),
        cuda_glibc,
        {key: frozenset(specs) for key, specs in cuda_libraries.items()},
        constrains,
        tuple(architectures),
    )


# ---- the rules -------------------------------------------------------------------------------------------


def _dotted(version: Version) -> str:
    return ".".join(map(str, version))


@dataclass(frozen=True)
class Asked:
    """What a request asks, as the rules read its specs and constraints."""

    names: tuple[str, ...]  # the packages it names, in order
    python: str | None  # "3.12" of a "python 3.12.*" spec
    generic_only: bool  # nomkl
    linalg: frozenset[str]  # the linalg kinds its libtorch-cuda-linalg glob admits ({"magma", "nomagma"})
    excluded: Mapping[str, str]  # package -> the constraint that excludes it ("libmagma <0a0")
    cuda: Version | None = None  # (12, 9) of a "cuda-version 12.9.*" spec (a CUDA build's host)
    arm: str | None = None  # "tegra" of an "arm-variant * tegra" spec

    @classmethod
    def of(cls, specs: Sequence[str], constraints: Sequence[str]) -> Asked:
        names = tuple(spec.split()[0] for spec in specs)
        python = next((m[1] for spec in specs if (m := re.fullmatch(r"python (\d+\.\d+)\.\*", spec))), None)
        cuda = next(
            (
                version_key(m[1])
                for spec in specs
                if (m := re.fullmatch(r"cuda-version (\d+\.\d+)\.\*", spec))
            ),
            None,
        )
        arm = next((m[1] for spec in specs if (m := re.fullmatch(r"arm-variant \* (\w+)", spec))), None)
        linalg = {"magma", "nomagma"}
        for spec in specs:
            words = spec.split()
            if words[0] == LINALG and len(words) == 3:
                linalg = {kind for kind in linalg if fnmatch.fnmatch(f"x_x_{kind}_h0_0", words[2])}
        excluded = {
            c.split()[0]: c for c in constraints if len(c.split()) == 2 and c.split()[1] in ("<0a0", "<0.a0")
        }
        return cls(names, python, "nomkl" in names, frozenset(linalg), excluded, cuda, arm)


def _needs(build: Build, asked: Asked, linalg: bool) -> list[str]:
    """The packages a build needs that the request excludes."""
    needs = {"libmagma"} if build.magma_in_torch else set()
    if build.cuda and linalg and asked.linalg == {"magma"}:
        needs.add("libmagma")
    return [asked.excluded[name] for name in sorted(needs) if name in asked.excluded]


def _gpu_builds(machine: MachineFacts, facts: Facts, asked: Asked) -> tuple[list[Build], str]:
    """The CUDA builds that fit the machine and the request; where none does, why (in the solver's words)."""
    standing = [b for b in facts.builds if b.subdir == machine.subdir and b.cuda and b.arm == machine.arm]
    if asked.generic_only:
        standing = [b for b in standing if b.blas == "generic"]
    if asked.python:
        standing = [b for b in standing if asked.python in b.pythons]
    if machine.driver is None:
        return [], "__cuda *, for which no candidates were found"
    steps = (
        (lambda b: b.cuda[0] <= machine.driver[0], "__cuda >="),  # type: ignore[index]
        (lambda b: machine.glibc is None or machine.glibc >= _glibc_floor(b, facts), "__glibc >="),
        (lambda b: machine.arch is None or b.arch is None or machine.arch >= b.arch, "__cuda_arch"),
    )
    for fits, why in steps:
        kept = [b for b in standing if fits(b)]
        if standing and not kept:
            if why == "__glibc >=":
                return [], f"__glibc >={_dotted(min(_glibc_floor(b, facts) for b in standing))}"
            if why == "__cuda >=":
                return [], f"__cuda >={min(b.cuda[0] for b in standing)}"  # type: ignore[index]
            return [], why
        standing = kept
    linalg = machine.subdir in facts.linalg
    kept = [b for b in standing if not _needs(b, asked, linalg)]
    if standing and not kept:
        return [], f"the constraint {_needs(standing[0], asked, linalg)[0]} cannot be fulfilled"
    return kept, "" if kept else "__cuda"


def _glibc_floor(build: Build, facts: Facts) -> Version:
    """A CUDA build's glibc floor: its own, or its CUDA libraries' (cuDSS's records) where higher."""
    own = build.glibc or (0,)
    libraries = facts.cuda_glibc.get((build.subdir, build.arm, build.cuda[0]), (0,))  # type: ignore[index]
    return max(own, libraries)


def _words(build: Build, machine: MachineFacts, facts: Facts, asked: Asked) -> str:
    words = [build.flavour, build.blas]
    if build.cuda and machine.subdir in facts.linalg:
        words.append("magma" if "magma" in asked.linalg and "libmagma" not in asked.excluded else "nomagma")
    elif build.cuda and build.magma_in_torch:
        words.append("libmagma")
    if asked.python:
        words.append("py" + asked.python.replace(".", ""))
    elif LIBTORCH in asked.names and PYTORCH not in asked.names:
        words.append("nopython")
    arm = machine.installed_arm or build.arm
    if arm:
        words.append(arm)
    return " ".join(words)


def _missing(machine: MachineFacts, facts: Facts, asked: Asked) -> str | None:
    """The first requested package the machine's subdir has no record of."""
    names = facts.names.get(machine.subdir, frozenset())
    missing = next((name for name in asked.names if name not in names), None)
    return f"fails: No candidates were found for {missing}" if missing else None


def _cpu_builds(machine: MachineFacts, facts: Facts, asked: Asked) -> list[Build]:
    cpu = [b for b in facts.builds if b.subdir == machine.subdir and not b.cuda]
    if asked.generic_only:
        cpu = [b for b in cpu if b.blas == "generic"]
    return [b for b in cpu if asked.python in b.pythons] if asked.python else cpu


def _best(candidates: Sequence[Build], machine: MachineFacts, facts: Facts, asked: Asked, why: str) -> str:
    """The highest build number among ``candidates`` in words; where there is none, why not."""
    if candidates:
        return _words(max(candidates, key=lambda b: b.number), machine, facts, asked)
    if asked.generic_only:
        mkl = next(iter(facts.constrains.get("nomkl", ())), "mkl <0.a0")
        return f"fails: {mkl}, which conflicts"
    return "fails: python" if asked.python else f"fails: {why}"


def _torch(machine: MachineFacts, facts: Facts, asked: Asked) -> str:
    """pytorch / libtorch: the best build the machine runs, a GPU one where one fits, else the CPU one."""
    gpu, why = _gpu_builds(machine, facts, asked)
    return _best(_cpu_builds(machine, facts, asked) + gpu, machine, facts, asked, why)


def _cpu(machine: MachineFacts, facts: Facts, asked: Asked) -> str:
    return _best(_cpu_builds(machine, facts, asked), machine, facts, asked, "")


def _gpu(machine: MachineFacts, facts: Facts, asked: Asked) -> str:
    gpu, why = _gpu_builds(machine, facts, asked)
    return _best(gpu, machine, facts, asked, why) if gpu else f"fails: {why}"


def _cpu_and_gpu(machine: MachineFacts, facts: Facts, asked: Asked) -> str:
    """Never: the metapackages exclude each other (pytorch-gpu constrains pytorch-cpu <0a0); where no GPU
    build fits, pytorch-gpu itself cannot be installed."""
    gpu, why = _gpu_builds(machine, facts, asked)
    if gpu:
        return f"fails: {facts.constrains.get(GPU, ('pytorch-cpu <0a0',))[0]}"
    return f"fails: {why}" if why.startswith("__glibc") else f"fails: {GPU} * cannot be installed"


def _host(machine: MachineFacts, facts: Facts, asked: Asked) -> str:
    """A CUDA build's host requirements (rule 5; what the subdir has no record of fails before)."""
    if asked.cuda is None:
        return "solves"
    major, arm = asked.cuda[0], asked.arm or machine.arm
    if (machine.subdir, arm, major) not in facts.cuda_libraries:
        held = {
            spec
            for (subdir, held_arm, _), specs in facts.cuda_libraries.items()
            if (subdir, held_arm) == (machine.subdir, arm)
            for spec in specs
        }
        # the range of the one CUDA library of another major the machine could take (a Jetson's cuDSS 12:
        # "cuda-version >=12,<13", run here); which of several the solver would name is not settled here, so
        # then only the package they all constrain is expected
        return f"fails: {held.pop()}" if len(held) == 1 else "fails: cuda-version"
    if machine.driver is not None and machine.driver[0] < major:
        return f"fails: __cuda >={major}"
    floor = facts.cuda_glibc.get((machine.subdir, arm, major))
    if machine.glibc is not None and floor is not None and machine.glibc < floor:
        return f"fails: __glibc >={_dotted(floor)}"
    return "solves"


_RULES = {"torch": _torch, "cpu": _cpu, "gpu": _gpu, "cpu and gpu": _cpu_and_gpu, "host": _host}
RULES = tuple(_RULES)


def expectation(
    rule: str, specs: Sequence[str], constraints: Sequence[str], machine: MachineFacts, facts: Facts
) -> str:
    """The outcome the rules give a request on a machine, in solve_check's words."""
    asked = Asked.of(specs, constraints)
    return _missing(machine, facts, asked) or _RULES[rule](machine, facts, asked)


# ---- what the rules add to the table: requests per Python and CUDA configuration, arch machines ----------


@dataclass(frozen=True)
class Template:
    name: str
    specs: tuple[str, ...]
    constraints: tuple[str, ...]
    rule: str


@dataclass(frozen=True)
class Asking:
    """One request as asked: its specs filled in, and the machines it is asked on (None: every one)."""

    name: str
    specs: tuple[str, ...]
    constraints: tuple[str, ...]
    rule: str
    machines: tuple[str, ...] | None = None


def expand(
    templates: Sequence[Template], facts: Facts, machine_names: Sequence[str], table_machines: Sequence[str]
) -> list[Asking]:
    """The templates as asked: ``{python}`` once per Python the recipe builds; ``{cuda}`` once per CUDA
    configuration (its cuda-version and arm variant), on the machine named ``<subdir> cuda<version>``;
    ``{cuda_version}`` once per CUDA version the recipe builds, on every machine of ``table_machines``."""
    asked: list[Asking] = []
    for template in templates:
        if CUDA_FIELD in template.name:
            for subdir, cuda, arm in facts.cuda_configurations():
                machine = f"{subdir} cuda{cuda}"
                if machine not in machine_names:
                    raise ToolError(
                        f"no machine named {machine!r} for the host of the {subdir} CUDA {cuda} build: add "
                        "it to the machines of solve_requests.yaml"
                    )
                specs = (*template.specs, f"cuda-version {cuda}.*") + (
                    (f"arm-variant * {arm}",) if arm else ()
                )
                name = template.name.replace(CUDA_FIELD, f"{subdir} CUDA {cuda}" + (f" {arm}" if arm else ""))
                asked.append(Asking(name, specs, template.constraints, template.rule, (machine,)))
        elif CUDA_VERSION_FIELD in template.name:
            for cuda in facts.cuda_versions():
                asked.append(
                    Asking(
                        template.name.replace(CUDA_VERSION_FIELD, cuda),
                        (*template.specs, f"cuda-version {cuda}.*"),
                        template.constraints,
                        template.rule,
                        tuple(table_machines),
                    )
                )
        elif PYTHON_FIELD in template.name or any(PYTHON_FIELD in spec for spec in template.specs):
            for python in facts.pythons:
                asked.append(
                    Asking(
                        template.name.replace(PYTHON_FIELD, python),
                        tuple(spec.replace(PYTHON_FIELD, python) for spec in template.specs),
                        template.constraints,
                        template.rule,
                    )
                )
        else:
            asked.append(Asking(template.name, template.specs, template.constraints, template.rule))
    return asked


def below(bound: str, architectures: Sequence[str]) -> str | None:
    """The newest architecture the recipe names that is older than ``bound`` (None: none is)."""
    older = [arch for arch in architectures if version_key(arch) < version_key(bound)]
    return older[-1] if older else None


def arch_machine_virtuals(
    base_subdir: str, base_virtual: Sequence[str], installed: Sequence[str], facts: Facts
) -> list[tuple[str, tuple[str, ...]]]:
    """(suffix, virtual packages) of the machines like a base machine at each __cuda_arch bound of its
    builds and at the recipe's architecture just below each: ``arch7.5``, ``arch7.0``."""
    machine = MachineFacts.of(base_subdir, base_virtual, installed)
    arches: list[str] = []
    for bound in facts.bounds(base_subdir, machine.arm):
        arches += [arch for arch in (below(bound, facts.architectures), bound) if arch and arch not in arches]
    kept = [v for v in base_virtual if not v.startswith("__cuda_arch=")]
    return [(f"arch{arch}", (*kept, f"__cuda_arch={arch}=0")) for arch in sorted(arches, key=version_key)]
