"""recipe/meta.yaml rendered for every generated .ci_support configuration (the CI jobs themselves)."""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from pathlib import Path

import pytest
from recipe_matrix import CONFIGURATIONS, RECIPE, Configuration

from feedstock_tools.recipe_render import RenderedRecipe, load_variant_config, render_recipe

CI_SUPPORT = Path(__file__).resolve().parents[1] / ".ci_support"
CONFIG_FILES = sorted(CI_SUPPORT.glob("*.yaml"))


def configuration_of(path: Path) -> Configuration:
    config = load_variant_config(path)
    return Configuration(
        subdir=config["target_platform"][0],
        blas_impl=config["blas_impl"][0],
        cuda=str(config["cuda_compiler_version"][0]),
    )


def test_every_configuration_of_the_issue_table_has_a_ci_job():
    assert CONFIG_FILES, (
        f"no configurations in {CI_SUPPORT}: generate them (python -m feedstock_tools render-ci)"
    )
    assert sorted(map(configuration_of, CONFIG_FILES), key=lambda c: c.id) == sorted(
        CONFIGURATIONS, key=lambda c: c.id
    )


@pytest.fixture(scope="module", params=CONFIG_FILES, ids=lambda path: path.stem)
def job(request: pytest.FixtureRequest) -> tuple[Configuration, RenderedRecipe]:
    return configuration_of(request.param), render_recipe(RECIPE, request.param)


def test_one_job_builds_every_output(job):
    configuration, recipe = job
    expected = Counter({"libtorch": 1, "pytorch": 5})
    expected["pytorch-gpu" if configuration.is_cuda else "pytorch-cpu"] = 1
    if configuration.is_cuda:
        expected["libtorch-cuda-linalg"] = 2
    assert Counter(output.name for output in recipe.outputs) == expected


def test_strings_numbers_and_pins(job):
    configuration, recipe = job
    prefix = f"{configuration.flavour}_{configuration.blas_impl}"
    number = (200 if configuration.is_cuda else 0) + (100 if configuration.blas_impl == "mkl" else 0)
    (libtorch,) = recipe.by_name("libtorch")
    assert re.fullmatch(rf"{prefix}_h[0-9a-f]{{7}}_{number}", libtorch.build_string)
    pythons = set()
    for pytorch in recipe.by_name("pytorch"):
        match = re.fullmatch(rf"{prefix}_py(3\d+)_h[0-9a-f]{{7}}_{number}", pytorch.build_string)
        assert match, pytorch.build_string
        pythons.add(match.group(1))
        assert f"libtorch 2.13.0 {libtorch.build_string}" in pytorch.requirements.run
    assert pythons == {"310", "311", "312", "313", "314"}
    for linalg in recipe.by_name("libtorch-cuda-linalg"):
        magma = linalg.variant["magma_variant"]
        assert linalg.build_number == number + (50 if magma == "magma" else 0)
        assert linalg.build_string.startswith(f"{prefix}_{magma}_h")
    (meta,) = [o for o in recipe.outputs if o.name in ("pytorch-cpu", "pytorch-gpu")]
    (spec,) = meta.requirements.run
    assert all(fnmatch.fnmatchcase(p.build_string, spec.split()[2]) for p in recipe.by_name("pytorch"))


def test_job_does_not_split_on_python_or_magma(job):
    _, recipe = job
    assert recipe.top_level is not None
    assert {"python", "magma_variant"}.isdisjoint(recipe.top_level.used_variables)
