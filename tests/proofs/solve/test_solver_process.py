"""The rehearsal's solver path ends its process cleanly (issue 29's exit crash,
docs/reference/failure-modes.md).

py-rattler's runtime threads, still inside their GIL section when the interpreter finalized, aborted a
rehearsal whose checks had all passed (``Fatal Python error: PyGILState_Release ... finalizing``). The solver
now runs in a child process that never finalizes (feedstock_tools/proofs/solve/solver_process.py), so the
process that asks for a solve neither loads py-rattler nor has a thread of its runtime.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from feedstock_tools.common.errors import ToolError
from feedstock_tools.proofs.rehearsal.harness import REPO_ROOT
from feedstock_tools.proofs.solve.solve_channel import Channel
from feedstock_tools.proofs.solve.solve_check import Machine, Request
from feedstock_tools.proofs.solve.solver_process import solve_in_child

# What the rehearsal does after its last check: a solver pick (rehearsal/solver_pick.py), then the
# interpreter exits at once. Prints what it picked, whether py-rattler was loaded here and the threads
# left. Any version serves, as long as the two packages agree.
_PICK_THEN_EXIT = """
import json, os, sys
from pathlib import Path
from types import SimpleNamespace

from feedstock_tools.proofs.rehearsal.plan import Step
from feedstock_tools.proofs.rehearsal.solver_pick import solver_pick

def built(name, build, run=()):
    return SimpleNamespace(step=Step(name, "1.0.0", 0, build, {}, True, "3.12", run=run))

packages = [built("libtorch", "cpu_generic_h0_0"),
            built("pytorch", "cpu_generic_py312_h0_0", run=("libtorch 1.0.0 cpu_generic_h0_0",))]
picked = solver_pick(packages, ["pytorch"], "linux-64", {}, Path(sys.argv[1]))
print(json.dumps({"picked": sorted(b.step.name for b in picked),
                  "rattler loaded": any(name.startswith("rattler") for name in sys.modules),
                  "threads": len(os.listdir("/proc/self/task"))}))
"""
RUNS = 4  # at once: the load that widened the window before


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_a_solver_pick_then_exit_ends_with_exit_0_and_no_thread_of_py_rattler(tmp_path: Path) -> None:
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", _PICK_THEN_EXIT, str(tmp_path / f"channel-{index}")],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(RUNS)
    ]
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert (run.returncode, "Fatal Python error" in err) == (0, False), err
        assert json.loads(out) == {"picked": ["libtorch", "pytorch"], "rattler loaded": False, "threads": 1}


def test_a_solver_failure_is_one_line_and_the_child_keeps_serving(tmp_path: Path) -> None:
    machine = Machine("linux-64", "linux-64", ("__unix=0=0", "__glibc=2.28=0"))
    with pytest.raises(ToolError) as failure:
        solve_in_child(tmp_path / "no-channel", Request("r", ("pytorch",), (), {}), machine)
    assert str(failure.value).startswith("py-rattler's solver failed for pytorch: ")
    assert "\n" not in str(failure.value)
    empty = Channel().write(tmp_path / "empty")
    outcome = solve_in_child(empty, Request("r", ("pytorch",), (), {}), machine)
    assert not outcome.solved and "pytorch" in outcome.error
