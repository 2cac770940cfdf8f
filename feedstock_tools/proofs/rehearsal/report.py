"""What the rehearsal prints at the end: its per-step table, the driver's per-pass table, the
compile-work ratio, the import checks and the wall time; also written as ``summary.json``."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feedstock_tools.proofs.rehearsal import compile_work, ninja_log, prefixes
from feedstock_tools.proofs.rehearsal import target as targets
from feedstock_tools.proofs.rehearsal.compile_work import WorkRatio
from feedstock_tools.proofs.rehearsal.harness import Rehearsal, StepResult, brought_libraries
from feedstock_tools.proofs.rehearsal.plan import TOP_LEVEL_NAME
from feedstock_tools.proofs.wheels import linkage
from megabuild import compiler_cache, package_files, python_target


def python_targets(target_platform: str) -> frozenset[str]:
    return frozenset(python_target.python_linked_targets(target_platform))


DRIVER_REPORT = Path("build") / "megabuild-report.json"


def work_ratio(rehearsal: Rehearsal) -> WorkRatio:
    """The rehearsal's real compiles against the job's limit (compile_work.py)."""
    results = rehearsal.results
    pass1 = next(r for r in results if r.step.name == TOP_LEVEL_NAME)
    magma_ran = any(
        r.step.name == package_files.LIBTORCH_CUDA_LINALG and r.step.variant.get("magma_variant") == "magma"
        for r in results
    )
    # Extra Pythons: the pytorch outputs' Pythons other than pass 1's, each needing its own Python-linked
    # objects once, whatever the order of the outputs (a return to a Python compiles nothing:
    # megabuild/python_products.py keeps what each Python's pass compiled)
    extra = len(
        {r.step.python for r in results if r.step.name == package_files.PYTORCH} - {rehearsal.pass1_python}
    )
    depends = None
    if pass1.compiled is not None:
        sources = compiler_cache.compile_sources(rehearsal.src_dir / "build", os.environ)
        declared = compile_work.read_declared(rehearsal.src_dir)
        depends = compile_work.dependence(sources, rehearsal.src_dir, declared)
    return compile_work.limit(
        compiled=sum(r.compiles for r in results),
        pass1_objects=pass1.objects,
        python_linked=python_targets(pass1.step.variant.get("target_platform", "")),
        depends=depends,
        magma_ran=magma_ran,
        extra_pythons=extra,
        extra_blases=sum(r.step.name == TOP_LEVEL_NAME for r in results) - 1,
    )


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)]
    lines = [" | ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=False))
             for row in [headers, *rows]]  # fmt: skip
    lines.insert(1, "-+-".join("-" * width for width in widths))
    return "\n".join(lines)


def target_list(targets: list[str], shown: int = 3) -> str:
    """Target names for a table cell; a long list (pass 1 compiles them all) as a count."""
    if not targets:
        return "-"
    return ", ".join(targets) if len(targets) <= shown else f"{len(targets)} targets"


def steps_table(results: list[StepResult]) -> str:
    rows = []
    for index, result in enumerate(results, start=1):
        targets = ninja_log.targets_of(result.objects)
        rows.append(
            [
                str(index),
                result.step.label,
                "ok" if result.ok else f"exit {result.returncode}",
                f"{result.seconds:.1f}",
                f"{result.cpu_seconds:.1f}",
                str(len(result.objects)),
                str(result.compiles),
                target_list(targets),
                str(len(result.new_files)),
            ]
        )
    headers = ["#", "step", "result", "s", "CPU s", "objects", "compiled", "targets", "files"]
    return table(headers, rows)


def host_changes(results: list[StepResult]) -> list[str]:
    """One line per step that changed or removed files its host prefix had before the script ran."""
    return [
        f"{r.step.label} changed {len(r.modified_host_files)} host file(s), first {r.modified_host_files[0]}"
        for r in results
        if r.modified_host_files
    ]


def driver_report(rehearsal: Rehearsal) -> Any:
    """The driver's report of all passes. With a fresh work directory per output every output saw only
    pass 1's report, so the passes are gathered from what each step left behind."""
    scripted = [r for r in rehearsal.results if r.step.has_script]
    if not scripted:
        return None
    if not rehearsal.fresh_work_dir:
        return scripted[-1].driver_report
    passes = []
    for result in scripted:
        report = result.driver_report
        if not report or not isinstance(report.get("passes"), list) or not report["passes"]:
            return None
        passes.append(report["passes"][-1])
    return {**(scripted[-1].driver_report or {}), "passes": passes}


def driver_table(report: Any) -> str:
    """The driver's per-pass rows: pass, targets compiled, objects compiled, objects the compiler cache
    served, seconds, files staged.

    Falls back to one column per plain key of the first row if the report has another shape."""
    rows = report.get("passes", report) if isinstance(report, dict) else report
    if not isinstance(rows, list) or not rows or not all(isinstance(row, dict) for row in rows):
        return json.dumps(report, indent=2)[:4000]
    if all("pass_name" in row and "objects_by_target" in row for row in rows):
        return table(
            ["pass", "targets compiled", "objects compiled", "from cache", "s", "files staged"],
            [
                [
                    str(row["pass_name"]),
                    target_list(sorted(row["objects_by_target"])),
                    str(sum(row["objects_by_target"].values())),
                    str(len(row.get("objects_from_cache") or ())),
                    _cell(row.get("seconds")),
                    _cell(row.get("staged_files")),
                ]
                for row in rows
            ],
        )
    headers = [key for key in rows[0] if not isinstance(rows[0][key], (list, dict))]
    return table(headers, [[_cell(row.get(key)) for key in headers] for row in rows])


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.1f}"
    return "" if value is None else str(value)


# ---- import checks: a prefix made from the packages, as conda would install pytorch into it ---------------
_IMPORT_CHECK = """
import json, os, torch
print(json.dumps({"version": torch.__version__, "add(1,2,alpha=3)": torch.add(1.0, 2.0, 3.0),
                  "cuda": torch.cuda.is_compiled(), "has_magma": torch.cuda.has_magma(),
                  "_C": os.path.basename(torch._C.__file__), "has_mkl": torch.has_mkl()}))
"""


# the order the import check installs the solver's picks in (libtorch first: the others link it)
INSTALL_ORDER = package_files.PACKAGES


def exact_spec(result: StepResult) -> str:
    return f"{result.step.name} =={result.step.version} {result.step.build_string}"


@dataclass(frozen=True)
class ImportCheck:
    label: str
    ok: bool
    detail: str  # the JSON torch reported, or the last line of the error


def assemble_prefix(rehearsal: Rehearsal, destination: Path, python: str, labels: list[str]) -> Path:
    """A venv of ``python`` plus the named packages (and the stand-in's libmagma or MKL where a package
    brings it)."""
    template = prefixes.venv_template(
        rehearsal.cache_dir, python, rehearsal.setup_log, progress=rehearsal.progress
    )
    rehearsal.link_entry(template, destination)
    if rehearsal.target.subdir != targets.NATIVE:  # the target's interpreter runs the packages
        targets.make_target_interpreter(destination, python, rehearsal.target)
    for label in labels:
        result = next(r for r in rehearsal.results if r.step.label == label)
        rehearsal.install_package(result, destination)
        for library in brought_libraries(result.step):
            rehearsal.install_library(library, destination)
    return destination


def import_checks(rehearsal: Rehearsal) -> list[ImportCheck]:
    """``import torch`` in a prefix per built pytorch package with what the solver installs for it, and
    once more with every other linalg build of its BLAS (first Python of each BLAS only): has_magma must
    follow the library."""
    checks: list[ImportCheck] = []
    root = rehearsal.dir / "import-check"
    pytorch = [r for r in rehearsal.results if r.step.name == package_files.PYTORCH and r.ok]
    combinations = [rehearsal.solver_installs([exact_spec(p)]) for p in pytorch]
    for blas in dict.fromkeys(p.step.blas for p in pytorch):
        index, first = next((i, p) for i, p in enumerate(pytorch) if p.step.blas == blas)
        picked = {r.step.label for r in combinations[index]}
        combinations += [
            rehearsal.solver_installs([exact_spec(first), exact_spec(other)])
            for other in rehearsal.packaged()
            if other.step.name == package_files.LIBTORCH_CUDA_LINALG
            and other.step.blas == blas
            and other.step.label not in picked
        ]
    for installed in combinations:
        package = next(r for r in installed if r.step.name == package_files.PYTORCH)
        labels = [r.step.label for r in sorted(installed, key=lambda r: INSTALL_ORDER.index(r.step.name))]
        name = "+".join(labels[1:])
        destination = root / name
        rehearsal.remover.discard(destination)
        assemble_prefix(rehearsal, destination, package.step.python, labels)
        run = subprocess.run(
            [str(destination / "bin" / "python"), "-c", _IMPORT_CHECK],
            capture_output=True,
            text=True,
            cwd=root,
            check=False,
        )
        lines = (run.stdout if run.returncode == 0 else run.stderr).strip().splitlines()
        checks.append(ImportCheck(name, run.returncode == 0, lines[-1] if lines else ""))
    return checks


# The stand-in is compiled by this machine's gcc (target.py), so its binaries load this machine's compiler
# runtime where conda-forge's builds load libstdcxx, libgcc and _openmp_mutex (or libcxx on macOS).
MACHINE_RUNTIME = ("libstdc++.so.6", "libgcc_s.so.1", "libgomp.so.1")


@dataclass(frozen=True)
class LinkageCheck:
    label: str
    binaries: int
    errors: list[str]
    warnings: list[str]

    @property
    def ok(self) -> bool:
        return not self.errors


def stand_in_reader(target: targets.Target) -> linkage.BinaryReader:
    """How the linkage check reads the stand-in's binaries: ELF files whatever the target (target.py),
    read as the binaries they stand for. A win-64 target's are read as PE files: their ``DT_NEEDED``
    entries as the import table, and no search path, for Windows' loader has no RUNPATH. It finds a DLL
    beside the file that loads it or in a directory added to the DLL search, and for ``torch._C`` that
    is ``Library/bin``, where the pytorch package puts ``torch_python.dll`` (as conda-forge's bld.bat
    does, 74dd3d46 line 260): CPython loads an extension module with ``LoadLibraryExW(path, NULL,
    LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR)`` (python/cpython 003b808e,
    Python/dynload_win.c, bpo-36085: PATH is not searched), and 2.13.0's torch/__init__.py adds
    ``os.path.join(sys.exec_prefix, "Library", "bin")`` with ``os.add_dll_directory`` before it imports
    ``torch._C`` (the win_amd64 wheel's torch/__init__.py: ``_load_dll_libraries``, lines 167-288, that
    directory at 175 and 241-242; on Windows the import is line 445). Read as ELF, the rehearsal's
    ``_C.cp3XY-win_amd64.pyd`` looked for ``torch_python.dll`` only along its relocated RUNPATH
    (``$ORIGIN/../../..:$ORIGIN:$ORIGIN/lib``), which no Windows loader reads."""
    if not target.windows:
        return linkage.read_binary

    def as_windows_binary(path: Path) -> linkage.BinaryNeeds | None:
        needs = linkage.read_binary(path)
        return None if needs is None else linkage.BinaryNeeds("PE", needs.needed)

    return as_windows_binary


def linkage_checks(rehearsal: Rehearsal) -> list[LinkageCheck]:
    """Every package the rehearsal built, checked as it would be installed with the packages it depends
    on (the builds conda's solver would pick): every library its binaries load resolves
    (feedstock_tools/proofs/wheels/linkage.py). The binaries are ELF whatever the target (target.py), searched
    as the target's loader searches (:func:`stand_in_reader`); the run requirements are those the recipe
    renders for the target."""
    checks = []
    reader = stand_in_reader(rehearsal.target)
    for result in rehearsal.results:
        if not result.ok or result.package_dir is None or not result.new_files:
            continue
        # the package itself and the sibling builds the solver installs with it
        installed = {r.step.name: r for r in rehearsal.solver_installs([exact_spec(result)])}
        installed[result.step.name] = result
        specs = [package_spec_of(r, rehearsal.target.subdir) for r in installed.values()]
        check = linkage.LinkageCheck(specs, "linux", reader=reader, machine_runtime=MACHINE_RUNTIME)
        outcome = check.run(checked=[result.step.name])
        checks.append(LinkageCheck(result.step.label, outcome.binaries, outcome.errors, outcome.warnings))
    return checks


def package_spec_of(result: StepResult, subdir: str) -> linkage.PackageSpec:
    """A built package as the linkage check sees it: its files and what its rendered output requires."""
    step = result.step
    assert result.package_dir is not None
    platform: linkage.Platform = "osx" if subdir.startswith("osx") else "linux"
    output = linkage.Linkage(
        step.run_names(),
        [*step.build_names(), *step.host_names()],
        step.ignore_run_exports_from,
        step.ignore_run_exports,
        step.missing_dso_whitelist,
    )
    return linkage.package_spec(step.name, result.package_dir, output, platform)


# ---- the verdicts: what the exit status of `rehearse` is made of ------------------------------------------
@dataclass(frozen=True)
class Outcome:
    """Every verdict of a rehearsal: its builds, import checks, linkage checks and compile-work ratio.
    ``rehearse`` exits 0 exactly when :attr:`problems` is empty; the tests assert the same object."""

    planned: list[str]  # labels of the steps the rehearsal was to run
    results: list[StepResult]
    import_checks: list[ImportCheck]
    linkage_checks: list[LinkageCheck]
    ratio: WorkRatio

    @property
    def problems(self) -> list[str]:
        """One line per failed verdict, in the order the rehearsal reaches them."""
        lines = [
            f"{r.step.label}: its build script failed with exit {r.returncode} ({r.last_line()!r}); "
            f"full log: {r.log}"
            for r in self.results
            if not r.ok
        ]
        ran = {r.step.label for r in self.results}
        missing = [label for label in self.planned if label not in ran]
        if missing:
            lines.append(f"{len(missing)} planned step(s) did not run, the first {missing[0]}")
        failed = [check.label for check in self.import_checks if not check.ok]
        if failed:
            lines.append(f"import torch failed in {', '.join(failed)}: see the lines above")
        unresolved = [check for check in self.linkage_checks if not check.ok]
        if unresolved:
            lines.append(
                f"linkage of {unresolved[0].label}: {unresolved[0].errors[0]} "
                f"({sum(len(c.errors) for c in unresolved)} unresolved need(s) in all: see the lines above)"
            )
        if self.ratio.compiled != self.ratio.expected:
            lines.append(
                f"compile-work ratio {self.ratio.formula()}, not 1.00: a pass compiled objects outside the "
                "targets it rebuilds (see the per-step table above; MEGABUILD_STRICT=1 stops that pass)"
            )
        return lines

    @property
    def exit_status(self) -> int:
        return 1 if self.problems else 0
