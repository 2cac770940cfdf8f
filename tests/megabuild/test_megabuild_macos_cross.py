"""The driver's macOS and cross-compilation settings (recipe/megabuild/environment.py's macOS/cross block and
recipe/megabuild/cross.py), from the environment conda-build and conda-forge's activation give."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_megabuild_environment import conda_environ

from megabuild.conda_env import CondaBuild
from megabuild.cross import PROTOBUF_TARGETS, use_build_machine_protoc
from megabuild.environment import CLANG_WARNING_FLAGS, settings, upstream_environment

# conda-forge's clang activation (clang-compiler-activation-feedstock 9fc6346: recipe/build.sh FINAL_LDFLAGS
# and FINAL_LDFLAGS_LD, recipe/activate-clang.sh LDFLAGS_USED/LDFLAGS_LD_USED), for PREFIX=/p.
CLANG_LDFLAGS = "-Wl,-headerpad_max_install_names -Wl,-dead_strip_dylibs -Wl,-rpath,/p/lib -L/p/lib"
CLANG_LDFLAGS_LD = "-headerpad_max_install_names -dead_strip_dylibs -rpath /p/lib -L/p/lib"


def osx_environ(target: str = "osx-64", build: str = "osx-arm64", **extra: str) -> dict[str, str]:
    return conda_environ(
        SHLIB_EXT=".dylib",
        target_platform=target,
        build_platform=build,
        cuda_compiler_version="None",
        LDFLAGS=CLANG_LDFLAGS,
        LDFLAGS_LD=CLANG_LDFLAGS_LD,
        **extra,
    )


def upstream(env: dict[str, str]) -> dict[str, str]:
    return upstream_environment(CondaBuild.from_environ(env), env)[0]


def test_dead_strip_dylibs_leaves_both_link_flag_variables():
    env = upstream(osx_environ())
    assert "dead_strip_dylibs" not in env["LDFLAGS"] + env["LDFLAGS_LD"]
    assert env["LDFLAGS"] == "-Wl,-headerpad_max_install_names -Wl,-rpath,/p/lib -L/p/lib"
    assert env["LDFLAGS_LD"] == "-headerpad_max_install_names -rpath /p/lib -L/p/lib"


@pytest.mark.parametrize("target", ["osx-64", "osx-arm64"])
def test_macos_builds_distributed_and_mps(target: str):
    env = upstream(osx_environ(target))
    assert (env["USE_DISTRIBUTED"], env["USE_MPS"]) == ("ON", "ON")
    assert env.get("USE_MKLDNN") == ("OFF" if target == "osx-arm64" else None)


@pytest.mark.parametrize("target", ["osx-64", "osx-arm64"])
def test_osx_64_defines_target_os_osx_as_conda_forge_does(target: str):
    env = upstream(osx_environ(target, CXXFLAGS="-O2 -std=c++17", CFLAGS="-O2"))
    define = " -DTARGET_OS_OSX=1" if target == "osx-64" else ""
    warnings = " ".join(CLANG_WARNING_FLAGS)  # clang's, as conda-forge's 2.13.0 build.sh:51-53
    assert (env["CXXFLAGS"], env["CFLAGS"]) == (f"-O2 -w {warnings}{define}", f"-O2 {warnings}{define}")


def test_linux_gets_none_of_the_macos_settings():
    env = upstream(conda_environ())
    assert not {"USE_DISTRIBUTED", "USE_MPS", "LDFLAGS_LD"} & set(env)
    assert env["USE_MKLDNN"] == "ON"  # oneDNN on every Linux build (environment.size_and_speed_settings)
    assert env["Python_ROOT_DIR"] == "/p"


def test_the_macos_settings_have_reasons_and_are_set_once():
    env = osx_environ("osx-arm64")
    chosen = settings(CondaBuild.from_environ(env), env)
    names = [s.name for s in chosen]
    assert len(names) == len(set(names))
    assert all(s.why.strip() for s in chosen)


def _protobuf_targets(prefix: Path) -> Path:
    """libprotobuf's CMake targets file as its packages write it (imported protoc under _IMPORT_PREFIX)."""
    path = prefix / PROTOBUF_TARGETS
    path.parent.mkdir(parents=True)
    path.write_text(
        "set_target_properties(protobuf::protoc PROPERTIES\n"
        '  IMPORTED_LOCATION_RELEASE "${_IMPORT_PREFIX}/bin/protoc-7.35.1"\n  )\n'
    )
    return path


def test_cross_builds_run_the_build_machines_protoc(tmp_path: Path):
    prefix, build_prefix = tmp_path / "h_env", tmp_path / "build_env"
    targets = _protobuf_targets(prefix)
    env = conda_environ(PREFIX=str(prefix), BUILD_PREFIX=str(build_prefix), target_platform="linux-aarch64")
    assert use_build_machine_protoc(CondaBuild.from_environ(env)) == targets
    assert f'IMPORTED_LOCATION_RELEASE "{build_prefix}/bin/protoc-7.35.1"' in targets.read_text()
    assert use_build_machine_protoc(CondaBuild.from_environ(env)) is None  # done already: nothing to do


def test_native_builds_leave_protobuf_alone(tmp_path: Path):
    targets = _protobuf_targets(tmp_path / "h_env")
    before = targets.read_text()
    env = conda_environ(PREFIX=str(tmp_path / "h_env"))
    assert use_build_machine_protoc(CondaBuild.from_environ(env)) is None
    assert targets.read_text() == before
