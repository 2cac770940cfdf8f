"""The standard-library CI-file reader (build-locally.py, .scripts/ci_settings.py) against PyYAML."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from feedstock_tools.common import ci_files

REPO = Path(__file__).resolve().parents[2]
CI_FILES = [*sorted((REPO / ".ci_support").glob("*.yaml")), REPO / "conda-forge.yml"]


@pytest.mark.parametrize("path", CI_FILES, ids=lambda path: path.name)
def test_reader_agrees_with_pyyaml_base_loader(path: Path) -> None:
    text = path.read_text()
    assert ci_files.parse(text) == yaml.load(text, Loader=yaml.BaseLoader)


@pytest.mark.parametrize(
    "text",
    [
        "a: 'it''s'\nb: \"x # not a comment\"\n",
        "zip_keys:\n- - a\n  - b\n- - c\n  - d\n",
        "outer:\n  inner:\n    - 1\n    - '2'  # comment\n  other: value\n",
        "empty:\nnext: 1\n",
        "list:\n  - a\n  - b\n",
    ],
)
def test_reader_agrees_on_the_supported_shapes(text: str) -> None:
    assert ci_files.parse(text) == yaml.load(text, Loader=yaml.BaseLoader)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: [1, 2]\n", "line 1: flow style"),
        ("a:\n  - x\n b: 1\n", "line 3"),
        ("a: 1\na: 2\n", "line 2: duplicate key 'a'"),
        ("- a\n", "must be a mapping"),
        ("a:\n  - k: v\n", "line 2: mappings inside lists"),
    ],
)
def test_reader_rejects_what_it_does_not_understand(text: str, message: str) -> None:
    with pytest.raises(ci_files.CiFileError, match=message):
        ci_files.parse(text)
