"""The upstream build environment and the reading of conda-build's environment."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from recipe_matrix import RECIPE_VERSION

from megabuild.conda_env import CondaBuild
from megabuild.cuda_targets import ARCH_LIST_VARIABLE, cuda_arch_list
from megabuild.environment import (
    build_type,
    max_jobs,
    reconfigure_inputs,
    settings,
    upstream_environment,
)
from megabuild.errors import MegabuildError

ARCH_LIST = "7.5;8.6;12.0+PTX"
CONDA_SRC = "/usr/local/src/conda"  # where conda-forge's compiler flags map the work directory to
# What conda-build (with conda-forge's compiler activation) exports, trimmed to what matters here.
CONDA_FORGE_LDFLAGS = (
    "-Wl,-O2 -Wl,--sort-common -Wl,--as-needed -Wl,-z,relro -Wl,-z,now -Wl,--disable-new-dtags "
    "-Wl,--gc-sections -Wl,--allow-shlib-undefined -Wl,-rpath,/p/lib -Wl,-rpath-link,/p/lib -L/p/lib"
)
CONDA_FORGE_CXXFLAGS = (
    "-fvisibility-inlines-hidden -std=c++17 -fmessage-length=0 -march=nocona -O2 -pipe "
    "-fdebug-prefix-map=/w=/usr/local/src/conda/{pkg}-{version} "
    "-fdebug-prefix-map=/p=/usr/local/src/conda-prefix"
)


def conda_environ(pkg_name: str = "libtorch-split", **extra: str) -> dict[str, str]:
    env = {
        "PKG_NAME": pkg_name,
        "PKG_VERSION": RECIPE_VERSION,
        "PKG_BUILDNUM": "0",
        "PREFIX": "/p",
        "BUILD_PREFIX": "/b",
        "SRC_DIR": "/w",
        "RECIPE_DIR": "/r",
        "PYTHON": "/p/bin/python",
        "PY_VER": "3.10",
        "SP_DIR": "/p/lib/python3.10/site-packages",
        "CPU_COUNT": "8",
        "SHLIB_EXT": ".so",
        "target_platform": "linux-64",
        "build_platform": "linux-64",
        "cuda_compiler_version": "12.9",
        "blas_impl": "mkl",
        "magma_variant": "nomagma",
        "LDFLAGS": CONDA_FORGE_LDFLAGS,
        "CXXFLAGS": CONDA_FORGE_CXXFLAGS.format(pkg=pkg_name, version=RECIPE_VERSION),
        "CFLAGS": f"-march=nocona -O2 -pipe -fdebug-prefix-map=/w={CONDA_SRC}/{pkg_name}-{RECIPE_VERSION}",
        "CMAKE_ARGS": "-DCMAKE_AR=/b/bin/ar -DCMAKE_INSTALL_PREFIX=/p -DCMAKE_INSTALL_LIBDIR=lib "
        "-DCMAKE_BUILD_TYPE=Release -DCMAKE_PROGRAM_PATH=/b/bin;/p/bin",
        "CMAKE_GENERATOR": "Unix Makefiles",
        # recipe/meta.yaml's script_env: the configuration's GPU architectures (a short list, test input)
        ARCH_LIST_VARIABLE: ARCH_LIST,
    }
    env.update(extra)
    return env


def environment_for(env: dict[str, str], verbose: bool = False) -> dict[str, str]:
    return upstream_environment(CondaBuild.from_environ(env), env, verbose)[0]


def test_every_setting_has_a_reason() -> None:
    env = conda_environ()
    chosen = settings(CondaBuild.from_environ(env), env)
    assert all(setting.why.strip() for setting in chosen)
    names = [setting.name for setting in chosen]
    assert len(names) == len(set(names))


def test_flag_clean_ups() -> None:
    env = environment_for(conda_environ())
    assert "-Wl,-z,lazy" in env["LDFLAGS"].split() and "-Wl,-z,now" not in env["LDFLAGS"]
    assert "-Wl,--as-needed" not in env["LDFLAGS"]
    assert "-Wl,-rpath,/p/lib" in env["LDFLAGS"].split()
    assert "-std=c++17" not in env["CXXFLAGS"] and "-march=nocona" in env["CXXFLAGS"]
    args = shlex.split(env["CMAKE_ARGS"])
    assert "-DCMAKE_INSTALL_PREFIX=/p" not in args  # would install into the host prefix
    assert "-DCMAKE_AR=/b/bin/ar" in args and "-DCMAKE_PROGRAM_PATH=/b/bin;/p/bin" in args
    assert [a for a in args if a.startswith("-DCMAKE_BUILD_TYPE")] == ["-DCMAKE_BUILD_TYPE=Release"]
    assert "-DUSE_MAGMA=OFF" in args
    assert env["CMAKE_GENERATOR"] == "Ninja"
    assert env["BUILD_TEST"] == "0" and env["PYTORCH_BUILD_VERSION"] == RECIPE_VERSION


def test_debug_switches_and_jobs_and_verbose() -> None:
    assert build_type({}) == "Release"
    assert build_type({"REL_WITH_DEB_INFO": "1"}) == "RelWithDebInfo"
    assert build_type({"DEBUG": "1", "REL_WITH_DEB_INFO": "1"}) == "Debug"
    env = environment_for(conda_environ(DEBUG="1", MAX_JOBS="3", VERBOSE="0"))
    assert env["CMAKE_BUILD_TYPE"] == "Debug" and "-DCMAKE_BUILD_TYPE=Debug" in shlex.split(env["CMAKE_ARGS"])
    assert env["MAX_JOBS"] == "3"
    assert "VERBOSE" not in env  # cmake --build would turn verbose on even for VERBOSE=0
    assert environment_for(conda_environ(cuda_compiler_version="None"))["MAX_JOBS"] == "8"  # CPU_COUNT
    assert environment_for(conda_environ(), verbose=True)["VERBOSE"] == "1"


def test_blas_selection() -> None:
    mkl = environment_for(conda_environ(blas_impl="mkl"))
    generic = environment_for(conda_environ(blas_impl="generic"))
    assert (mkl["BLAS"], mkl["INTEL_MKL_DIR"]) == ("MKL", "/p")
    assert generic["BLAS"] == "Generic" and "INTEL_MKL_DIR" not in generic


def test_cuda_settings_and_cpu() -> None:
    cuda = environment_for(conda_environ())
    assert cuda["USE_CUDA"] == "ON" and cuda["MAGMA_HOME"] == "/p"
    assert cuda["USE_SYSTEM_NCCL"] == "ON" and cuda["USE_SYSTEM_NVTX"] == "ON" and cuda["USE_CUDNN"] == "ON"
    cpu = environment_for(conda_environ(cuda_compiler_version="None"))
    assert cpu["USE_CUDA"] == "OFF"
    assert not {"TORCH_CUDA_ARCH_LIST", "MAGMA_HOME", "USE_SYSTEM_NCCL"} & set(cpu)
    for name in ("USE_SYSTEM_SLEEF", "USE_SYSTEM_PYBIND11", "USE_SYSTEM_EIGEN_INSTALL"):
        assert cpu[name] == "ON"
    assert cpu["BUILD_CUSTOM_PROTOBUF"] == "OFF"


def test_the_arch_list_is_the_recipes_as_given() -> None:
    """TORCH_CUDA_ARCH_LIST is MEGABUILD_CUDA_ARCH_LIST as recipe/meta.yaml's script_env sets it, untouched
    (conda-forge's lists per configuration: tests/test_recipe_test_sections.py); CPU builds have none."""
    assert environment_for(conda_environ())["TORCH_CUDA_ARCH_LIST"] == ARCH_LIST
    assert cuda_arch_list({ARCH_LIST_VARIABLE: "8.7+PTX"}) == ["8.7+PTX"]
    assert cuda_arch_list({ARCH_LIST_VARIABLE: " 5.0;10.0;12.0+PTX\n"}) == ["5.0", "10.0", "12.0+PTX"]
    cpu = environment_for(conda_environ(cuda_compiler_version="None", **{ARCH_LIST_VARIABLE: ""}))
    assert "TORCH_CUDA_ARCH_LIST" not in cpu


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (
            None,
            "MEGABUILD_CUDA_ARCH_LIST is empty or not set: no GPU architectures for CUDA 12.9 on linux-64",
        ),
        ("", "add its list to cuda_arch_list in recipe/meta.yaml"),
        ("7.5,8.0,12.0+PTX", "'7.5,8.0,12.0+PTX' is not an architecture (X.Y or X.Y+PTX)"),
        ("sm_75;12.0+PTX", "'sm_75' is not an architecture"),
        ("7.5;;12.0+PTX", "'' is not an architecture"),
        ("7.5;5.0;12.0+PTX", "not ordered oldest first"),
        ("5.0;5.0;12.0+PTX", "not ordered oldest first"),
        ("5.0;12.0", "only the newest architecture (12.0) must carry +PTX"),
        ("5.0+PTX;12.0+PTX", "only the newest architecture"),
    ],
)
def test_a_missing_or_bad_arch_list_stops_the_driver_in_one_line(value: str | None, problem: str) -> None:
    """The recipe takes the list's first entry as __cuda_arch's bound: the driver refuses a list that bound
    would misread, and a CUDA build without one, naming the variable, the problem and recipe/meta.yaml."""
    env = conda_environ()
    if value is None:
        del env[ARCH_LIST_VARIABLE]
    else:
        env[ARCH_LIST_VARIABLE] = value
    with pytest.raises(MegabuildError) as error:
        environment_for(env)
    message = str(error.value)
    assert problem in message and "cuda_arch_list in recipe/meta.yaml" in message and "\n" not in message


def test_the_arm_variant_picks_the_cuda_target() -> None:
    """tegra (Jetson): targets/aarch64-linux; sbsa, or no key (the pinning's default): sbsa-linux."""
    tegra = environment_for(
        conda_environ(
            target_platform="linux-aarch64", arm_variant_type="tegra", **{ARCH_LIST_VARIABLE: "8.7+PTX"}
        )
    )
    assert tegra["TORCH_CUDA_ARCH_LIST"] == "8.7+PTX"
    assert "-DCUDAToolkit_TARGET_DIR=/p/targets/aarch64-linux" in shlex.split(tegra["CMAKE_ARGS"])
    for variant in ({"arm_variant_type": "sbsa"}, {}):
        sbsa = environment_for(conda_environ(target_platform="linux-aarch64", **variant))
        assert "-DCUDAToolkit_TARGET_DIR=/p/targets/sbsa-linux" in shlex.split(sbsa["CMAKE_ARGS"])
    # the key means nothing off linux-aarch64
    x86 = environment_for(conda_environ(arm_variant_type="tegra"))
    assert "-DCUDAToolkit_TARGET_DIR=/p/targets/x86_64-linux" in shlex.split(x86["CMAKE_ARGS"])
    with pytest.raises(
        MegabuildError, match=r"linux-aarch64 with arm_variant_type=jetson: add it to CUDA_TARGETS"
    ):
        environment_for(conda_environ(target_platform="linux-aarch64", arm_variant_type="jetson"))


def test_identical_for_every_output() -> None:
    """What a reconfigure reads must not depend on what differs between conda-build's outputs."""
    top = conda_environ()
    outputs = [
        conda_environ("libtorch", PYTHON="", PY_VER="", SP_DIR="", PKG_BUILDNUM="0"),
        conda_environ("libtorch-cuda-linalg", magma_variant="magma", PKG_BUILDNUM="50"),
        conda_environ(
            "pytorch", PYTHON="/p/bin/python", PY_VER="3.13", SP_DIR="/p/lib/python3.13/site-packages"
        ),
    ]
    expected = reconfigure_inputs(environment_for(top))
    assert (
        f"-fdebug-prefix-map=/w=/usr/local/src/conda/libtorch-split-{RECIPE_VERSION}"
        in expected["CXXFLAGS"].split()
    )
    assert "TORCH_CUDA_ARCH_LIST" in expected and "LDFLAGS" in expected and "CMAKE_ARGS" in expected
    for env in outputs:
        assert reconfigure_inputs(environment_for(env)) == expected


def test_identical_for_every_output_whatever_the_builder_says_the_top_level_is() -> None:
    """conda-build 26.7.1 sets an output's TOP_PKG_NAME to the output's own name (build.py 1747-1778: its
    environ.get_dict, then TOP_PKG_NAME = that PKG_NAME; measured TOP_PKG_NAME=libtorch, =pytorch), and
    rattler-build sets none: the debug map of SRC_DIR must name libtorch-split in every pass anyway (the old
    reading of TOP_PKG_NAME made every later pass's CFLAGS differ from pass 1's: the driver stopped)."""
    expected = reconfigure_inputs(environment_for(conda_environ()))
    for name in ("libtorch", "libtorch-cuda-linalg", "pytorch"):
        for top in ({"TOP_PKG_NAME": name, "TOP_PKG_VERSION": RECIPE_VERSION}, {}):
            env = conda_environ(name, **top)
            assert reconfigure_inputs(environment_for(env)) == expected, (name, top)
    # a map the activation wrote for another directory stays as it was
    env = conda_environ("pytorch", CFLAGS="-fdebug-prefix-map=/elsewhere=/usr/local/src/conda/pytorch-1")
    assert environment_for(env)["CFLAGS"].startswith(
        "-fdebug-prefix-map=/elsewhere=/usr/local/src/conda/pytorch-1"
    )


def test_conda_environment_is_read(tmp_path: Path) -> None:
    build = CondaBuild.from_environ(conda_environ(TOP_PKG_VERSION=RECIPE_VERSION))
    assert build.cuda_version == "12.9" and build.cpu_count == 8
    assert build.build_dir == Path("/w/build") and build.state_dir == Path("/w/build/megabuild")
    assert build.variant["magma_variant"] == "nomagma"
    assert CondaBuild.from_environ(conda_environ(cuda_compiler_version="None")).cuda_version is None
    assert CondaBuild.from_environ(conda_environ(PYTHON="")).python is None
    missing = conda_environ()
    del missing["SRC_DIR"]
    with pytest.raises(MegabuildError, match="environment variable SRC_DIR is not set"):
        CondaBuild.from_environ(missing)
    with pytest.raises(MegabuildError, match="CPU_COUNT='many' is not a positive number"):
        CondaBuild.from_environ(conda_environ(CPU_COUNT="many"))


GIB = 1024**3


def test_max_jobs_cuda_builds_get_one_job_per_8_gib_and_the_caller_wins() -> None:
    cuda = CondaBuild.from_environ(conda_environ())  # CPU_COUNT 8
    cpu = CondaBuild.from_environ(conda_environ(cuda_compiler_version="None"))
    # conda-forge's runner: 8 CPUs, 32 GB; CUDA builds were OOM-killed at 8 jobs and use 4
    assert max_jobs(cuda, {}, memory=32 * GIB) == "4"
    assert max_jobs(cuda, {}, memory=128 * GIB) == "8"  # never above CPU_COUNT
    assert max_jobs(cuda, {}, memory=4 * GIB) == "1"
    assert max_jobs(cpu, {}, memory=4 * GIB) == "8"  # CPU builds: CPU_COUNT
    assert max_jobs(cuda, {"MAX_JOBS": "6"}, memory=32 * GIB) == "6"
    with pytest.raises(MegabuildError, match="MAX_JOBS='six' is not a positive number"):
        max_jobs(cuda, {"MAX_JOBS": "six"}, memory=32 * GIB)


def test_build_number_is_set_zero_by_default_and_a_non_number_is_an_error() -> None:
    env = environment_for(conda_environ())
    assert env["PYTORCH_BUILD_VERSION"] == RECIPE_VERSION and env["PYTORCH_BUILD_NUMBER"] == "0"
    assert "PYTORCH_BUILD_NUMBER" in reconfigure_inputs(env)
    with pytest.raises(MegabuildError, match=r"PYTORCH_BUILD_NUMBER='1a' is not a number"):
        environment_for(conda_environ(PYTORCH_BUILD_NUMBER="1a"))


def test_every_find_root_path_of_cmake_args_gets_the_source_directory() -> None:
    """conda's activation and cuda-nvcc's each add one -DCMAKE_FIND_ROOT_PATH; CMake keeps the last."""
    given = (
        "-DCMAKE_AR=/b/bin/ar -DCMAKE_FIND_ROOT_PATH=/p;/b/x86_64-conda-linux-gnu/sysroot "
        "-DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY -DCMAKE_FIND_ROOT_PATH:PATH=/p/targets/x86_64-linux;/p"
    )
    words = shlex.split(environment_for(conda_environ(CMAKE_ARGS=given))["CMAKE_ARGS"])
    assert "-DCMAKE_FIND_ROOT_PATH=/p;/b/x86_64-conda-linux-gnu/sysroot;/w" in words
    assert "-DCMAKE_FIND_ROOT_PATH:PATH=/p/targets/x86_64-linux;/p;/w" in words
    assert "-DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY" in words  # the modes stay as they are


def test_cuda_builds_name_the_split_toolkit_in_cache_variables() -> None:
    cuda = shlex.split(environment_for(conda_environ())["CMAKE_ARGS"])
    assert {"-DCUDAToolkit_BIN_DIR=/b/bin", "-DCUDAToolkit_ROOT_DIR=/p",
            "-DCUDAToolkit_TARGET_DIR=/p/targets/x86_64-linux"} <= set(cuda)  # fmt: skip
    arm = shlex.split(environment_for(conda_environ(target_platform="linux-aarch64"))["CMAKE_ARGS"])
    assert "-DCUDAToolkit_TARGET_DIR=/p/targets/sbsa-linux" in arm
    cpu = environment_for(conda_environ(cuda_compiler_version="None"))["CMAKE_ARGS"]
    assert "CUDAToolkit" not in cpu


# ---- issue 30: settings held against conda-forge's 2.13.0 build.sh -----------------------------------------


def test_linux_links_without_an_executable_stack_and_keeps_inline_symbols_visible() -> None:
    env = environment_for(conda_environ(CFLAGS="-fvisibility-inlines-hidden -O2"))
    assert env["LDFLAGS"].split()[-1] == "-Wl,-z,noexecstack"
    assert "-fvisibility-inlines-hidden" not in env["CXXFLAGS"] + env["CFLAGS"]
    gcc = "-Wno-deprecated-declarations -Wno-error=maybe-uninitialized"
    assert env["CFLAGS"] == f"-O2 {gcc}"
    assert env["CXXFLAGS"].endswith(f"-fdebug-prefix-map=/p=/usr/local/src/conda-prefix -w {gcc}")
    assert env["USE_ITT"] == "OFF"


@pytest.mark.parametrize(
    ("target", "six"), [("linux-64", True), ("linux-aarch64", False), ("osx-64", True), ("osx-arm64", False)]
)
def test_nnpack_never_downloads_six_where_it_would(target: str, six: bool) -> None:
    env = environment_for(conda_environ(target_platform=target, cuda_compiler_version="None"))
    assert ("-DPYTHON_SIX_SOURCE_DIR=" in shlex.split(env["CMAKE_ARGS"])) == six
    assert "noexecstack" in env["LDFLAGS"] or target.startswith("osx")


def test_cuda_toolkit_root_dir_is_the_host_prefix_for_cupti() -> None:
    args = shlex.split(environment_for(conda_environ())["CMAKE_ARGS"])
    assert "-DCUDA_TOOLKIT_ROOT_DIR=/p" in args
    cpu = shlex.split(environment_for(conda_environ(cuda_compiler_version="None"))["CMAKE_ARGS"])
    assert not [a for a in cpu if a.startswith("-DCUDA")]


@pytest.mark.parametrize("target", ["osx-arm64", "osx-64"])
def test_macos_builds_use_eight_of_the_runners_twelve_cpus_as_conda_forge(target: str) -> None:
    env = conda_environ(target_platform=target, cuda_compiler_version="None", CPU_COUNT="12")
    assert environment_for(env)["MAX_JOBS"] == "8"
    assert environment_for({**env, "CPU_COUNT": "3"})["MAX_JOBS"] == "3"
    assert environment_for({**env, "MAX_JOBS": "12"})["MAX_JOBS"] == "12"
