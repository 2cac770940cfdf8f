"""The parity table with conda-forge's 2.13.0 recipe cannot drift: every row's value is computed for every
platform family from the driver's environment and the rendered recipe
(feedstock_tools/maintainer/anchor_parity.py), and docs/reference/anchor-parity.md is the table's
rendering."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from feedstock_tools.__main__ import main
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.maintainer import anchor_parity
from feedstock_tools.maintainer.anchor_parity import (
    DOC_FILE,
    Table,
    disagreements,
    load_table,
    render_markdown,
)

CI_SUPPORT = REPO_ROOT / ".ci_support"


@pytest.fixture(scope="module")
def table() -> Table:
    return load_table()


def test_every_row_agrees_with_the_driver_and_the_rendered_recipe(table: Table) -> None:
    assert disagreements(table, CI_SUPPORT) == []
    assert set(table.families) >= {"linux-64 cpu", "linux-aarch64 tegra", "osx-64", "win-64 cuda"}
    assert len({row.setting for row in table.rows}) == len(table.rows)


def test_the_document_is_the_tables_rendering(table: Table) -> None:
    assert DOC_FILE.read_text(encoding="utf-8") == render_markdown(table), (
        "docs/reference/anchor-parity.md is stale: run python -m feedstock_tools anchor-parity --write"
    )


def test_a_row_that_no_longer_matches_turns_red(table: Table) -> None:
    (itt,) = [row for row in table.rows if row.setting == "USE_ITT"]
    wrong = dataclasses.replace(table, rows=(dataclasses.replace(itt, ours="ON"),))
    problems = disagreements(wrong, CI_SUPPORT)
    assert len(problems) == len(itt.families)
    assert problems[0] == f"USE_ITT [{itt.families[0]}]: the table says 'ON', this feedstock has 'OFF'"


def test_a_driver_change_turns_its_rows_red(table: Table, monkeypatch: pytest.MonkeyPatch) -> None:
    """The noexecstack fix removed from the driver: the table's linux rows disagree."""
    from megabuild import environment

    monkeypatch.setattr(environment, "LINUX_LDFLAGS_ADDED", ())
    (row,) = [row for row in table.rows if row.setting == "-Wl,-z,noexecstack"]
    problems = disagreements(dataclasses.replace(table, rows=(row,)), CI_SUPPORT)
    assert [line.split("]")[0] for line in problems] == [
        f"-Wl,-z,noexecstack [{name}" for name in row.families
    ]


def test_a_row_checking_nothing_must_name_the_job_that_settles_it(tmp_path: Path) -> None:
    text = anchor_parity.TABLE_FILE.read_text(encoding="utf-8")
    broken = tmp_path / "table.yaml"
    broken.write_text(
        text.replace('    verify: "the first osx-64 job\'s host prefix listing (no git/ directory)"\n', "")
    )
    with pytest.raises(ToolError, match=r"row 'rm -rf \$PREFIX/git' checks nothing here"):
        load_table(broken)


def test_the_command_reports_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["anchor-parity"]) == 0
    err = capsys.readouterr().err
    counts = anchor_parity.summary(load_table())
    assert f"{sum(counts.values())} settings: {counts['same']} same" in err


def test_a_decision_that_contradicts_the_rows_values_is_named(table: Table) -> None:
    """USE_MAGMA's anchor sets 1 where ours is OFF ("different"): called "fixed now", the row contradicts its
    own values, and the line says which decision they mean."""
    (magma,) = [row for row in table.rows if row.setting == "USE_MAGMA (linux)"]
    assert anchor_parity.contradictions(dataclasses.replace(table, rows=(magma,))) == []
    wrong = dataclasses.replace(table, rows=(dataclasses.replace(magma, decision="fixed now"),))
    (problem,) = anchor_parity.contradictions(wrong)
    assert problem.setting == magma.setting
    assert "decision 'fixed now' contradicts" in problem.fix and "different or not needed" in problem.fix
    # and the other way round: a value that is the anchor's, called "different"
    (itt,) = [row for row in table.rows if row.setting == "USE_ITT"]
    wrong = dataclasses.replace(table, rows=(dataclasses.replace(itt, decision="different"),))
    (problem,) = anchor_parity.contradictions(wrong)
    assert "same or fixed now" in problem.fix


def test_no_row_of_the_table_contradicts_itself(table: Table) -> None:
    assert anchor_parity.contradictions(table) == []


def test_a_requirements_ours_is_read_from_the_recipe(table: Table) -> None:
    """The document shows the rendered recipe's spec of a requirement row (triton's series, which a release
    bump changes), and the table itself states no version of it."""
    (triton,) = [row for row in table.rows if row.check.get("name") == "triton"]
    meta = (REPO_ROOT / "recipe" / "meta.yaml").read_text()
    spec = re.search(r"^        - (triton [^#\n]*?)\s*#", meta, re.M)[1]  # type: ignore[index]
    line = next(
        line for line in render_markdown(table).splitlines() if line.startswith(f"| {triton.setting} |")
    )
    assert f"`{spec}`" in line
    assert spec.split()[1] not in anchor_parity.TABLE_FILE.read_text(encoding="utf-8")


def test_a_missing_table_says_how_to_restore_it(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match=r"is missing: restore it with git checkout -- feedstock_tools/"):
        load_table(tmp_path / "anchor_parity.yaml")
