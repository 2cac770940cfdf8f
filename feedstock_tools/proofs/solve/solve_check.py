"""``solve-check``: what a real conda solver installs from the recipe's packages, request by machine.

The channel is :mod:`feedstock_tools.proofs.solve.solve_channel` (every output of every ``.ci_support``
configuration, as metadata, plus its dependencies' records); the solver is py-rattler's (rattler, the solver
of pixi and rattler-build), given each machine's virtual packages. The requests and machines are
``solve_requests.yaml``; the expected outcome of each on each machine is computed without a solver by the
rules of :mod:`feedstock_tools.proofs.solve.expectations` from the recipe's own packages. Exit status 1 when
any outcome differs from its expectation.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from feedstock_tools.common import inputs
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.feedstock import Feedstock
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.conda import cuda_arch
from feedstock_tools.conda.pinning import add_pinning_argument, locate_pinning
from feedstock_tools.conda.yaml_load import safe_load
from feedstock_tools.proofs.solve import expectations
from feedstock_tools.proofs.solve.solve_channel import Channel, Record, build_channel
from megabuild import package_files

REQUESTS_FILE = Path(__file__).with_name("solve_requests.yaml")
REQUESTS_NAME = "feedstock_tools/proofs/solve/solve_requests.yaml"
RULES_FILE = "feedstock_tools/proofs/solve/expectations.py"
# the words of an expectation, by what they describe
FLAVOUR, BLAS, LINALG, PYTHON, ARM = "flavour", "blas", "linalg", "python", "arm"
# libmagma installed without a libtorch-cuda-linalg package: MAGMA linked into torch_cuda itself (Windows,
# docs/reference/windows.md), so libtorch depends on libmagma directly
MAGMA_IN_TORCH = "libmagma"


@dataclass(frozen=True)
class Machine:
    name: str
    subdir: str
    virtual: tuple[str, ...]  # "name=version=build"
    # specs the user installed before (a Jetson's "arm-variant * tegra"): conda keeps a requested package
    # in every later solve of that environment, so they join each request's specs
    installed: tuple[str, ...] = ()


@dataclass(frozen=True)
class Request:
    name: str
    specs: tuple[str, ...]
    constraints: tuple[str, ...]
    rule: str = ""  # the rule of expectations.py that gives its expected outcome
    machines: tuple[str, ...] | None = None  # the machines it is asked on (None: every one)

    def asked_on(self, machine: Machine) -> bool:
        return self.machines is None or machine.name in self.machines


@dataclass(frozen=True)
class Table:
    """solve_requests.yaml as read: its machines, the bases of its arch machines, its request templates."""

    machines: tuple[Machine, ...]
    arch_bases: tuple[str, ...]
    templates: tuple[expectations.Template, ...]


@dataclass
class Outcome:
    """What the solver did with one request on one machine."""

    packages: dict[str, Record] = field(default_factory=dict)  # name -> installed record
    error: str = ""  # the solver's explanation when there is no solution
    seconds: float = 0.0

    @property
    def solved(self) -> bool:
        return not self.error

    def torch_name(self) -> str | None:
        """The installed package that holds torch: pytorch, else libtorch (a request for C++ only)."""
        names = (package_files.PYTORCH, package_files.LIBTORCH)
        return next((name for name in names if name in self.packages), None)

    def torch(self) -> Record | None:
        name = self.torch_name()
        return None if name is None else self.packages[name]

    def words(self) -> dict[str, str]:
        """The outcome in the expectation's words (flavour, blas, linalg, python)."""
        torch = self.torch()
        if torch is None:
            return {}
        flavour, blas = torch["build"].split("_")[:2]
        linalg = self.packages.get(package_files.LIBTORCH_CUDA_LINALG)
        python = self.packages.get("python")
        return {
            FLAVOUR: flavour,
            BLAS: blas,
            LINALG: linalg["build"].split("_")[2] if linalg else "none",
            PYTHON: "py" + python["version"].replace(".", "") if python else "nopython",
            ARM: self.packages.get("arm-variant", {}).get("build", "none"),
        }


def word_kind(word: str) -> str:
    if re.fullmatch(r"cpu|cuda\d+", word):
        return FLAVOUR
    if word in ("mkl", "generic"):
        return BLAS
    if word in ("magma", "nomagma"):
        return LINALG
    if re.fullmatch(r"nopython|py\d+", word):
        return PYTHON
    if word in ("sbsa", "tegra"):
        return ARM
    if word == MAGMA_IN_TORCH:
        return MAGMA_IN_TORCH
    raise ToolError(
        f"unknown word {word!r} in an expectation of {REQUESTS_FILE.name}; use cpu/cudaNNN, mkl/generic, "
        "magma/nomagma, libmagma, pyNNN/nopython, sbsa/tegra, 'solves' or 'fails: TEXT'"
    )


# a request for something other than torch (a build's host requirements): only that a solution exists
SOLVES = "solves"


def failed_as_expected(text: str, outcome: Outcome) -> tuple[bool, str]:
    """(matches, why not) for "fails: TEXT"."""
    if outcome.solved:
        return False, "expected no solution, the solver found one"
    if text not in outcome.error:
        return False, f"the solver's explanation does not mention {text!r}"
    return True, ""


def verdict(expectation: str, outcome: Outcome) -> tuple[bool, str]:
    """(matches, why not) for one expectation."""
    if expectation.startswith("fails:"):
        return failed_as_expected(expectation.split(":", 1)[1].strip(), outcome)
    if not outcome.solved:
        return False, "expected a solution, the solver found none"
    if expectation == SOLVES:
        return True, ""
    if outcome.torch() is None:
        return False, "neither pytorch nor libtorch installed"
    wanted = {word_kind(word): word for word in expectation.split()}
    wanted.setdefault(LINALG, "none")
    wanted.setdefault(ARM, "none")
    got = outcome.words()
    magma_in_torch = wanted.pop(MAGMA_IN_TORCH, None) is not None
    wrong = [f"{kind} {got[kind]} (expected {word})" for kind, word in wanted.items() if got[kind] != word]
    libblas = outcome.packages.get("libblas", {}).get("build", "")
    if got[BLAS] == "mkl" and not libblas.endswith("_mkl"):
        wrong.append(f"libblas {libblas or 'missing'} beside an MKL torch (two BLAS libraries)")
    has_magma = "libmagma" in outcome.packages
    if has_magma != (got[LINALG] == "magma" or magma_in_torch):
        linalg = "MAGMA linked into torch" if magma_in_torch else f"the {got[LINALG]} linalg"
        wrong.append(f"libmagma {'installed' if has_magma else 'missing'} with {linalg}")
    return not wrong, "; ".join(wrong)


# ---- the table of requests and machines --------------------------------------------------------------------


def _unique(names: Sequence[str], what: str, path: Path) -> None:
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ToolError(
            f"{path}: two {what}s named {twice[0]!r}; give each {what} its own name (the report and "
            f"--{what} name them)"
        )


def read_table(path: Path = REQUESTS_FILE) -> Table:
    """The machines, arch machine bases and request templates of ``path``; one line naming the file and the
    fix for a malformed entry, a duplicate name or an unknown rule."""
    try:
        # every step of a rehearsal asks: libyaml's parser (docs/records/2026-11-28-ci-time.md)
        data = safe_load(path.read_text(encoding="utf-8"))
        machines = tuple(
            Machine(
                str(m["name"]),
                str(m["subdir"]),
                tuple(str(v) for v in m["virtual"]),
                tuple(str(s) for s in m.get("installed") or ()),
            )
            for m in data["machines"]
        )
        bases = tuple(str(entry["like"]) for entry in data.get("arch_machines") or ())
        templates = tuple(
            expectations.Template(
                str(r["name"]),
                tuple(str(s) for s in r["specs"]),
                tuple(str(s) for s in r.get("constraints") or ()),
                str(r["rule"]),
            )
            for r in data["requests"]
        )
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise ToolError(
            f"cannot read {path}: {type(exc).__name__} {str(exc).splitlines()[0] if str(exc) else ''}; "
            "each machine needs name, subdir, virtual, each arch machine like, and each request name, specs, "
            "rule"
        ) from exc
    _unique([m.name for m in machines], "machine", path)
    _unique([r.name for r in templates], "request", path)
    for template in templates:
        if template.rule not in expectations.RULES:
            raise ToolError(
                f"{path}: request {template.name!r} has rule {template.rule!r}; use one of "
                f"{', '.join(expectations.RULES)} (feedstock_tools/proofs/solve/expectations.py)"
            )
        fields = (expectations.CUDA_FIELD, expectations.CUDA_VERSION_FIELD)
        if template.rule == "host" and not any(field in template.name for field in fields):
            raise ToolError(
                f"{path}: request {template.name!r} has rule host but names neither {fields[0]} nor "
                f"{fields[1]}; a host is asked per CUDA configuration or per CUDA version (expectations.py)"
            )
    known = {m.name for m in machines}
    unknown = [base for base in bases if base not in known]
    if unknown:
        raise ToolError(f"{path}: arch_machines names {unknown[0]!r}, which no machine is; name a machine")
    return Table(machines, bases, templates)


def load_requests(
    facts: expectations.Facts, path: Path = REQUESTS_FILE
) -> tuple[list[Machine], list[Request]]:
    """Every machine (the arch machines made for the recipe's __cuda_arch bounds included) and every request
    as asked for the recipe ``facts`` describe."""
    table = read_table(path)
    machines = list(table.machines)
    by_name = {m.name: m for m in machines}
    for base in table.arch_bases:
        like = by_name[base]
        for suffix, virtual in expectations.arch_machine_virtuals(
            like.subdir, like.virtual, like.installed, facts
        ):
            machines.append(Machine(f"{like.name} {suffix}", like.subdir, virtual, like.installed))
    _unique([m.name for m in machines], "machine", path)
    asked = expectations.expand(
        table.templates, facts, [m.name for m in machines], [m.name for m in table.machines]
    )
    requests = [Request(a.name, a.specs, a.constraints, a.rule, a.machines) for a in asked]
    _unique([r.name for r in requests], "request", path)
    return machines, requests


def expected(request: Request, machine: Machine, facts: expectations.Facts) -> str:
    """The rules' outcome of ``request`` on ``machine`` (expectations.py), its words checked."""
    facts_of_machine = expectations.MachineFacts.of(machine.subdir, machine.virtual, machine.installed)
    text = expectations.expectation(request.rule, request.specs, request.constraints, facts_of_machine, facts)
    if not text.startswith("fails:") and text != SOLVES:
        for word in text.split():
            word_kind(word)
    return text


def machine_of(subdir: str, cuda: str | None, path: Path = REQUESTS_FILE) -> Machine:
    """The table's plain machine of ``subdir`` with an NVIDIA driver of CUDA ``cuda`` (None: none), by the
    table's naming: ``linux-64``, ``linux-64 cuda12.9``. The rehearsal's solver pick runs there."""
    name = subdir if cuda is None else f"{subdir} cuda{cuda}"
    found = next((machine for machine in read_table(path).machines if machine.name == name), None)
    if found is None or found.subdir != subdir:
        raise ToolError(
            f"{path.name} has no machine named {name!r} (subdir {subdir}): add its row with the virtual "
            f"packages conda detects on {subdir}" + (f" with a CUDA {cuda} driver" if cuda else "")
        )
    return found


# ---- solving -----------------------------------------------------------------------------------------------


def virtual_packages(machine: Machine) -> list[Any]:
    import rattler

    packages = []
    for text in machine.virtual:
        name, version, build = [*text.split("="), "0", "0"][:3]
        packages.append(
            rattler.GenericVirtualPackage(
                rattler.PackageName(name), rattler.Version(version), rattler.BuildString(build)
            )
        )
    return packages


async def solve(channel_dir: Path, request: Request, machine: Machine, gateway: Any = None) -> Outcome:
    """One request on one machine; ``gateway``: a rattler Gateway the solves of one channel share."""
    import rattler
    from rattler.exceptions import SolverError

    started = time.perf_counter()
    try:
        records = await rattler.solve(
            [rattler.Channel(str(channel_dir))],
            # conda's lenient reading: "libtorch 2.13.0 <build>" is conda-build's exact pin
            [rattler.MatchSpec(spec) for spec in (*request.specs, *machine.installed)],
            platforms=[machine.subdir, "noarch"],
            virtual_packages=virtual_packages(machine),
            constraints=[rattler.MatchSpec(spec) for spec in request.constraints],
            gateway=gateway,
        )
    except SolverError as exc:
        return Outcome(error=str(exc).strip(), seconds=time.perf_counter() - started)
    packages = {
        r.name.normalized: {"build": str(r.build), "version": str(r.version), "build_number": r.build_number}
        for r in records
    }
    return Outcome(packages=packages, seconds=time.perf_counter() - started)


@dataclass(frozen=True)
class Row:
    request: Request
    machine: Machine
    outcome: Outcome
    expectation: str

    def judged(self) -> tuple[bool, str]:
        return verdict(self.expectation, self.outcome)


def solve_all(
    channel: Channel,
    channel_dir: Path,
    machines: Sequence[Machine],
    requests: Sequence[Request],
    facts: expectations.Facts,
) -> list[Row]:
    """Each request solved on each machine it is asked on, beside the rules' expectation."""
    import rattler

    channel.write(channel_dir)
    # one gateway for every solve of this channel: without one, py-rattler makes a Gateway per solve
    # (0.28.0 solver/solver.py:113-114), which costs more than most of the solves; a gateway reads a
    # channel's repodata once and keeps it ("the repodata will only be fetched once", its docstring)
    gateway = rattler.Gateway()

    async def run() -> list[Row]:
        return [
            Row(
                request,
                machine,
                await solve(channel_dir, request, machine, gateway),
                expected(request, machine, facts),
            )
            for request in requests
            for machine in machines
            if request.asked_on(machine)
        ]

    return asyncio.run(run())


def recipe_facts(channel: Channel, recipe_dir: Path) -> expectations.Facts:
    """What the rules read: the channel's records and the GPU architectures meta.yaml names."""
    meta_text = (recipe_dir / "meta.yaml").read_text(encoding="utf-8")
    return expectations.facts_of(channel.all_records(), cuda_arch.architectures(meta_text))


# ---- the report --------------------------------------------------------------------------------------------


def short_reason(error: str) -> str:
    """The line of a solver explanation that says why: a requirement nothing provides, else the last
    constraint in conflict (the explanation's tree is printed in full below the table)."""
    lines = [line.strip(" \u2500\u2502\u251c\u2514") for line in error.splitlines() if line.strip()]
    lines = [line.removeprefix("Cannot solve the request because of: ") for line in lines]
    missing = [line for line in lines if "o candidates were found" in line]
    if missing:
        return missing[0]
    conflicts = [line for line in lines if "conflicts with" in line or "cannot be fulfilled" in line]
    return conflicts[-1] if conflicts else (lines[0] if lines else "")


def table(rows: Sequence[Row]) -> tuple[str, list[str]]:
    """The Markdown table and the solver's explanations of the rows without a solution (numbered)."""
    headers = ["#", "request", "machine", "torch build", "linalg", "BLAS (libblas)", "cuda-version",
               "libmagma", "python", "expected", "verdict"]  # fmt: skip
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    notes = []
    for number, row in enumerate(rows, start=1):
        ok, why = row.judged()
        outcome = row.outcome
        if outcome.solved and outcome.torch() is not None:
            torch = outcome.torch() or {}
            words = outcome.words()
            libblas = outcome.packages.get("libblas", {}).get("build", "-").rsplit("_", 1)[-1]
            cuda = outcome.packages.get("cuda-version", {}).get("version", "-")
            cells = [
                f"{outcome.torch_name()} {torch['build']}",
                words[LINALG] if words[LINALG] != "none" else "-",
                f"{words[BLAS]} ({libblas})",
                cuda,
                "yes" if "libmagma" in outcome.packages else "no",
                words[PYTHON],
            ]
        elif outcome.solved:  # a request for other packages (a build's host): what it installed
            cuda = outcome.packages.get("cuda-version", {}).get("version", "-")
            names = sorted(n for n in outcome.packages if not n.startswith("__"))
            cells = [f"solved: {', '.join(names)}", "", "", cuda, "", ""]
        else:
            cells = [f"no solution: {short_reason(outcome.error)} [{number}]", "", "", "", "", ""]
            notes.append(f"[{number}] {row.request.name} on {row.machine.name}:\n" + indent(outcome.error))
        result = "ok" if ok else f"MISMATCH: {why}"
        cells = [str(number), row.request.name, row.machine.name, *cells, row.expectation, result]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines), notes


def indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


# ---- command line ------------------------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "solve-check",
        help="what the real conda solver installs from the recipe's packages, request by machine",
        description=(
            "Render every .ci_support configuration, turn every output into a repodata record (with the "
            "run_exports conda-build would apply) beside metadata-only records of the dependencies at "
            "conda-forge's pinned versions, then solve each request of solve_requests.yaml on each machine "
            "(virtual packages such as __cuda, __glibc, __osx; a machine at each __cuda_arch bound of the "
            "recipe) with py-rattler and print what is installed, the expectation the rules of "
            "expectations.py give from the recipe's packages, and the verdict. Exit status 1 on any "
            "mismatch."
        ),
    )
    parser.add_argument("--recipe-dir", type=Path, default=REPO_ROOT / "recipe", help="default: recipe/")
    parser.add_argument(
        "--ci-support",
        type=Path,
        default=Feedstock(REPO_ROOT).ci_support,
        help="the configurations (default: .ci_support/)",
    )
    add_pinning_argument(parser)
    parser.add_argument(
        "--channel-dir",
        type=Path,
        help="write the channel (repodata.json per subdir) here and keep it (default: a temporary directory)",
    )
    parser.add_argument("--request", action="append", help="only the request(s) of this name")
    parser.add_argument("--machine", action="append", help="only the machine(s) of this name")
    parser.set_defaults(func=run)


def select(items: Sequence[Any], names: Sequence[str] | None, what: str) -> list[Any]:
    if not names:
        return list(items)
    known = [item.name for item in items]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ToolError(f"no {what} named {unknown[0]!r} in {REQUESTS_NAME}; known: {', '.join(known)}")
    return [item for item in items if item.name in names]


def run(args: argparse.Namespace) -> int:
    inputs.input_dir(args.recipe_dir, "--recipe-dir", "the recipe directory (recipe/)", holding="meta.yaml")
    if args.channel_dir is not None:
        inputs.work_dir(args.channel_dir, "--channel-dir")
    pinning = locate_pinning(args.pinning)
    read_table()  # a broken table is one line before the minute the channel takes

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    started = time.perf_counter()
    channel = build_channel(
        args.recipe_dir.parent, args.recipe_dir, args.ci_support, pinning_dir=pinning, progress=progress
    )
    built = time.perf_counter() - started
    facts = recipe_facts(channel, args.recipe_dir)
    machines, requests = load_requests(facts)
    machines = select(machines, args.machine, "machine")
    requests = select(requests, args.request, "request")
    count = sum(len(r) for r in channel.records.values())
    progress(f"channel: {count} records in {built:.1f} s; solving ...")
    with tempfile.TemporaryDirectory(prefix="solve-check-") as scratch:
        rows = solve_all(channel, args.channel_dir or Path(scratch), machines, requests, facts)
    print("The recipe's builds, as the rules read them from its packages (expectations.py):")
    print("\n".join(f"  {line}" for line in facts.summary()) + "\n")
    text, notes = table(rows)
    print(text)
    if notes:
        print("\nThe solver's explanations:")
        print("\n".join(notes))
    times = [row.outcome.seconds for row in rows]
    failed = [row for row in rows if not row.judged()[0]]
    print(
        f"\n{len(rows)} solves ({len(requests)} requests on {len(machines)} machines): "
        f"{sum(times):.2f} s in all, {max(times):.3f} s the slowest; channel built in {built:.1f} s. "
        f"{len(rows) - len(failed)} as expected, {len(failed)} mismatch(es)."
    )
    if failed:
        print(
            f"A mismatch is the solver's pick against the rules of {RULES_FILE} applied to the recipe's "
            f"packages: fix the recipe where its packages are wrong, the rule where the rule is, or the "
            f"machine or request of {REQUESTS_NAME} where the table is."
        )
    return 1 if failed else 0
