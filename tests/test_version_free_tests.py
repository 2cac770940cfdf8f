"""No test repeats the recipe's version: a version change alone must leave the suite green (issue 29); nor
one of its GPU architecture lists or ``__cuda_arch`` bounds, nor a solve-check request of one of its Pythons
(issue 46: an architecture list changed or a Python dropped, the suite stays green).

A test reads the version from the recipe (``recipe_matrix.RECIPE_VERSION``, or a rendering); a test of a real
artefact (a wheel, a file list cut from one) takes the artefact's version from the artefact's name. The files
below hold such names, or conda-build examples with versions of their own, and are left out of the scan.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from recipe_matrix import RECIPE_VERSION

from feedstock_tools.common.configuration import read_configuration
from feedstock_tools.conda import cuda_arch

TESTS = Path(__file__).resolve().parent
# the test modules and their helpers, in the folders that mirror the layers (not the stand-ins' or data's
# code)
TEST_FILES = sorted(
    path
    for path in TESTS.rglob("*.py")
    if not {"upstream_standin", "upstream_standin_skbuild", "data"} & set(path.relative_to(TESTS).parts)
)
# file -> why its strings may name a release (every one of these is a real artefact's identity or an example)
NAMES_REAL_ARTEFACTS = {
    "test_cuda_wheel_files.py": "the file list of the real CUDA wheel, by its file name",
    "test_deps.py": "the real CPU wheel, PyPI's METADATA of the CUDA wheel, a source tree named as it",
    "test_fault_injection.py": "the real CPU wheel's name and a tarball named as upstream names it",
    "test_gpu_check.py": "a test double made of the real CUDA wheel's paths, with its tag",
    "test_linkage.py": "every target's real wheel, by its file name",
    "test_megabuild_staging.py": "file names of the real wheel (dist-info), of conda-forge's package tests",
    "test_megabuild_windows_staging.py": "the file list of the real win_amd64 wheel",
    "test_recipe_render.py": "conda-build's pin arithmetic on example versions",
    "test_strict_inputs.py": "a broken wheel named as the real one",
    "test_wheel_layout.py": "the real CPU wheel's path",
    "wheel_fixtures.py": "every target's real wheel and the fixtures cut from it, by file name",
}
VERSION = re.compile(rf"(?<![\d.]){re.escape(RECIPE_VERSION)}(?![\d])")


def strings_outside_docstrings(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    documented = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, documented) and node.body and isinstance(node.body[0], ast.Expr)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


@pytest.mark.parametrize(
    "path",
    [p for p in TEST_FILES if p.name not in NAMES_REAL_ARTEFACTS],
    ids=lambda p: p.name,
)
def test_no_string_repeats_the_recipes_version(path: Path) -> None:
    found = [
        f"{path.name}:{line}: {text!r}"
        for line, text in strings_outside_docstrings(path)
        if VERSION.search(text)
    ]
    assert not found, (
        f"the recipe's version {RECIPE_VERSION} written into a test (read recipe_matrix.RECIPE_VERSION, or a "
        "real artefact's version from its name): " + "; ".join(found)
    )


def test_the_exempt_files_exist() -> None:
    assert sorted(set(NAMES_REAL_ARTEFACTS) - {path.name for path in TEST_FILES}) == []


REPO = TESTS.parent
# meta.yaml's lists of two or more architectures (a one-entry list, Jetson Orin's own "8.7+PTX", is a fact of
# the device the tests state as such), and the bound each gives __cuda_arch
ARCH_LISTS = sorted(
    {
        line.value
        for line in cuda_arch.arch_lines((REPO / "recipe" / "meta.yaml").read_text())
        if ";" in line.value
    }
)
BOUNDS = sorted({f"__cuda_arch >={value.split(';')[0]}" for value in ARCH_LISTS})
# the recipe's Pythons as a solve-check request names them ("pytorch python=3.12")
PYTHONS = sorted(
    {p.version for path in (REPO / ".ci_support").glob("*.yaml") for p in read_configuration(path).pythons}
)
REQUESTS = [f"python={python}" for python in PYTHONS]


@pytest.mark.parametrize("path", TEST_FILES, ids=lambda p: p.name)
def test_no_string_repeats_the_recipes_gpu_architectures_or_a_python_request(path: Path) -> None:
    found = [
        f"{path.name}:{line}: {text!r}"
        for line, text in strings_outside_docstrings(path)
        if any(fact in text for fact in (*ARCH_LISTS, *BOUNDS, *REQUESTS))
    ]
    assert not found, (
        "a fact of the recipe written into a test (read meta.yaml's lists with "
        "feedstock_tools.conda.cuda_arch, the bounds and Pythons from the recipe's packages or "
        "configurations, or state a list of your own): " + "; ".join(found)
    )


def test_the_facts_banned_here_are_the_recipes() -> None:
    assert ARCH_LISTS and BOUNDS and PYTHONS
