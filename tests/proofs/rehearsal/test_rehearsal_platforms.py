"""Rehearsals of the osx and cross-compiled configurations (simulated on linux-64: rehearsal/target.py).

One configuration is rehearsed in full: osx-64 (generic BLAS), which is both a macOS target and a cross
build (on Apple silicon, conda-forge.yml's build_platform), so it exercises the .dylib naming, the clang
activation, cross-python and CMake's empty SOABI at once. The other configurations are checked without
building (plan and environment), and one short rehearsal shows what the recipe's patch 0012 and the driver's
_C check are for.
"""

from __future__ import annotations

import dataclasses
import errno
import shutil
import subprocess
from pathlib import Path

import pytest
from recipe_matrix import ci_config
from rehearsal_outcome import assert_rehearsal_succeeded, concluded, two_pythons

from feedstock_tools.common import user_cache
from feedstock_tools.common.configuration import read_configuration
from feedstock_tools.proofs.rehearsal import target as targets
from feedstock_tools.proofs.rehearsal.harness import REPO_ROOT, Rehearsal
from feedstock_tools.proofs.rehearsal.plan import TOP_LEVEL_NAME

pytestmark = pytest.mark.rehearsal

CI_SUPPORT = REPO_ROOT / ".ci_support"
CACHE = user_cache.rehearsal_cache()
# osx-64's one job: both BLAS (the other platforms' CPU jobs build generic only)
OSX_64 = ci_config("osx-64").path


def _rehearsal(
    config: Path, work_root: Path, pythons: frozenset[str] | None = None, blas: str | None = None
) -> Rehearsal:
    """A rehearsal of ``config`` (``blas``: only that BLAS's top-level build and outputs)."""
    for tool in ("cmake", "ninja", "ccache", "g++", "readelf", "patchelf"):
        if shutil.which(tool) is None:
            pytest.skip(f"the rehearsal needs {tool} on PATH (see .ci/run)")
    configuration = read_configuration(config)
    return Rehearsal(
        config,
        configuration=configuration.for_blas(blas) if blas else configuration,
        work_root=work_root,
        cache_root=CACHE,
        progress=lambda _line: None,
        pythons=pythons,
    )


@pytest.fixture(scope="module")
def osx_cross(tmp_path_factory: pytest.TempPathFactory, host_pythons) -> Rehearsal:
    rehearsal = _rehearsal(OSX_64, tmp_path_factory.mktemp("rehearsal-osx-64"), two_pythons(OSX_64))
    assert rehearsal.target.macos and rehearsal.target.cross
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEGABUILD_STRICT", "1")  # a compile outside a pass's targets fails its step
        rehearsal.prepare()
        rehearsal.run()
    assert_rehearsal_succeeded(rehearsal)
    return rehearsal


def _readelf(path: Path, tag: str) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if f"({tag})" in line]


def test_osx_cross_compiles_each_object_once_and_passes_strict(osx_cross: Rehearsal):
    from feedstock_tools.proofs.rehearsal import report

    assert all(result.ok for result in osx_cross.results)
    ratio = report.work_ratio(osx_cross)
    assert ratio.ratio == 1.0, ratio.formula()


def test_osx_cross_libraries_are_dylibs_named_by_their_file(osx_cross: Rehearsal):
    libtorch = [r for r in osx_cross.results if r.step.name == "libtorch"]
    assert [r.step.blas for r in libtorch] == ["mkl", "generic"]  # one job, both BLAS, MKL first
    for result in libtorch:
        libraries = [f for f in result.new_files if f.startswith("lib/")]
        assert libraries and all(f.endswith(".dylib") for f in libraries), libraries
        assert result.package_dir is not None
        for rel in libraries:
            # the ELF counterpart of the install name @rpath/<file>: consumers record the file name
            assert _readelf(result.package_dir / rel, "SONAME") == [Path(rel).name]


def test_osx_cross_pytorch_packages_carry_the_darwin_extension(osx_cross: Rehearsal):
    built = [r for r in osx_cross.results if r.step.name == "pytorch"]
    assert {r.step.python for r in built} == osx_cross.pythons
    for result in built:
        nodot = result.step.python.replace(".", "")
        suffix = osx_cross.target.ext_suffix(nodot)
        assert f"lib/python{result.step.python}/site-packages/torch/_C{suffix}" in result.new_files
        assert "lib/libtorch_python.dylib" in result.new_files


def test_osx_cross_packages_import(osx_cross: Rehearsal):
    checks = concluded(osx_cross).import_checks
    assert checks and all(check.ok for check in checks), [c.detail for c in checks if not c.ok]
    assert all("-darwin.so" in check.detail for check in checks)


# ---- without building --------------------------------------------------------------------------------------
def _configs() -> list[Path]:
    return sorted(CI_SUPPORT.glob("*.yaml"))


@pytest.mark.parametrize("config", _configs(), ids=lambda p: p.stem[:40])
def test_every_configuration_gets_its_platforms_environment(config: Path, tmp_path: Path):
    """The environment each step's build script gets (no build): naming, build machine, cross flags, and
    cross-python for every step that runs ${PYTHON} (all scripted steps but the staging-only libtorch)."""
    rehearsal = _rehearsal(config, tmp_path)
    target = targets.target_for(rehearsal.configuration.target_platform, REPO_ROOT)
    for step in rehearsal.steps:
        if not step.has_script:
            continue
        env = rehearsal.environment(step)
        assert env["SHLIB_EXT"] == target.shlib_ext
        assert env["build_platform"] == target.build_subdir
        assert env.get("CONDA_BUILD_CROSS_COMPILATION") == ("1" if target.cross else None)
        assert ("-DCMAKE_SYSTEM_PROCESSOR" in env["CMAKE_ARGS"]) == target.cross
        if target.macos:
            assert "-Wl,-dead_strip_dylibs" in env["LDFLAGS"]  # the activation's; the driver strips it
        runs_python = step.name != "libtorch"
        if target.cross and runs_python:
            assert f"cross-python_{target.subdir}" in step.build_names(), step.label


def test_without_cross_python_the_host_python_cannot_run(tmp_path: Path, host_pythons):
    """On a cross build the host prefix's python is the target's binary (here its header)."""
    config = next(p for p in _configs() if p.name.startswith("linux_aarch64"))
    rehearsal = _rehearsal(config, tmp_path)
    rehearsal.prepare()
    step = next(s for s in rehearsal.steps if s.name == TOP_LEVEL_NAME)
    bare = dataclasses.replace(step, build=tuple(b for b in step.build if not b.startswith("cross-python")))
    rehearsal.provision_host(bare)
    with pytest.raises(OSError) as failure:
        subprocess.run([str(rehearsal.prefix / "bin" / "python"), "-c", "pass"], check=False)
    assert failure.value.errno == errno.ENOEXEC
    rehearsal.provision_host(step)  # with cross-python: the shim runs the build machine's interpreter
    out = subprocess.run(
        [
            str(rehearsal.prefix / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_config_var('SOABI'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == f"cpython-{step.python.replace('.', '')}-aarch64-linux-gnu"


def test_without_patch_0012_the_pytorch_pass_stops_at_the_untagged_extension(tmp_path: Path, host_pythons):
    """The stand-in without the recipe's patch 0012 (CMake >= 4.1's empty cross SOABI): _C comes out as
    _C.so and the driver's staging check stops the pytorch pass with one line, staging nothing."""
    rehearsal = _rehearsal(OSX_64, tmp_path, blas="generic")
    rehearsal.prepare()
    environment = rehearsal.environment

    def without_patch(step):  # test double of the activation: one more -D for the stand-in
        env = environment(step)
        env["CMAKE_ARGS"] += " -DSTANDIN_WITHOUT_PATCH_0012=ON"
        return env

    rehearsal.environment = without_patch
    first_python = rehearsal.steps[0].python
    steps = [s for s in rehearsal.steps if s.name == TOP_LEVEL_NAME or s.label == f"pytorch-py{first_python}"]
    assert rehearsal.run_step(steps[0]).ok
    result = rehearsal.run_step(steps[1])
    assert not result.ok and result.new_files == []
    tag = first_python.replace(".", "")
    assert (
        f"megabuild error: no torch/_C.cpython-{tag}-darwin.so for Python {first_python}"
        in result.last_line()
    )
    # CMake installed it untagged; setup.py, packaging _C{EXT_SUFFIX}, left it out (scikit-build-core's wheel
    # holds it in the same torch/ as its install tree)
    assert "_C.so" in result.last_line().split("(found: ", 1)[1].split(")", 1)[0]
