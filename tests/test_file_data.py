"""conda-build's load_file_data as the project's renders emulate it (feedstock_tools/conda/file_data.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from feedstock_tools.common.errors import ToolError
from feedstock_tools.conda.file_data import load_file_data_in


def test_it_reads_a_recipe_file_by_its_suffix_or_format(tmp_path: Path) -> None:
    (tmp_path / "lists.json").write_text('{"linux-64": {"12.9": ["5.0", "12.0+PTX"]}}')
    (tmp_path / "lists.txt").write_text("a: [1, 2]\n")
    load = load_file_data_in(tmp_path)
    assert load("lists.json", from_recipe_dir=True) == {"linux-64": {"12.9": ["5.0", "12.0+PTX"]}}
    assert load("lists.txt", "yaml", from_recipe_dir=True) == {"a": [1, 2]}


def test_a_missing_file_is_empty_only_where_conda_build_permits_undefined_jinja(tmp_path: Path) -> None:
    assert load_file_data_in(tmp_path, permit_missing=True)("gone.json", from_recipe_dir=True) == {}
    with pytest.raises(ToolError, match=r"load_file_data\('gone.json'\): cannot read .*gone.json"):
        load_file_data_in(tmp_path)("gone.json", from_recipe_dir=True)


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        (lambda load: load("lists.json"), "reads the work directory, which holds no source before the build"),
        (lambda load: load("lists.ini", from_recipe_dir=True), "unknown format 'ini'"),
        (lambda load: load("bad.json", from_recipe_dir=True), "cannot read"),
    ],
)
def test_bad_use_is_one_line_naming_the_fix(tmp_path: Path, call, problem: str) -> None:
    (tmp_path / "lists.json").write_text("{}")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ToolError) as error:
        call(load_file_data_in(tmp_path))
    assert problem in str(error.value) and "\n" not in str(error.value)
