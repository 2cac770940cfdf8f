"""Which rehearsed packages conda would install for a request, as the real solver (py-rattler) picks them.

The rehearsal installs its own packages into host prefixes and into the import-check prefixes; the
solver decides which builds (the MAGMA or the non-MAGMA ``libtorch-cuda-linalg``, ...) from their
repodata records: name, version, build string and number, and the run requirements among the recipe's own
packages and virtual packages (``__cuda``). Requirements outside the recipe are left out of the records:
the rehearsal provides them itself (venvs, the stand-in's libmagma), so the solver decides exactly the
choice among the recipe's builds. ``solve-check`` runs the same solver over the full metadata.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from feedstock_tools.common.configuration import cuda_version
from feedstock_tools.common.errors import ToolError
from feedstock_tools.proofs.rehearsal.plan import Step
from feedstock_tools.proofs.solve.solve_channel import Channel, record, spec_name
from feedstock_tools.proofs.solve.solve_check import Request, machine_of
from feedstock_tools.proofs.solve.solver_process import solve_in_child


class Built(Protocol):
    step: Step


def channel_of(built: Sequence[Built], target: str) -> Channel:
    names = {b.step.name for b in built}

    def ours(specs: Sequence[str]) -> list[str]:
        return [s for s in specs if spec_name(s) in names or spec_name(s).startswith("__")]

    channel = Channel()
    for b in built:
        step = b.step
        channel.add(
            record(
                step.name, step.version, step.build_string, step.build_number, target, depends=ours(step.run)
            )
        )
    return channel


def solver_pick(
    built: Sequence[Built], specs: Sequence[str], target: str, variant: Mapping[str, str], scratch: Path
) -> list[Built]:
    """The packages of ``built`` the solver installs for ``specs`` (a ToolError when it finds none)."""
    if not specs:
        return []
    channel_of(built, target).write(scratch)
    request = Request("rehearsal", tuple(specs), ())
    machine = machine_of(target, cuda_version(variant))
    # in a child process: py-rattler's runtime threads must not outlive a solve in this one
    # (solver_process.py, docs/reference/failure-modes.md)
    outcome = solve_in_child(scratch, request, machine)
    if not outcome.solved:
        raise ToolError(
            f"the solver installs none of the rehearsed packages for {' '.join(specs)}: "
            f"{outcome.error.splitlines()[0]}; look at the rehearsal's build log of the package"
        )
    by_identity = {(b.step.name, b.step.build_string): b for b in built}
    return [
        by_identity[(name, installed["build"])]
        for name, installed in outcome.packages.items()
        if (name, installed["build"]) in by_identity
    ]
