"""The package tests as conda-build would run them: requirements, files and commands of the rendered
test sections (recipe_render's emulation of conda-build, per configuration of the issue's table)."""

from __future__ import annotations

import re

import pytest
from recipe_matrix import CONFIGURATIONS, RECIPE, Configuration

from megabuild import cuda_targets
from tests.recipe.test_recipe_outputs import rendered

configurations = pytest.mark.parametrize("configuration", CONFIGURATIONS, ids=lambda c: c.id)
CUDA_DEV = ("cuda-cudart-dev", "cuda-nvrtc-dev", "libcublas-dev", "libcusolver-dev", "libcudnn-dev", "nccl")


def outputs(configuration: Configuration, name: str):
    return [o for o in rendered(configuration).outputs if o.name == name]


def names(specs: list[str]) -> set[str]:
    return {spec.split()[0] for spec in specs}


@configurations
def test_cuda_tests_can_build_cmake_consumers_and_cuda_extensions(configuration: Configuration) -> None:
    for output in outputs(configuration, "libtorch") + outputs(configuration, "pytorch"):
        required = names(output.test.get("requires", []))
        host = names(output.requirements.host)
        nvcc = any(name.startswith("cuda_compiler") or name.startswith("cuda-nvcc") for name in required)
        if configuration.is_cuda:
            cuda_dev = set(CUDA_DEV) - ({"nccl"} if configuration.is_windows else set())  # none for Windows
            assert nvcc, (output.name, sorted(required))
            assert cuda_dev <= required, (output.name, cuda_dev - required)
            # every CUDA dev package the build used is there for find_package(Torch) again
            assert {n for n in host if n.startswith(("cuda-", "libcu"))} <= required
        else:
            assert not nvcc and not required & set(CUDA_DEV)


@configurations
def test_pytorch_checks_complex_dot_and_the_built_in_features(configuration: Configuration) -> None:
    for pytorch in outputs(configuration, "pytorch"):
        commands = pytorch.test["commands"]
        (features,) = [c for c in commands if c.startswith("python tests/check_build_features.py")]
        required = set(features.split("--require")[1].split())
        expected = {"distributed"}
        if configuration.subdir != "osx-arm64":
            expected.add("onednn")
        if configuration.subdir.startswith("osx"):
            expected.add("mps")
        if configuration.is_cuda:
            expected |= {"cudnn", "nccl"}
        if configuration.is_windows:  # oneDNN as conda-forge's bld.bat sets it for CPU builds; no NCCL
            expected = {"cudnn"} if configuration.is_cuda else {"onednn"}
        assert required == expected
        assert ("python tests/check_cuda_extension.py" in commands) == configuration.is_cuda
        for path in pytorch.test["files"]:
            assert (RECIPE / path).exists(), path


@configurations
def test_every_pass_gets_the_recipes_arch_list_and_the_gpu_code_outputs_bound_cuda_arch_by_its_oldest(
    configuration: Configuration,
) -> None:
    """recipe/meta.yaml's one list per configuration: script_env hands the same MEGABUILD_CUDA_ARCH_LIST to
    pass 1 and every scripted output (every CMake re-run reads it again), the driver accepts it, libtorch
    and libtorch-cuda-linalg constrain __cuda_arch to its oldest entry, pytorch's arch check tests that very
    bound, and nothing else carries it (pytorch and the metapackages reach it through libtorch)."""
    recipe = rendered(configuration)
    scripted = [recipe.top_level.build, *(o.build for o in recipe.outputs if o.script is not None)]
    given = {
        tuple(entry for entry in build.get("script_env", []) if entry.startswith("MEGABUILD_CUDA_ARCH_LIST="))
        for build in scripted
    }
    assert len(given) == 1, given  # the same value in every pass
    ((entry,),) = given
    arch_list = entry.removeprefix("MEGABUILD_CUDA_ARCH_LIST=")
    bounds = {
        output.name: [spec for spec in output.requirements.run_constrained if spec.startswith("__cuda_arch")]
        for output in recipe.outputs
    }
    commands = [c for o in outputs(configuration, "pytorch") for c in o.test["commands"]]
    checks = [c for c in commands if c.startswith("python tests/check_cuda_arch_list.py")]
    if not configuration.is_cuda:
        assert arch_list == "" and not any(bounds.values()) and not checks
        return
    archs = cuda_targets.cuda_arch_list({"MEGABUILD_CUDA_ARCH_LIST": arch_list})
    oldest = archs[0].removesuffix("+PTX")
    if configuration.cuda.startswith("13."):  # nvcc 13.0 compiles nothing below Turing (7.5)
        assert tuple(map(int, oldest.split("."))) >= (7, 5), arch_list
    if configuration.arm_variant == "tegra":  # Jetson Orin's own code alone
        assert archs == ["8.7+PTX"]
    carriers = {"libtorch", "libtorch-cuda-linalg"} if configuration.has_cuda_linalg else {"libtorch"}
    assert {name for name, specs in bounds.items() if specs} == carriers
    assert all(bounds[name] == [f"__cuda_arch >={oldest}"] for name in carriers)
    assert set(checks) == {f"python tests/check_cuda_arch_list.py --cuda-arch-min={oldest}"}


@configurations
def test_test_tools_are_pinned(configuration: Configuration) -> None:
    for pytorch in outputs(configuration, "pytorch"):
        specs = {spec.split()[0]: spec for spec in pytorch.test["requires"]}
        for tool in ("pytest", "pytest-timeout", "expecttest", "hypothesis"):
            assert re.search(r"<\d", specs[tool]), specs[tool]  # an upper bound


@configurations
def test_cuda_libtorch_checks_its_arch_list_activation(configuration: Configuration) -> None:
    (libtorch,) = outputs(configuration, "libtorch")
    commands = " ".join(libtorch.test["commands"])
    assert ("CF_TORCH_CUDA_ARCH_LIST" in commands) == configuration.is_cuda


@configurations
def test_commands_are_written_for_the_platform_shell(configuration: Configuration) -> None:
    """conda-build runs test commands with bash on unix and cmd.exe on Windows: each gets its own spelling."""
    for output in outputs(configuration, "libtorch") + outputs(configuration, "pytorch"):
        commands = "\n".join(output.test["commands"])
        unix_only = ("test -f", "test ! -e", "${PREFIX}", "./cmake_test_build/", "$(command -v")
        windows_only = ("if not exist", "%LIBRARY_", "%PREFIX%", "torch_consumer.exe")
        present, absent = (windows_only, unix_only) if configuration.is_windows else (unix_only, windows_only)
        assert not [word for word in absent if word in commands], output.dist
        assert [word for word in present if word in commands], output.dist
    if configuration.is_windows:
        (libtorch,) = outputs(configuration, "libtorch")
        commands = libtorch.test["commands"]
        for lib in ["c10", "torch", "torch_cpu", "shm"] + (
            ["c10_cuda", "torch_cuda", "caffe2_nvrtc"] if configuration.is_cuda else []
        ):
            assert f'if not exist "%LIBRARY_BIN%\\{lib}.dll" exit 1' in commands
            assert f'if not exist "%LIBRARY_LIB%\\{lib}.lib" exit 1' in commands
        assert 'if exist "%LIBRARY_BIN%\\torch_python.dll" exit 1' in commands


def _upstream_runs(recipe) -> dict[str, list[str]]:
    """The upstream-test commands of each pytorch output, by its Python (major.minor)."""
    return {
        ".".join(str(o.variant["python"]).split(".")[:2]): [
            c for c in o.test["commands"] if "run_upstream_tests.py" in c
        ]
        for o in recipe.outputs
        if o.name == "pytorch"
    }


@pytest.mark.parametrize(
    "configuration", [c for c in CONFIGURATIONS if c.subdir == "linux-aarch64"], ids=lambda c: c.id
)
def test_emulated_aarch64_runs_the_upstream_subset_for_python_3_12_only(configuration: Configuration) -> None:
    from feedstock_tools.conda.recipe_render import render_recipe
    from tests.recipe.test_recipe_outputs import variant_config

    # on CI: cross-compiled on linux-64, tested under qemu (conda-forge.yml build_platform, test policy)
    emulated = _upstream_runs(render_recipe(RECIPE, variant_config(configuration), build_subdir="linux-64"))
    assert "3.12" in emulated, "Python 3.12 left the pinning: choose the emulated tests' Python again"
    assert emulated.pop("3.12") == ["python tests/run_upstream_tests.py --emulated --budget-seconds=7200"]
    assert emulated and all(commands == [] for commands in emulated.values())
    # built natively (an aarch64 machine): the full selection for every Python
    native = _upstream_runs(rendered(configuration))
    assert len(native) >= 4
    assert all(c == ["python tests/run_upstream_tests.py --budget-seconds=1800"] for c in native.values())
