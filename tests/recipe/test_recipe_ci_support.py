"""The generated .ci_support files: one CI job per configuration of the issue's table, none splitting on
python or magma_variant. What each job builds is checked in test_recipe_outputs.py (its "ci-" cases)."""

from __future__ import annotations

import pytest
from recipe_matrix import CI_SUPPORT, CONFIGURATIONS, RECIPE, Configuration, ci_support_jobs

from feedstock_tools.conda.recipe_render import render_recipe

JOBS = ci_support_jobs()


def plain(configuration: Configuration) -> Configuration:
    return Configuration(
        configuration.subdir, configuration.blas_impl, configuration.cuda, configuration.arm_variant
    )


def test_every_configuration_of_the_issue_table_has_exactly_one_ci_job():
    assert JOBS, f"no configurations in {CI_SUPPORT}: generate them (python -m feedstock_tools render-ci)"
    assert sorted((plain(job) for job in JOBS), key=lambda c: c.id) == sorted(
        CONFIGURATIONS, key=lambda c: c.id
    )


@pytest.mark.parametrize("job", JOBS, ids=lambda job: job.config_file.stem)
def test_job_lists_every_python_and_both_magma_variants(job):
    assert job.config_file is not None
    recipe = render_recipe(RECIPE, job.config_file)
    assert recipe.top_level is not None
    assert {"python", "magma_variant"}.isdisjoint(recipe.top_level.used_variables)
    assert len({output.variant["python"] for output in recipe.by_name("pytorch")}) == 5
    magma = {output.variant["magma_variant"] for output in recipe.by_name("libtorch-cuda-linalg")}
    assert magma == ({"magma", "nomagma"} if job.has_cuda_linalg else set())
