"""recipe-v1/recipe.yaml (v1) against recipe/meta.yaml with the real rattler-build, where the v1 recipe
lives, the local channel, and (marker ``rattler_build``) a real build of recipe.yaml from that channel:
docs/reference/real-build.md."""

from __future__ import annotations

import fnmatch
import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from real_build_outcome import assert_a_job_of_both_blas

from feedstock_tools.common.configuration import Configuration, read_configuration
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.conda import rattler_render
from feedstock_tools.maintainer import render_v1
from feedstock_tools.proofs.builders import local_channel, real_build
from feedstock_tools.proofs.solve.solve_check import machine_of
from megabuild import python_target

CI_SUPPORT = REPO_ROOT / ".ci_support"
CPU_CONFIG = next(CI_SUPPORT.glob(real_build.DEFAULT_CONFIG + ".yaml"))
CUDA_CONFIG = next(CI_SUPPORT.glob(real_build.CUDA_CONFIG + ".yaml"))
CPU, CUDA = read_configuration(CPU_CONFIG), read_configuration(CUDA_CONFIG)
CPU_PYTHONS, CUDA_PYTHONS = real_build.default_pythons(CPU), real_build.default_pythons(CUDA)
V1_RECIPE = real_build.V1_DIR / "recipe.yaml"


# ---- the render comparison ---------------------------------------------------------------------------


@pytest.mark.parametrize("config", sorted(CI_SUPPORT.glob("*.yaml")), ids=lambda p: p.stem)
def test_recipe_yaml_renders_as_meta_yaml_for_every_configuration(config: Path) -> None:
    outputs, differences = render_v1.compare_config(REPO_ROOT / "recipe", config)
    # an output only one recipe builds is a difference too ("output")
    assert [d.line() for d in differences] == []
    assert {"libtorch", "pytorch"} <= {line.split()[0] for line in outputs}


def _copy_recipes(root: Path) -> tuple[Path, Path]:
    for name in ("recipe", render_v1.V1_DIRNAME):
        shutil.copytree(REPO_ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    return root / "recipe", root / render_v1.V1_DIRNAME


def test_a_change_to_one_recipe_is_named(tmp_path: Path) -> None:
    recipe, v1 = _copy_recipes(tmp_path)
    text = (v1 / "recipe.yaml").read_text()
    assert text.count("        - networkx >=2.5.1\n") == 1
    (v1 / "recipe.yaml").write_text(text.replace("- networkx >=2.5.1\n", "- networkx >=3\n"))
    _, differences = render_v1.compare_config(recipe, CPU_CONFIG)
    fields = {(d.output.split()[0], d.field) for d in differences}
    assert fields == {("pytorch", "run")}
    assert all("networkx >=2.5.1" in d.meta and "networkx >=3" in d.v1 for d in differences)


# ---- where the v1 recipe lives, and the values it states as meta.yaml does ---------------------------


def test_each_recipe_format_has_its_own_directory(tmp_path: Path) -> None:
    """conda-smithy lints R-051 when one directory holds meta.yaml and recipe.yaml (render_v1 cites it)."""
    assert render_v1.layout_problems(REPO_ROOT) == []
    recipe, v1 = _copy_recipes(tmp_path)
    shutil.copy2(v1 / "recipe.yaml", recipe / "recipe.yaml")
    problems = render_v1.layout_problems(tmp_path)
    assert [where for where, _ in problems] == ["recipe/"]
    assert (
        "both meta.yaml and recipe.yaml" in problems[0][1]
        and render_v1.DUPLICATE_RECIPES_LINT in problems[0][1]
    )


def test_the_v1_recipe_reaches_recipe_files_without_copies() -> None:
    """Patches and scripts as ../recipe/... paths, test files as path sources: nothing but recipe.yaml and
    the variant file (which conda-smithy reads from recipe_dir) is in recipe-v1/."""
    assert sorted(p.name for p in real_build.V1_DIR.iterdir()) == ["conda_build_config.yaml", "recipe.yaml"]
    stage = rattler_render.render(V1_RECIPE, CPU, ["3.12"])[0].recipe["staging_caches"][0]
    tarball, *paths = stage["source"]
    assert tarball["patches"] and all(
        (real_build.V1_DIR / patch).resolve().parent == (REPO_ROOT / "recipe" / "patches").resolve()
        for patch in tarball["patches"]
    )
    assert [(real_build.V1_DIR / s["path"]).resolve() for s in paths] == [
        (REPO_ROOT / "recipe" / s["target_directory"]).resolve() for s in paths
    ]


def test_a_sha256_changed_in_one_recipe_only_is_named(tmp_path: Path) -> None:
    recipe, v1 = _copy_recipes(tmp_path)
    text = (v1 / "recipe.yaml").read_text()
    context = yaml.safe_load(text)["context"]
    (v1 / "recipe.yaml").write_text(text.replace(context["sha256"], "cd" * 32, 1))
    _, differences = render_v1.compare_config(recipe, CPU_CONFIG)
    assert [(d.output, d.field, d.meta, d.v1) for d in differences] == [
        ("source", "sha256", context["sha256"], "cd" * 32)
    ]


def test_v1_variant_config_drops_conda_build_keys_and_filters_pythons() -> None:
    config = rattler_render.variant_config(CPU, ["3.12"])
    source = yaml.safe_load(CPU_CONFIG.read_text())
    assert "channel_sources" in source and "channel_sources" not in config
    assert config["python"] == [v for v in source["python"] if v.startswith("3.12.")]
    with pytest.raises(ToolError, match="none of its Pythons"):
        rattler_render.variant_config(CPU, ["2.7"])


# ---- the local channel -------------------------------------------------------------------------------


def test_versions_come_from_the_recipes_specs() -> None:
    outputs = rattler_render.render(V1_RECIPE, CPU, ["3.12"])
    plan = real_build.channel_plan(outputs, CPU, ["3.12"])
    versions = {n: local_channel.choose_version(n, s, plan.pins.get(n)) for n, s in plan.needs.items()}
    variant = yaml.safe_load(CPU_CONFIG.read_text())
    # a pinned name gets the pin, a bounded one the lowest version its bounds accept
    assert versions["libabseil"] == str(variant["libabseil"][0])
    assert versions["cmake"] == "3.27"
    assert versions["fsspec"] == "0.8.5"
    assert versions["jinja2"] == "0"  # no digits taken from a name
    assert plan.compilers == {"c": "gcc_linux-64", "cxx": "gxx_linux-64"}
    assert plan.stdlib == "sysroot_linux-64"
    assert plan.pythons == {"3.12": "*_cpython"}
    # one libblas per build-string glob of the job's specs (its two BLAS): each spec finds its own
    strings = local_channel.build_strings(plan.needs["libblas"])
    assert len(strings) == len({spec.split()[-1] for spec in plan.needs["libblas"] if "*" in spec}) > 1
    assert all(
        any(fnmatch.fnmatch(b, spec.split()[-1]) for b in strings)
        for spec in plan.needs["libblas"]
        if "*" in spec
    )


def test_contradicting_specs_are_one_line() -> None:
    with pytest.raises(ToolError, match=r"^local channel: no version of x satisfies x >=2, x <1 \(step"):
        local_channel.choose_version("x", ["x >=2", "x <1"], None)


def test_a_missing_cpython_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_channel.prefixes, "find_interpreter", lambda minor: None)
    with pytest.raises(
        ToolError, match=r"no CPython 3\.99 on this machine \(step: python 3\.99\); install it"
    ):
        local_channel.python_packages("3.99", "*_cpython")


def test_a_wheel_that_will_not_repackage_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def download(_minor: str, _python: Path, _requirements: object, making: Any, _log: Path) -> list[Path]:
        wheels = making.staging / "wheels"
        wheels.mkdir()
        (wheels / "broken-1.0-py3-none-any.whl").write_bytes(b"not a zip")
        return [wheels / "broken-1.0-py3-none-any.whl"]

    monkeypatch.setattr(local_channel, "_download", download)
    with pytest.raises(ToolError, match=r"broken-1\.0-py3-none-any\.whl will not repackage .*pip cache"):
        local_channel.wheel_packages("3.12", ["broken"], tmp_path / "wheels", tmp_path / "log")
    assert not list((tmp_path / "wheels").glob("wheels-*"))  # no entry, and no staging left
    assert not list((tmp_path / "wheels" / ".staging").iterdir())


def test_a_package_is_a_real_conda_file(tmp_path: Path) -> None:
    draft = local_channel.PackageDraft(
        "demo", "1.0", "h0", depends=["x >=1"], run_exports={"weak": ["demo >=1.0"]},
        files={"bin/tool": b"#!/bin/sh\n", "lib/link": Path("/usr/lib")},
    )  # fmt: skip
    path = local_channel.write_package(draft, tmp_path)
    from conda_package_handling import api

    api.extract(str(path), str(tmp_path / "x"))
    index = yaml.safe_load((tmp_path / "x" / "info" / "index.json").read_text())
    assert (index["name"], index["version"], index["build"], index["depends"]) == (
        "demo",
        "1.0",
        "h0",
        ["x >=1"],
    )
    assert yaml.safe_load((tmp_path / "x" / "info" / "run_exports.json").read_text()) == {
        "weak": ["demo >=1.0"]
    }
    assert (tmp_path / "x" / "lib" / "link").readlink() == Path("/usr/lib")
    assert zipfile.is_zipfile(path)


# objects of a small job's build and their sources, three of which the stand-in declares dependent
# (tests/upstream_standin/compile_inputs.json): CPUBlas on the BLAS, Module on the Python,
# BatchLinearAlgebra on MAGMA
JOB_OBJECTS = {
    "c10/CMakeFiles/c10.dir/core/Allocator.cpp.o": "c10/core/Allocator.cpp",
    "caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/CPUBlas.cpp.o": (
        "aten/src/ATen/native/CPUBlas.cpp"
    ),
    "caffe2/torch/CMakeFiles/torch_python.dir/csrc/Module.cpp.o": "torch/csrc/Module.cpp",
    "caffe2/torch/CMakeFiles/torch_python.dir/csrc/Size.cpp.o": "torch/csrc/Size.cpp",
    "caffe2/CMakeFiles/torch_cuda_linalg.dir/__/aten/src/ATen/native/cuda/linalg/BatchLinearAlgebra.cpp.o": (
        "aten/src/ATen/native/cuda/linalg/BatchLinearAlgebra.cpp"
    ),
    "caffe2/CMakeFiles/torch_cuda_linalg.dir/__/aten/src/ATen/native/cuda/linalg/Other.cpp.o": (
        "aten/src/ATen/native/cuda/linalg/Other.cpp"
    ),
}


def _kept_reports(root: Path, passes: list[tuple[str, str, list[str]]]) -> Path:
    """What REPORT_WRAPPER keeps of each pass (report, pass 1's state, compile database), in run order."""
    reports, src = root / "reports", root / "work"
    reports.mkdir(parents=True)
    database = [
        {"directory": str(src / "build"), "output": obj, "file": str(src / source)}
        for obj, source in JOB_OBJECTS.items()
    ]
    for stamp, (name, blas, compiled) in enumerate(passes, start=1000):
        by_target: dict[str, int] = {}
        for obj in compiled:
            target = obj.split("CMakeFiles/")[1].split(".dir/")[0]
            by_target[target] = by_target.get(target, 0) + 1
        record = {"pass_name": name, "objects_compiled": compiled, "objects_by_target": by_target}
        (reports / f"{stamp}.json").write_text(json.dumps({"passes": [record]}))
        (reports / f"{stamp}.pass1").write_text(json.dumps({"blas": blas}))
        (reports / f"{stamp}.compdb").write_text(json.dumps(database))
    return reports


def test_the_compile_work_ratio_counts_real_compiles_against_the_jobs_limit(tmp_path: Path) -> None:
    """A job of two BLAS and two Pythons in conda-build's order: pass 1 compiles all, MAGMA's pass its
    dependent object, the new Python its Python-dependent one, the second BLAS its BLAS-dependent one;
    everything else the compiler cache serves."""
    linked = python_target.python_linked_targets("linux-64")
    objects = list(JOB_OBJECTS)
    cpublas, module, magma = objects[1], objects[2], objects[4]
    passes = [
        ("1 libtorch-split", "mkl", objects),
        ("2 libtorch", "mkl", []),
        ("3 libtorch-cuda-linalg (magma)", "mkl", [magma]),
        ("3 libtorch-cuda-linalg (nomagma)", "mkl", []),
        ("4 pytorch (py3.12)", "mkl", [module]),
        ("4 pytorch (py3.10)", "mkl", []),
        ("1 libtorch-split", "generic", [cpublas]),
        ("2 libtorch", "generic", []),
        ("3 libtorch-cuda-linalg (magma)", "generic", []),
        ("4 pytorch (py3.12)", "generic", []),
        ("4 pytorch (py3.10)", "generic", []),
    ]
    good = real_build.read_reports(_kept_reports(tmp_path / "good", passes))
    ratio = real_build.compile_work_ratio(good, linked, "3.10")
    assert (ratio.pass1, ratio.linalg, ratio.python_bindings, ratio.extra_pythons) == (6, 1, 1, 1)
    assert (ratio.blas, ratio.blas_static, ratio.blas_python, ratio.extra_blases) == (1, 0, 0, 1)
    assert ratio.compiled == ratio.expected == 6 + 1 + 1 * 1 + 1 * (1 + 0 + 0 * 2)
    assert {r.label: r.by_target for r in good}["1 libtorch-split [generic]"] == {"torch_cpu": 1}
    passes[5] = ("4 pytorch (py3.10)", "mkl", [objects[0]])  # a pass recompiling what it must not
    bad = real_build.read_reports(_kept_reports(tmp_path / "bad", passes))
    ratio = real_build.compile_work_ratio(bad, linked, "3.10")
    assert ratio.compiled == ratio.expected + 1


def test_an_install_the_solver_refuses_is_one_line(tmp_path: Path) -> None:
    for channel in ("built", "local"):
        for subdir in ("linux-64", "noarch"):
            (tmp_path / channel / subdir).mkdir(parents=True)
            empty = {"info": {"subdir": subdir}, "packages": {}, "packages.conda": {}}
            (tmp_path / channel / subdir / "repodata.json").write_text(json.dumps(empty))
    outcome = real_build.BuildOutcome(
        config="cfg",
        channel=tmp_path / "local",
        channel_seconds=0.0,
        channel_bytes=0,
        build_seconds=0.0,
        packages=[tmp_path / "built" / "linux-64" / "pytorch-cpu-1.0.0-x_0.conda"],
    )
    with pytest.raises(ToolError) as error:
        real_build.install_and_use(
            outcome, "pytorch-cpu", tmp_path / "prefix", machine_of("linux-64", None), "3.12"
        )
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("the solver refuses pytorch-cpu python 3.12.* from ")
    assert "(step: install)" in message
    assert not (tmp_path / "prefix").exists()


# ---- the packages' tests the real build leaves out ---------------------------------------------------


def test_the_test_commands_that_need_real_pytorch_are_left_out_by_name() -> None:
    recipe = {
        "outputs": [
            {"package": {"name": "libtorch"}, "tests": [{"script": ["test -f a", "run consumer"]}]},
            {
                "package": {"name": "pytorch"},
                "tests": [
                    {"python": {"imports": ["torch"]}},
                    {"script": [{"if": "unix", "then": ["check one", "keep"], "else": "check two"}]},
                    {"script": [{"if": "linux", "then": "check three"}]},
                    {"script": [{"if": "osx", "then": "check four", "else": "keep on win"}]},
                ],
            },
        ]
    }
    skips = {"libtorch": (("consumer", "needs ATen"),), "pytorch": (("check", "needs torch"),)}
    skipped = real_build.leave_out_tests(recipe, skips)
    assert recipe["outputs"][0]["tests"] == [{"script": ["test -f a"]}]
    # a branch left empty keeps the other under the negated condition; a test left empty goes
    assert recipe["outputs"][1]["tests"] == [
        {"python": {"imports": ["torch"]}},
        {"script": [{"if": "unix", "then": ["keep"]}]},
        {"script": [{"if": "not (osx)", "then": "keep on win"}]},
    ]
    assert [(s.output, s.command, s.reason) for s in skipped] == [
        ("libtorch", "run consumer", "needs ATen"),
        ("pytorch", "check one", "needs torch"),
        ("pytorch", "check two", "needs torch"),
        ("pytorch", "check three", "needs torch"),
        ("pytorch", "check four", "needs torch"),
    ]
    recipe = {"outputs": [{"package": {"name": "pytorch"}, "tests": [{"script": ["test -f a"]}]}]}
    with pytest.raises(ToolError, match="no test command of pytorch contains 'gone'; remove it from"):
        real_build.leave_out_tests(recipe, {"pytorch": (("gone", "stale"),)})


def assert_the_recipes_tests_were_kept(build: real_build.BuildOutcome, config: Configuration) -> None:
    """Every built package carries its output's tests as the recipe renders them for the configuration,
    every import and every command but those TESTS_THAT_NEED_REAL_PYTORCH names (run_build ran them:
    a failing one fails the build)."""
    from rattler_build import Package

    rendered = {}
    for output in rattler_render.render(V1_RECIPE, config, real_build.default_pythons(config)):
        rendered.setdefault(output.name, output.recipe.get("tests", []))
    for path in build.packages:
        package = Package.from_file(path)
        tests = rendered[package.name]
        fragments = [f for f, _ in real_build.TESTS_THAT_NEED_REAL_PYTORCH.get(package.name, ())]
        commands = [c for t in tests for c in t.get("script", []) if not any(f in c for f in fragments)]
        kept = [t.to_dict() for t in package.tests]
        assert [t["imports"] for t in kept if "imports" in t] == [
            t["python"]["imports"] for t in tests if "python" in t
        ], package.name
        assert len([c for t in kept if "script" in t for c in t["script"]["content"]]) == len(commands)
    names = {p.name.rsplit("-", 2)[0] for p in build.packages}
    assert {s.output for s in build.skipped_tests} == set(real_build.TESTS_THAT_NEED_REAL_PYTORCH) & names


# ---- the real build (rattler-build, local channel, stand-in) -----------------------------------------


def real_build_of(config: Configuration, factory: pytest.TempPathFactory) -> real_build.BuildOutcome:
    """rattler-build of the v1 recipe for ``config``, CI's Pythons, the local channel in the shared cache."""
    work = factory.mktemp("rattler-build")
    return real_build.run_build(
        config,
        work / "out",
        real_build.DEFAULT_CACHE,
        real_build.default_pythons(config),
        progress=lambda line: None,
    )


@pytest.fixture(scope="session")
def cpu_build(tmp_path_factory: pytest.TempPathFactory) -> real_build.BuildOutcome:
    return real_build_of(CPU, tmp_path_factory)


@pytest.mark.rattler_build
def test_rattler_build_builds_the_cpu_job(cpu_build: real_build.BuildOutcome, tmp_path: Path) -> None:
    expected = [o.name for o in rattler_render.render(V1_RECIPE, CPU, CPU_PYTHONS)]
    assert_a_job_of_both_blas(cpu_build, CPU, expected, tmp_path / "extracted")
    assert_the_recipes_tests_were_kept(cpu_build, CPU)
    meta, machine = real_build.metapackage_and_machine(CPU)
    assert meta == "pytorch-cpu"
    for minor in CPU_PYTHONS:
        installed = real_build.install_and_use(cpu_build, meta, tmp_path / f"p{minor}", machine, minor)
        assert any(name.startswith(f"python-{minor}.") for name in installed)
        assert any(name.startswith("pytorch-cpu-") for name in installed)


@pytest.fixture(scope="session")
def cuda_build(tmp_path_factory: pytest.TempPathFactory) -> real_build.BuildOutcome:
    return real_build_of(CUDA, tmp_path_factory)


@pytest.mark.rattler_build
def test_rattler_build_builds_the_cuda_job(cuda_build: real_build.BuildOutcome, tmp_path: Path) -> None:
    expected = [o.name for o in rattler_render.render(V1_RECIPE, CUDA, CUDA_PYTHONS)]
    assert_a_job_of_both_blas(cuda_build, CUDA, expected, tmp_path / "extracted")
    # each BLAS's MAGMA pass compiles within torch_cuda_linalg only, the other linalg build nothing
    for label, by_target in ((kept.label, kept.by_target) for kept in cuda_build.passes):
        if label.startswith("3 libtorch-cuda-linalg (magma)"):
            assert set(by_target) <= {"torch_cuda_linalg"}, label
        elif label.startswith("3 libtorch-cuda-linalg (nomagma)"):
            assert by_target == {}, label
    assert_the_recipes_tests_were_kept(cuda_build, CUDA)
    # the driver built with the recipe's GPU architectures (script.env), which libtorch's activation exports
    from conda_package_handling import api

    libtorch = next(p for p in cuda_build.packages if p.name.rsplit("-", 2)[0] == "libtorch")
    api.extract(str(libtorch), str(tmp_path / "libtorch"))
    from megabuild import activation

    script = (tmp_path / "libtorch" / activation.ACTIVATE).read_text()
    rendered = rattler_render.render(V1_RECIPE, CUDA, CUDA_PYTHONS[-1:])
    (arch_list,) = {
        o.recipe["build"]["script"]["env"]["MEGABUILD_CUDA_ARCH_LIST"]
        for o in rendered
        if o.name == "libtorch"
    }
    assert f"{activation.VARIABLE}={arch_list}" in script.replace('"', "").replace("'", "")
    meta, machine = real_build.metapackage_and_machine(CUDA)
    assert meta == "pytorch-gpu"
    installed = real_build.install_and_use(cuda_build, meta, tmp_path / "prefix", machine, CUDA_PYTHONS[-1])
    # the solver prefers the MAGMA build (+50) and brings libmagma with it
    assert any(n.startswith("libtorch-cuda-linalg-") and "_magma_" in n for n in installed)
    assert any(n.startswith("libmagma-") for n in installed)
