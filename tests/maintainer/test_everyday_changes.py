"""A maintainer's everyday changes on a copy of the feedstock, each one edit plus the commands its guide names
(docs/guides/add-or-drop-a-python.md, change-cuda-architectures.md), then every verdict green: ``check``,
``render-ci --check``, ``convert-v1 --check``, ``python-floor --check`` and ``solve-check``, whose
expectations follow the recipe with no edit of solve_requests.yaml. (Adding a patch: test_patch_list.py.)

The two changes share one copy and one process, so the renders are made once for all the checks: the
commands run in-process, check's rules and its anchor-parity families share the renders and compiled
templates, and solve-check's channel the compiled templates. The Python dropped is the recipe's oldest and
the architecture dropped the oldest of the newest CUDA's lists, both read from the recipe: nothing here
names a version the recipe states.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from bump_fixtures import FEEDSTOCK, PINNING, copy_feedstock

from feedstock_tools.__main__ import main
from feedstock_tools.common.configuration import read_configuration, version_key
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.conda import cuda_arch
from feedstock_tools.maintainer import anchor_parity, check
from feedstock_tools.proofs.solve import expectations, solve_check
from feedstock_tools.proofs.solve.solve_channel import build_channel

CUDA_SELECTOR = re.compile(r'cuda_compiler_version == "([\d.]+)"')


@dataclass(frozen=True)
class Changed:
    root: Path
    dropped_python: str
    floor: str
    cuda: str  # the newest CUDA, whose lists lost their oldest architecture
    old_bound: str
    new_bound: str
    outputs: dict[str, str]  # command -> what it printed (stdout)


def run(*arguments: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(list(arguments))
    return status, out.getvalue()


def drop_the_oldest_python(root: Path) -> tuple[str, str]:
    """The guide's one edit: python_min in recipe/conda_build_config.yaml, one Python up."""
    pythons = sorted(
        (p.version for p in read_configuration(next((root / ".ci_support").glob("*.yaml"))).pythons),
        key=version_key,
    )
    config = root / "recipe" / "conda_build_config.yaml"
    config.write_text(config.read_text() + f'\npython_min:\n  - "{pythons[1]}"\n')
    return pythons[0], pythons[1]


def start_the_newest_cuda_later(root: Path) -> tuple[str, str, str]:
    """The guide's one edit: every list of the newest CUDA loses its oldest architecture."""
    meta = root / "recipe" / "meta.yaml"
    text = meta.read_text()
    lines = [
        line for line in cuda_arch.arch_lines(text) if line.selector and CUDA_SELECTOR.search(line.selector)
    ]
    cuda = max((CUDA_SELECTOR.search(line.selector or "")[1] for line in lines), key=version_key)  # type: ignore[index]
    newest = [line for line in lines if CUDA_SELECTOR.search(line.selector or "")[1] == cuda]  # type: ignore[index]
    (old_bound,) = {line.value.split(";")[0] for line in newest}
    (new_bound,) = {line.value.split(";")[1] for line in newest}
    rows = text.split("\n")
    for line in newest:
        rows[line.line - 1] = rows[line.line - 1].replace(f'"{old_bound};', '"', 1)
    meta.write_text("\n".join(rows))
    return cuda, old_bound, new_bound


def decide_the_parity_rows(root: Path) -> list[str]:
    """What the guide asks after check names them: the rows whose decision the new list contradicts get a
    decision and a why (a judgement, not a restated value: the list itself is read from the recipe)."""
    table = root / anchor_parity.TABLE_NAME
    text = table.read_text()
    settings = sorted({p.setting for p in anchor_parity.contradictions(
        anchor_parity.load_table(table),
        anchor_parity.actuals(anchor_parity.load_table(table), root / ".ci_support", root),
    )})  # fmt: skip
    for setting in settings:
        row = re.search(
            rf"^  - setting: {re.escape(setting)}\n(?:    .*\n)*?    decision: same\n    why: .*\n",
            text,
            re.M,
        )
        assert row, setting
        text = text.replace(
            row[0], row[0].replace("decision: same\n", "decision: different\n").rsplit("    why: ", 1)[0]
            + '    why: "starts later than the anchor (a test of the everyday changes)"\n',
        )  # fmt: skip
    table.write_text(text)
    return settings


@pytest.fixture(scope="module")
def changed(tmp_path_factory: pytest.TempPathFactory) -> Changed:
    root = copy_feedstock(tmp_path_factory.mktemp("everyday") / "feedstock", REPO_ROOT, (
        *FEEDSTOCK, "feedstock_tools/maintainer/anchor_parity.yaml",
    ))  # fmt: skip
    dropped, floor = drop_the_oldest_python(root)
    cuda, old_bound, new_bound = start_the_newest_cuda_later(root)
    outputs = {}
    # the guides' commands: python-floor (the skip, then what render-ci writes: .ci_support, recipe-v1/)
    status, outputs["python-floor"] = run("python-floor", "--root", str(root), "--pinning", str(PINNING))
    assert status == 0
    assert decide_the_parity_rows(root), (
        "the changed list contradicts no parity row: the test changed nothing"
    )
    status, outputs["anchor-parity"] = run("anchor-parity", "--write", "--root", str(root))
    assert status == 0
    return Changed(root, dropped, floor, cuda, old_bound, new_bound, outputs)


def test_the_commands_wrote_the_skip_the_ci_files_and_recipe_v1(changed: Changed) -> None:
    written = changed.outputs["python-floor"].splitlines()
    assert written[0] == (
        f"wrote recipe/meta.yaml: skip: true  # [py<{changed.floor.replace('.', '')}] in the pytorch output"
    )
    assert "wrote recipe-v1/recipe.yaml" in written
    assert all(
        read_configuration(p).python_min == changed.floor
        for p in (changed.root / ".ci_support").glob("*.yaml")
    )


def test_check_is_green(changed: Changed) -> None:
    assert [finding.line() for finding in check.run_checks(changed.root, PINNING)] == []


def test_render_ci_convert_v1_and_python_floor_checks_are_green(changed: Changed) -> None:
    root = str(changed.root)
    assert run("render-ci", "--check", "--root", root, "--pinning", str(PINNING))[0] == 0
    assert run("convert-v1", "--check", "--root", root)[0] == 0
    assert run("python-floor", "--check", "--root", root, "--pinning", str(PINNING))[0] == 0


def test_solve_check_follows_the_recipe_with_no_edit_of_its_table(changed: Changed, tmp_path: Path) -> None:
    recipe, configs = changed.root / "recipe", changed.root / ".ci_support"
    channel = build_channel(changed.root, recipe, configs, pinning_dir=PINNING, progress=lambda _: None)
    facts = solve_check.recipe_facts(channel, recipe)
    machines, requests = solve_check.load_requests(facts)
    rows = solve_check.solve_all(channel, tmp_path, machines, requests, facts)
    assert [f"{r.request.name} on {r.machine.name}: {r.judged()[1]}" for r in rows if not r.judged()[0]] == []
    # no request for the dropped Python; the GPU at the old bound now gets an older CUDA, at the new one
    # the newest
    assert not [r for r in requests if r.name == f"pytorch python={changed.dropped_python}"]
    newest = f"cuda{changed.cuda.replace('.', '')}"
    for bound, gets_newest in ((changed.old_bound, False), (changed.new_bound, True)):
        machine = f"linux-64 cuda{changed.cuda} arch{bound}"
        (row,) = [r for r in rows if r.request.name == "pytorch-gpu" and r.machine.name == machine]
        assert (row.outcome.words()["flavour"] == newest) is gets_newest, row.expectation
    assert any(
        b.arch == tuple(map(int, changed.new_bound.split("."))) for b in facts.builds if b.flavour == newest
    )
    assert expectations.below(changed.new_bound, facts.architectures) == changed.old_bound
