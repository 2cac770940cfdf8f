"""recipe/meta.yaml rendered (by the conda-build emulation) for every configuration of the issue's table.

Each check runs twice per configuration: on the generated .ci_support file of its CI job, and on a variant
config composed from the shared conda-forge pinning by tests/recipe_matrix.py, which checks the recipe
independently of the CI layer (test_recipe_ci_support.py checks that every job exists).
"""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from functools import cache

import pytest
from recipe_matrix import (
    CONFIGURATIONS,
    PINNING,
    RECIPE,
    RECIPE_VERSION,
    CiJob,
    Configuration,
    ci_support_jobs,
    minor_upper_bound,
    recipe_set,
    variant_config,
    with_version,
)

from feedstock_tools.conda.recipe_render import RenderedOutput, RenderedRecipe, render_recipe
from feedstock_tools.conda.variants import parse_variant_text

VERSION = RECIPE_VERSION
# What pin_subpackage(..., max_pin="x.x") exports for it.
PIN = f">={VERSION},<{minor_upper_bound(VERSION)}"
PYTHONS = {"310", "311", "312", "313", "314"}
HASH = r"h[0-9a-f]{7}"


@cache
def rendered(configuration: Configuration) -> RenderedRecipe:
    if isinstance(configuration, CiJob):
        return render_recipe(RECIPE, configuration.ci_configuration())
    return render_recipe(RECIPE, variant_config(configuration))


def build_number(configuration: Configuration) -> int:
    # CUDA +200 plus the version's digits (12.9: +129, 13.0: +130), so the newer CUDA ranks higher
    cuda = 200 + int(configuration.cuda.replace(".", "")) if configuration.is_cuda else 0
    return cuda + (100 if configuration.blas_impl == "mkl" else 0)


def metapackage(configuration: Configuration) -> str:
    return "pytorch-gpu" if configuration.is_cuda else "pytorch-cpu"


def one(recipe: RenderedRecipe, name: str) -> RenderedOutput:
    (output,) = recipe.by_name(name)
    return output


def global_pins(configuration: Configuration) -> dict[str, object]:
    pinning = PINNING / "conda_build_config.yaml"
    return parse_variant_text(pinning.read_text(), configuration.subdir, {}, source=pinning)


configurations = pytest.mark.parametrize(
    "configuration", [*CONFIGURATIONS, *ci_support_jobs()], ids=lambda c: c.id
)


@configurations
def test_outputs_match_the_issue_table(configuration: Configuration) -> None:
    counts = Counter(output.name for output in rendered(configuration).outputs)
    expected = {"libtorch": 1, "pytorch": 5, metapackage(configuration): 1}
    if configuration.has_cuda_linalg:
        expected["libtorch-cuda-linalg"] = 2
    assert counts == expected


@configurations
def test_build_order_puts_libraries_before_their_consumers(configuration: Configuration) -> None:
    names = [output.name for output in rendered(configuration).outputs]
    order = ["libtorch", "pytorch", metapackage(configuration)]
    if configuration.has_cuda_linalg:
        order.insert(0, "libtorch-cuda-linalg")
    assert list(dict.fromkeys(names)) == order


@configurations
def test_every_output_carries_version_and_numbers(configuration: Configuration) -> None:
    base = build_number(configuration)
    for output in rendered(configuration).outputs:
        assert output.version == VERSION
        magma = output.name == "libtorch-cuda-linalg" and output.variant["magma_variant"] == "magma"
        assert output.build_number == base + (50 if magma else 0), output.dist
        assert output.build_string.endswith(f"_{output.build_number}")


@configurations
def test_build_strings_name_flavour_blas_python_and_magma(configuration: Configuration) -> None:
    recipe = rendered(configuration)
    prefix = f"{configuration.flavour}_{configuration.blas_impl}"
    n = build_number(configuration)
    assert re.fullmatch(rf"{prefix}_{HASH}_{n}", one(recipe, "libtorch").build_string)
    assert re.fullmatch(rf"{prefix}_{HASH}_{n}", one(recipe, metapackage(configuration)).build_string)
    pythons = set()
    for output in recipe.by_name("pytorch"):
        match = re.fullmatch(rf"{prefix}_py(3\d+)_{HASH}_{n}", output.build_string)
        assert match, output.build_string
        pythons.add(match.group(1))
    assert pythons == PYTHONS
    for output in recipe.by_name("libtorch-cuda-linalg"):
        magma = output.variant["magma_variant"]
        extra = 50 if magma == "magma" else 0
        assert re.fullmatch(rf"{prefix}_{magma}_{HASH}_{n + extra}", output.build_string)
    assert {o.variant["magma_variant"] for o in recipe.by_name("libtorch-cuda-linalg")} == (
        {"magma", "nomagma"} if configuration.has_cuda_linalg else set()
    )


@configurations
def test_hashes_tell_same_name_builds_apart(configuration: Configuration) -> None:
    recipe = rendered(configuration)
    for name in {output.name for output in recipe.outputs}:
        strings = [output.build_string for output in recipe.by_name(name)]
        assert len(set(strings)) == len(strings)


@configurations
def test_libtorch_pins(configuration: Configuration) -> None:
    libtorch = one(rendered(configuration), "libtorch")
    assert libtorch.run_exports == (f"libtorch {PIN}",)
    assert libtorch.script == configuration.build_script


@configurations
def test_pytorch_pins_libtorch_exactly_and_exports_both(configuration: Configuration) -> None:
    recipe = rendered(configuration)
    exact = f"libtorch {VERSION} {one(recipe, 'libtorch').build_string}"
    for pytorch in recipe.by_name("pytorch"):
        assert exact in pytorch.requirements.host
        assert exact in pytorch.requirements.run
        assert set(pytorch.run_exports) == {f"pytorch {PIN}", f"libtorch {PIN}"}
        assert pytorch.script == configuration.build_script
        assert re.fullmatch(r"python 3\.1\d\.\* \*_cp\w+", pytorch.requirements.host[0])


@configurations
def test_metapackage_selects_this_builds_pytorch(configuration: Configuration) -> None:
    recipe = rendered(configuration)
    meta = one(recipe, metapackage(configuration))
    assert meta.script is None
    (spec,) = [s for s in meta.requirements.run if s.startswith("pytorch ")]
    name, version, build = spec.split(" ")
    assert version == VERSION
    matched = [o for o in recipe.by_name("pytorch") if fnmatch.fnmatchcase(o.build_string, build)]
    assert len(matched) == 5
    other = "pytorch-cpu" if configuration.is_cuda else "pytorch-gpu"
    n = build_number(configuration)
    other_blas = "generic" if configuration.blas_impl == "mkl" else "mkl"
    other_flavour = "cpu" if configuration.is_cuda else "cuda129"
    # pytorch builds of another flavour, BLAS or build number do not satisfy it
    assert not fnmatch.fnmatchcase(f"{other_flavour}_{configuration.blas_impl}_py312_h0123456_{n}", build)
    assert not fnmatch.fnmatchcase(f"{configuration.flavour}_{other_blas}_py312_h0123456_{n}", build)
    assert not fnmatch.fnmatchcase(
        f"{configuration.flavour}_{configuration.blas_impl}_py312_h0123456_1", build
    )
    assert name == "pytorch"
    assert f"{other} <0a0" in meta.requirements.run_constrained


@configurations
def test_cpu_and_gpu_pytorch_exclude_each_other(configuration: Configuration) -> None:
    other = "pytorch-cpu" if configuration.is_cuda else "pytorch-gpu"
    for pytorch in rendered(configuration).by_name("pytorch"):
        assert f"{other} <0a0" in pytorch.requirements.run_constrained


@configurations
def test_cuda_builds_require_a_driver_and_the_blas_choice_reaches_run(configuration: Configuration) -> None:
    recipe = rendered(configuration)
    # libtorch too: a machine without a driver gets the CPU build for every request (solve-check)
    for output in [one(recipe, "libtorch"), *recipe.by_name("pytorch")]:
        assert ("__cuda" in output.requirements.run) == configuration.is_cuda
        assert output.hash_contents.get("__cuda") == ("__cuda" if configuration.is_cuda else None)
    generic = configuration.blas_impl == "generic"
    for output in [one(recipe, "libtorch"), *recipe.by_name("pytorch")]:
        assert ("nomkl" in output.requirements.run) == generic
        assert ("libopenblas * openmp_*" in output.requirements.run_constrained) == generic
        # MKL builds keep the MKL build of the BLAS interface at run time, not OpenBLAS beside MKL
        assert ("libblas * *mkl" in output.requirements.run) == (not generic)


@configurations
def test_blas_host_requirements(configuration: Configuration) -> None:
    host = one(rendered(configuration), "libtorch").requirements.host
    pins = global_pins(configuration)
    if configuration.blas_impl == "mkl":
        assert f"mkl-devel {pins['mkl_devel'][0]}.*" in host
        assert {"libblas * *_mkl", "libcblas * *_mkl", "liblapack * *_mkl"} <= set(host)
    else:
        for name in ("libblas", "libcblas", "liblapack"):
            assert f"{name} {pins[name][0]}" in host  # "3.9.* *netlib": the netlib interface
        assert not any(spec.startswith("mkl") for spec in host)


@configurations
def test_host_versions_come_from_the_pinning(configuration: Configuration) -> None:
    pins = global_pins(configuration)
    host = one(rendered(configuration), "libtorch").requirements.host
    expected = ["libabseil", "libprotobuf", "fmt"]
    if configuration.is_cuda:
        # no NCCL for Windows; there MAGMA is linked into torch_cuda (no linalg library to put it in)
        expected += ["libcudnn-dev", "libmagma-devel" if configuration.is_windows else "nccl"]
    for name in expected:
        pinned = f"{name} {pins[name.replace('-', '_')][0]}.*"
        assert pinned in host
    if configuration.is_cuda:
        assert f"cuda-version {configuration.cuda}.*" in host
        assert "libcudss-dev <0.8" in host  # 2.13.0 uses the pre-0.8 API; conda-forge pins no libcudss
        # nccl >=2.29 breaks CUDA 12.9 builds for old GPU architectures (feedstock f0218b70, under the
        # selector arm_variant_type!="tegra": Jetson's only architecture is 8.7)
        bounded = configuration.cuda == "12.9" and configuration.arm_variant != "tegra"
        assert ("nccl <2.29" in host) == bounded
    # what 2.13.0's setup.py imports, and upstream's setuptools bound
    assert "packaging" in rendered(configuration).top_level.requirements.host
    assert "setuptools >=77.0.3,<82" in rendered(configuration).top_level.requirements.host


@configurations
def test_requirement_lists_agree_across_outputs(configuration: Configuration) -> None:
    recipe = rendered(configuration)
    assert recipe.top_level is not None
    top_host = list(recipe.top_level.requirements.host)
    fixed_python, cpp_and_python = top_host[0], top_host[1:]
    assert fixed_python == f"python {global_pins(configuration)['python_min'][0]}.*"
    libtorch_host = list(one(recipe, "libtorch").requirements.host)
    magma_devel = f"libmagma-devel {global_pins(configuration)['libmagma_devel'][0]}.*"
    if configuration.is_cuda and configuration.is_windows:
        # Windows CUDA: MAGMA, linked into torch_cuda, closes pass 1's host and libtorch's
        assert top_host[-1] == libtorch_host[-1] == magma_devel
        libtorch_host = libtorch_host[:-1]
    assert libtorch_host == cpp_and_python[: len(libtorch_host)]
    for pytorch in recipe.by_name("pytorch"):
        # linux CUDA: MAGMA's files for the CMake re-run in pass 1's cache (build-time only); on Windows
        # they are in pass 1's host already
        extra = [magma_devel] if configuration.has_cuda_linalg else []
        assert list(pytorch.requirements.host[1:-1]) == [*cpp_and_python, *extra]
        assert ("libmagma-devel" in pytorch.build.get("ignore_run_exports_from", [])) == configuration.is_cuda
    for linalg in recipe.by_name("libtorch-cuda-linalg"):
        extra = [magma_devel] if linalg.variant["magma_variant"] == "magma" else []
        assert list(linalg.requirements.host) == [*top_host, *extra]
    # the build tools and compilers of every output are those of pass 1 (pytorch's own Python aside)
    for output in recipe.outputs:
        own_python = {f"python {output.variant['python']}"} if output.name == "pytorch" else set()
        build = set(output.requirements.build) - own_python
        assert build <= set(recipe.top_level.requirements.build), output.dist


@configurations
def test_every_scripted_output_has_a_driver_python_that_is_no_variant(configuration: Configuration) -> None:
    for output in rendered(configuration).outputs:
        if output.script and output.name != "pytorch":
            assert "python >=3.10" in output.requirements.build
    assert "python" not in one(rendered(configuration), "libtorch").variant


@configurations
def test_each_pytorch_build_environment_has_its_own_python(configuration: Configuration) -> None:
    """conda-build compiles the .pyc files a package lacks with the build environment's Python: that must be
    the output's own (pytorch-cpu-feedstock#329: an unpinned one shipped cpython-314.pyc in every package)."""
    for pytorch in rendered(configuration).by_name("pytorch"):
        pythons = [spec for spec in pytorch.requirements.build if spec.split()[0] == "python"]
        assert pythons == [f"python {pytorch.variant['python']}"], pytorch.dist


@configurations
def test_job_splitting_keys_of_the_top_level(configuration: Configuration) -> None:
    top = rendered(configuration).top_level
    assert top is not None
    assert "python" not in top.used_variables
    assert "magma_variant" not in top.used_variables
    assert {"blas_impl", "cuda_compiler_version", "python_min", "megabuild"} <= top.used_variables


@configurations
def test_pinned_host_keys_are_in_every_hash(configuration: Configuration) -> None:
    for output in rendered(configuration).outputs:
        if output.script is None:
            continue
        for spec in output.requirements.host:
            key = spec.split()[0].replace("-", "_")
            if key in ("libabseil", "libprotobuf", "fmt", "nccl", "libcudnn_dev", "mkl_devel", "numpy"):
                assert key in output.hash_contents, (output.dist, key)


def test_cuda_linalg_magma_and_nomagma() -> None:
    configuration = Configuration("linux-64", "mkl", "12.9")
    by_variant = {
        o.variant["magma_variant"]: o for o in rendered(configuration).by_name("libtorch-cuda-linalg")
    }
    assert "libmagma <0a0" in by_variant["nomagma"].requirements.run_constrained
    assert not any(s.startswith("libmagma") for s in by_variant["nomagma"].requirements.host)
    assert "libmagma <0a0" not in by_variant["magma"].requirements.run_constrained
    libtorch_pin = f"libtorch {VERSION} cuda129_mkl_*_{build_number(configuration)}"  # _429
    for linalg in by_variant.values():
        assert libtorch_pin in linalg.requirements.run_constrained
        assert "--magma=" + linalg.variant["magma_variant"] in " ".join(linalg.test["commands"])
    libtorch = one(rendered(configuration), "libtorch")
    assert f"libtorch-cuda-linalg {VERSION} cuda129_mkl_*" in libtorch.requirements.run


def test_cpu_builds_have_no_cuda_packages() -> None:
    for output in rendered(Configuration("linux-64", "generic", "None")).outputs:
        specs = " ".join(output.requirements.host + output.requirements.build)
        assert "cuda" not in specs and "nccl" not in specs and "cudnn" not in specs


def test_source_patches_and_about() -> None:
    recipe = rendered(Configuration("linux-64", "mkl", "12.9"))
    assert recipe.top_level is not None
    source = recipe.top_level.source
    tag = f"v{VERSION}"
    assert source["url"] == f"https://github.com/pytorch/pytorch/releases/download/{tag}/pytorch-{tag}.tar.gz"
    assert source["sha256"] == recipe_set("sha256")
    assert re.fullmatch(r"[0-9a-f]{64}", source["sha256"])
    for patch in source["patches"]:
        assert (RECIPE / patch).is_file(), patch
    cpu_patches = rendered(Configuration("osx-arm64", "generic", "None")).top_level.source["patches"]
    assert not any("MAGMA" in p for p in cpu_patches)
    assert recipe.about["license"] == "BSD-3-Clause"
    assert recipe.about["license_file"] and recipe.about["summary"] and recipe.about["description"]
    assert recipe.extra["feedstock-name"] == "pytorch"
    assert recipe.extra["recipe-maintainers"]


def test_windows_cuda_links_magma_into_libtorch_and_patches_for_windows() -> None:
    """win-64 CUDA: no libtorch-cuda-linalg to depend on, MAGMA in libtorch's own host (its run_exports
    make libmagma a run dependency), the Windows patches, not 0004 (whose MAGMA split needs that library)."""
    recipe = rendered(Configuration("win-64", "mkl", "12.8"))
    libtorch = one(recipe, "libtorch")
    assert not any(spec.startswith("libtorch-cuda-linalg") for spec in libtorch.requirements.run)
    assert any(spec.startswith("libmagma-devel ") for spec in libtorch.requirements.host)
    assert not any(
        spec.startswith(("nccl", "cuda-driver-dev", "libcufile")) for spec in libtorch.requirements.host
    )
    assert libtorch.build["missing_dso_whitelist"] == ["*/nvcuda.dll"]
    patches = [patch.split("/")[1][:4] for patch in recipe.top_level.source["patches"]]
    assert patches == [
        "0001",
        "0002",
        "0003",
        "0010",
        "0011",
        "0012",
        "0015",
        "0020",
        "0021",
        "0022",
        "0023",
        "0024",
    ]
    cpu = rendered(Configuration("win-64", "mkl", "None")).top_level.source["patches"]
    assert [patch.split("/")[1][:4] for patch in cpu] == [p for p in patches if p not in ("0003", "0021")]
    linux = rendered(Configuration("linux-64", "mkl", "12.9")).top_level.source["patches"]
    assert not any(patch.split("/")[1][:4] in ("0020", "0021", "0022", "0024") for patch in linux)


def test_release_candidates_build_from_the_upstream_rc_tag(tmp_path):
    recipe = tmp_path / "recipe"
    recipe.mkdir()
    major, minor = VERSION.split(".")[:2]
    next_minor = f"{major}.{int(minor) + 1}.0"  # the next release's first candidate: conda's X.Y.Z.rcN
    (recipe / "meta.yaml").write_text(with_version((RECIPE / "meta.yaml").read_text(), f"{next_minor}.rc1"))
    config = variant_config(Configuration("linux-64", "generic", "None"))
    config["is_rc"], config["channel_targets"] = ["true"], ["conda-forge pytorch_rc"]
    rendered_rc = render_recipe(recipe, config)
    assert rendered_rc.top_level is not None
    source = rendered_rc.top_level.source
    assert source["git_url"] == "https://github.com/pytorch/pytorch.git"
    assert source["git_rev"] == f"v{next_minor}-rc1"  # upstream's tag spelling
    assert "url" not in source and "sha256" not in source
    libtorch = one(rendered_rc, "libtorch")
    assert libtorch.version == f"{next_minor}.rc1"
    assert libtorch.run_exports == (f"libtorch >={next_minor}.rc1,<{minor_upper_bound(next_minor)}",)
    assert libtorch.variant["channel_targets"] == "conda-forge pytorch_rc"


def test_rc_switch_is_zipped_with_the_upload_label():
    path = RECIPE / "conda_build_config.yaml"
    recipe_config = parse_variant_text(path.read_text(), "linux-64", {}, source=path)
    assert ["is_rc", "channel_targets"] in recipe_config["zip_keys"]
    assert len(recipe_config["is_rc"]) == len(recipe_config["channel_targets"])
    assert recipe_config["is_rc"] == ["false"] and recipe_config["channel_targets"] == ["conda-forge main"]


def test_cross_compiled_osx_arm64_builds_python_code_through_cross_python():
    config = variant_config(Configuration("osx-arm64", "generic", "None"))
    cross = render_recipe(RECIPE, config, build_subdir="osx-64")
    native = rendered(Configuration("osx-arm64", "generic", "None"))
    assert cross.top_level is not None and native.top_level is not None
    assert "cross-python_osx-arm64" in cross.top_level.requirements.build
    assert "cross-python_osx-arm64" not in native.top_level.requirements.build
    for pytorch in cross.by_name("pytorch"):
        python = pytorch.requirements.host[0]
        assert python in pytorch.requirements.build  # the same Python on both sides of the cross build
        assert "cross-python_osx-arm64" in pytorch.requirements.build
    # building elsewhere changes requirements, not the packages' identity
    assert [o.dist for o in cross.outputs] == [o.dist for o in native.outputs]


def test_recipe_is_conda_build_v3_syntax_only():
    """What conda-build and boa's mambabuild read: no rattler-build (v1) constructs."""
    text = (RECIPE / "meta.yaml").read_text()
    assert "${{" not in text  # v1 Jinja
    assert not re.search(r"^context:|^\s+- if:|^\s+then:|^schema_version:", text, re.M)  # v1 structure
    assert not (RECIPE / "recipe.yaml").exists()


def test_every_output_with_files_runs_the_driver():
    for output in rendered(Configuration("linux-64", "mkl", "12.9")).outputs:
        if output.name in ("pytorch-cpu", "pytorch-gpu"):
            assert output.script is None  # a metapackage: no files
        else:
            assert output.script == "build.sh", output.dist


# ---- linux-aarch64 CUDA: sbsa (servers) and tegra (Jetson) ---------------------------------------------

ARM_CUDA = [c for c in [*CONFIGURATIONS, *ci_support_jobs()] if c.subdir == "linux-aarch64" and c.is_cuda]


@pytest.mark.parametrize("configuration", ARM_CUDA, ids=lambda c: c.id)
def test_every_aarch64_cuda_package_is_built_with_its_arm_variant(configuration: Configuration) -> None:
    """arm-variant's strong run_exports (conda-forge/arm-variant-feedstock 98eb593: ``arm-variant *
    {{ arm_variant_type }}``) make every package require the arm-variant of its kind, so sbsa and tegra
    builds never share an environment; the metapackage (no script) takes it through its host."""
    recipe = rendered(configuration)
    spec = f"arm-variant * {configuration.arm_variant}"
    assert recipe.top_level is not None and spec in recipe.top_level.requirements.build
    for output in recipe.outputs:
        section = output.requirements.build if output.script else output.requirements.host
        assert spec in section, output.dist
        assert output.hash_contents["arm_variant_type"] == configuration.arm_variant, output.dist


def test_arm_variant_appears_only_in_aarch64_cuda_builds() -> None:
    for configuration in CONFIGURATIONS:
        if configuration in ARM_CUDA:
            continue
        recipe = rendered(configuration)
        assert recipe.top_level is not None
        for requirements in [recipe.top_level.requirements, *(o.requirements for o in recipe.outputs)]:
            assert not any(s.startswith("arm-variant") for s in requirements.build + requirements.host)


def test_tegra_and_sbsa_12_9_differ_in_glibc_and_hash_not_in_names() -> None:
    """The Jetson build: CUDA 12.9 with glibc 2.34 (the migration's c_stdlib_version); the same package
    names and build-string shape as the sbsa build, told apart by the hash, so the two jobs never upload one
    file."""
    sbsa = rendered(Configuration("linux-aarch64", "generic", "12.9", "sbsa"))
    tegra = rendered(Configuration("linux-aarch64", "generic", "12.9", "tegra"))
    assert sbsa.top_level is not None and tegra.top_level is not None
    assert "sysroot_linux-aarch64 2.17.*" in sbsa.top_level.requirements.build
    assert "sysroot_linux-aarch64 2.34.*" in tegra.top_level.requirements.build
    hashless = re.compile(HASH)
    assert [hashless.sub("h", o.build_string) for o in sbsa.outputs] == [
        hashless.sub("h", o.build_string) for o in tegra.outputs
    ]
    assert not {o.dist for o in sbsa.outputs} & {o.dist for o in tegra.outputs}
