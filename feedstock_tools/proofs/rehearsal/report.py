"""What the rehearsal prints at the end: its per-step table, the driver's per-pass table, the
compile-work ratio, the import checks and the wall time; also written as ``summary.json``."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feedstock_tools.common.recipe_imports import import_megabuild
from feedstock_tools.proofs.rehearsal import ninja_log, prefixes
from feedstock_tools.proofs.rehearsal import target as targets
from feedstock_tools.proofs.rehearsal.harness import Rehearsal, StepResult, brings_libmagma
from feedstock_tools.proofs.rehearsal.plan import TOP_LEVEL_NAME

_python_target = import_megabuild("python_target")

# Targets whose objects legitimately compile again: the MAGMA linalg pass and every new Python (the
# Python-linked targets of 2.13.0, as the driver defines them).
LINALG_TARGETS = frozenset({"torch_cuda_linalg"})


def python_targets(target_platform: str) -> frozenset[str]:
    return frozenset(_python_target.python_linked_targets(target_platform))


DRIVER_REPORT = Path("build") / "megabuild-report.json"


@dataclass(frozen=True)
class WorkRatio:
    compiled: int  # objects compiled over all steps
    pass1: int
    linalg: int  # linalg objects, counted once if a MAGMA linalg step ran
    python_bindings: int
    extra_pythons: int

    @property
    def expected(self) -> int:
        return self.pass1 + self.linalg + self.python_bindings * self.extra_pythons

    @property
    def ratio(self) -> float:
        return self.compiled / self.expected if self.expected else float("nan")

    def formula(self) -> str:
        return (
            f"{self.compiled} / ({self.pass1} + {self.linalg} + {self.python_bindings} x "
            f"{self.extra_pythons}) = {self.ratio:.2f}"
        )


def work_ratio(rehearsal: Rehearsal) -> WorkRatio:
    results = rehearsal.results
    pass1 = next(r for r in results if r.step.name == TOP_LEVEL_NAME)
    pass1_targets = [ninja_log.target_of(o) for o in pass1.objects]
    magma_step_ran = any(
        r.step.name == "libtorch-cuda-linalg" and r.step.variant.get("magma_variant") == "magma"
        for r in results
    )
    # Extra Pythons: pytorch passes whose Python differs from the one torch_python was last built for.
    # In conda-build's order (ascending Python, pass 1 on the oldest) these are the Pythons other than
    # pass 1's; in another order every switch of interpreter is unavoidable work and counts.
    # With a fresh work directory per output, every output starts from pass 1's interpreter.
    extra, last_python = 0, rehearsal.pass1_python
    for result in results:
        if result.step.name == "pytorch":
            extra += result.step.python != last_python
            last_python = rehearsal.pass1_python if rehearsal.fresh_work_dir else result.step.python
    return WorkRatio(
        compiled=sum(len(r.objects) for r in results),
        pass1=len(pass1.objects),
        linalg=sum(t in LINALG_TARGETS for t in pass1_targets) if magma_step_ran else 0,
        python_bindings=sum(
            t in python_targets(pass1.step.variant.get("target_platform", "")) for t in pass1_targets
        ),
        extra_pythons=extra,
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
                target_list(targets),
                str(len(result.new_files)),
            ]
        )
    return table(["#", "step", "result", "s", "CPU s", "objects", "targets compiled", "files"], rows)


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
    """The driver's per-pass rows: pass, targets rebuilt, objects compiled, seconds, files staged.

    Falls back to one column per plain key of the first row if the report has another shape."""
    rows = report.get("passes", report) if isinstance(report, dict) else report
    if not isinstance(rows, list) or not rows or not all(isinstance(row, dict) for row in rows):
        return json.dumps(report, indent=2)[:4000]
    if all("pass_name" in row and "objects_by_target" in row for row in rows):
        return table(
            ["pass", "targets rebuilt", "objects compiled", "s", "files staged"],
            [
                [
                    str(row["pass_name"]),
                    target_list(sorted(row["objects_by_target"])),
                    str(sum(row["objects_by_target"].values())),
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
                  "_C": os.path.basename(torch._C.__file__)}))
"""


@dataclass(frozen=True)
class ImportCheck:
    label: str
    ok: bool
    detail: str  # the JSON torch reported, or the last line of the error


def assemble_prefix(rehearsal: Rehearsal, destination: Path, python: str, labels: list[str]) -> Path:
    """A venv of ``python`` plus the named packages (and libmagma when a MAGMA package is among them)."""
    prefixes.link_tree(prefixes.venv_template(rehearsal.cache_dir, python, rehearsal.setup_log), destination)
    if rehearsal.target.subdir != targets.NATIVE:  # the target's interpreter runs the packages
        targets.make_target_interpreter(destination, python, rehearsal.target)
    for label in labels:
        result = next(r for r in rehearsal.results if r.step.label == label)
        rehearsal.install_package(result, destination)
        if brings_libmagma(result.step):
            rehearsal.install_magma(destination)
    return destination


def import_checks(rehearsal: Rehearsal) -> list[ImportCheck]:
    """``import torch`` in a prefix per built pytorch package with the linalg build conda prefers, and
    once more with every other linalg build (first Python only): has_magma must follow the library."""
    checks: list[ImportCheck] = []
    root = rehearsal.dir / "import-check"
    linalg = sorted(
        (r for r in rehearsal.results if r.step.name == "libtorch-cuda-linalg" and r.ok),
        key=lambda r: -r.step.build_number,
    )
    pytorch = [r for r in rehearsal.results if r.step.name == "pytorch" and r.ok]
    combinations = [(p, linalg[:1]) for p in pytorch]
    if pytorch:
        combinations += [(pytorch[0], [other]) for other in linalg[1:]]
    for package, linalg_builds in combinations:
        labels = ["libtorch", *(r.step.label for r in linalg_builds), package.step.label]
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
