"""The generated .ci_support files: one CI job per platform x CUDA of the issue's table, each building every
BLAS its platform has, none splitting on python or magma_variant. What each BLAS of a job builds is checked
in test_recipe_outputs.py (its "ci-" cases)."""

from __future__ import annotations

import pytest
from recipe_matrix import CI_SUPPORT, CONFIGURATIONS, RECIPE, Configuration, ci_support_jobs

from feedstock_tools.common.configuration import read_configuration
from feedstock_tools.conda.recipe_render import render_recipe

JOBS = ci_support_jobs()
FILES = sorted({job.config_file for job in JOBS if job.config_file is not None})


def plain(configuration: Configuration) -> Configuration:
    return Configuration(
        configuration.subdir, configuration.blas_impl, configuration.cuda, configuration.arm_variant
    )


def test_every_configuration_of_the_issue_table_is_one_blas_of_exactly_one_ci_job():
    assert JOBS, f"no configurations in {CI_SUPPORT}: generate them (python -m feedstock_tools render-ci)"
    assert sorted((plain(job) for job in JOBS), key=lambda c: c.id) == sorted(
        CONFIGURATIONS, key=lambda c: c.id
    )
    # the platforms with both BLAS build them in one job: linux-64 3 jobs (CPU, CUDA 12.9, 13.0), osx-64 one
    files_by_platform: dict[str, set] = {}
    for job in JOBS:
        files_by_platform.setdefault(job.subdir, set()).add(job.config_file)
    blases = {job.subdir: set() for job in JOBS}
    for job in JOBS:
        blases[job.subdir].add(job.blas_impl)
    merged = {subdir for subdir, found in blases.items() if len(found) > 1}
    assert merged == {"linux-64", "osx-64"}
    assert {subdir: len(files_by_platform[subdir]) for subdir in merged} == {"linux-64": 3, "osx-64": 1}


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.stem)
def test_job_lists_every_python_and_both_magma_variants(path):
    recipe = render_recipe(RECIPE, path)
    config = read_configuration(path)
    # one top-level build (pass 1) per BLAS of the job, none per Python or MAGMA variant
    assert [top.variant.get("blas_impl") for top in recipe.top_levels] == (
        list(config.blases) if len(config.blases) > 1 else [None]
    )
    for top in recipe.top_levels:
        assert {"python", "magma_variant"}.isdisjoint(top.used_variables)
        outputs = recipe.outputs_of(top)
        assert len({o.variant["python"] for o in outputs if o.name == "pytorch"}) == 5
        magma = {o.variant["magma_variant"] for o in outputs if o.name == "libtorch-cuda-linalg"}
        assert magma == ({"magma", "nomagma"} if config.cuda and path.name.startswith("linux") else set())


@pytest.mark.parametrize(
    "path", [path for path in FILES if len(read_configuration(path).blases) > 1], ids=lambda path: path.stem
)
def test_a_job_of_both_blas_builds_what_each_blas_alone_builds(path):
    """The merged job's packages are those of its BLAS rendered apart (what the separate jobs built), every
    one tied to the pass 1 of its own BLAS."""
    config = read_configuration(path)
    merged = render_recipe(RECIPE, config)
    apart = {blas: render_recipe(RECIPE, config.for_blas(blas)) for blas in config.blases}
    assert sorted(o.dist for o in merged.outputs) == sorted(o.dist for r in apart.values() for o in r.outputs)
    for blas, alone in apart.items():
        (top,) = [top for top in merged.top_levels if top.variant == {"blas_impl": blas}]
        assert {o.dist for o in merged.outputs_of(top)} == {o.dist for o in alone.outputs}
        assert top.requirements.host == alone.top_level.requirements.host
