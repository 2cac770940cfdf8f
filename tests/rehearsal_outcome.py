"""The assertion every rehearsal fixture makes: the rehearsal succeeded as a whole, judged as ``rehearse``
judges it (``feedstock_tools.proofs.rehearsal.conclude``: import checks, linkage checks, ratio, exit status).

A fixture that builds a rehearsal calls :func:`assert_rehearsal_succeeded` once, right after the builds, so
every test using it stands on a rehearsal whose builds, import checks, linkage checks and compile-work ratio
all passed; tests that look at a check in detail read it from :func:`concluded` instead of running it again.
"""

from __future__ import annotations

from pathlib import Path

from feedstock_tools.common.configuration import read_configuration, version_key
from feedstock_tools.proofs.rehearsal import conclude, prefixes
from feedstock_tools.proofs.rehearsal.harness import DEFAULT_RECIPE_DIR, Rehearsal
from feedstock_tools.proofs.rehearsal.plan import PYTORCH, plan_steps
from feedstock_tools.proofs.rehearsal.report import Outcome

# id(rehearsal) -> (the rehearsal, kept alive so the id stays its own; its outcome). Per process, so
# parallel test workers (pytest-xdist) each conclude their own rehearsals.
_CONCLUDED: dict[int, tuple[Rehearsal, Outcome]] = {}


def concluded(rehearsal: Rehearsal) -> Outcome:
    """The outcome of ``rehearsal``'s builds, concluded once as ``rehearse`` concludes a run (it prints the
    summary and writes ``summary.json`` into the rehearsal's own work directory)."""
    if id(rehearsal) not in _CONCLUDED:
        _CONCLUDED[id(rehearsal)] = (rehearsal, conclude(rehearsal, {}))
    return _CONCLUDED[id(rehearsal)][1]


def assert_rehearsal_succeeded(rehearsal: Rehearsal) -> Outcome:
    """Every verdict of the rehearsal, each with its own message, and the exit status they make."""
    outcome = concluded(rehearsal)
    assert [r.step.label for r in outcome.results] == outcome.planned, "not every planned step ran"
    assert {r.step.label: r.last_line() for r in outcome.results if not r.ok} == {}
    pytorch = [r.step.label for r in outcome.results if r.step.name == "pytorch"]
    unchecked = [
        label for label in pytorch if not any(c.label.endswith(label) for c in outcome.import_checks)
    ]
    assert unchecked == [], "a pytorch package without an import check"
    assert {c.label: c.detail for c in outcome.import_checks if not c.ok} == {}
    packaged = [r.step.label for r in outcome.results if r.package_dir is not None and r.new_files]
    assert [c.label for c in outcome.linkage_checks] == packaged
    assert {c.label: c.errors for c in outcome.linkage_checks if not c.ok} == {}
    assert outcome.ratio.compiled == outcome.ratio.expected, outcome.ratio.formula()
    assert (outcome.problems, outcome.exit_status) == ([], 0)
    return outcome


def two_pythons(config: Path, recipe_dir: Path = DEFAULT_RECIPE_DIR) -> frozenset[str]:
    """For ``Rehearsal(pythons=...)``: pass 1's Python (else the oldest) among the pytorch outputs this
    machine can build, and the newest of them. With the default order the newest builds first and pass 1's
    Python returns after it, so every kind of pass runs in fewer pytorch passes than every Python takes."""
    configuration = read_configuration(config)
    offered = sorted(
        {
            step.python
            for step in plan_steps(configuration, recipe_dir)
            if step.name == PYTORCH and prefixes.find_interpreter(step.python) is not None
        },
        key=version_key,
    )
    first = configuration.python_min if configuration.python_min in offered else offered[0]
    return frozenset({first, offered[-1]})
