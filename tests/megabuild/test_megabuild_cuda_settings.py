"""CUDA-specific driver settings: the size/speed block of environment.py and the arch-list activation."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from megabuild import activation
from megabuild.conda_env import CondaBuild
from megabuild.environment import size_and_speed_settings, upstream_environment
from megabuild.errors import MegabuildError
from tests.megabuild.test_megabuild_environment import conda_environ


def chosen(target_platform: str, cuda: str) -> dict[str, str | None]:
    environ = conda_environ(target_platform=target_platform, cuda_compiler_version=cuda)
    return {s.name: s.value for s in size_and_speed_settings(CondaBuild.from_environ(environ))}


@pytest.mark.parametrize(
    ("target_platform", "cuda", "expected"),
    [
        ("linux-64", "None", {"USE_MKLDNN": "ON"}),
        ("linux-aarch64", "None", {"USE_MKLDNN": "ON"}),
        ("linux-64", "12.9", {"USE_MKLDNN": "ON", "TORCH_NVCC_FLAGS": "-Xfatbin -compress-all"}),
        (
            "linux-64",
            "13.0",
            {"USE_MKLDNN": "ON", "TORCH_NVCC_FLAGS": "-Xfatbin -compress-all -compress-mode=size"},
        ),
        (
            "linux-aarch64",
            "13.0",
            {
                "USE_MKLDNN": "ON",
                "TORCH_NVCC_FLAGS": "-Xfatbin -compress-all -compress-mode=size",
                "USE_PRIORITIZED_TEXT_FOR_LD": "1",
            },
        ),
        ("osx-arm64", "None", {}),
    ],
)
def test_size_and_speed_settings_per_configuration(target_platform, cuda, expected):
    assert chosen(target_platform, cuda) == expected


def test_every_size_and_speed_setting_gives_its_reason_and_reaches_the_build():
    environ = conda_environ(target_platform="linux-aarch64", cuda_compiler_version="13.0")
    build = CondaBuild.from_environ(environ)
    block = size_and_speed_settings(build)
    assert all(len(setting.why) > 40 for setting in block)
    env, _ = upstream_environment(build, environ)
    assert {s.name: env[s.name] for s in block} == {s.name: s.value for s in block}


def run_sh(prefix: Path, script: str, preset: str = "") -> str:
    """Source the scripts as conda's activation does (POSIX sh) and print the variable afterwards."""
    activate, deactivate = prefix / activation.ACTIVATE, prefix / activation.DEACTIVATE
    shell = f"""{preset}
    {script.format(activate=activate, deactivate=deactivate)}
    echo "${{{activation.VARIABLE}-<unset>}}"
    """
    return subprocess.run(["sh", "-c", shell], capture_output=True, text=True, check=True).stdout.strip()


def test_activation_exports_the_arch_list_and_deactivation_removes_it(tmp_path):
    written = activation.write_activation_scripts(tmp_path, "7.5;8.0;12.0+PTX")
    assert written == [activation.ACTIVATE, activation.DEACTIVATE]
    assert run_sh(tmp_path, ". {activate}") == "7.5;8.0;12.0+PTX"
    assert run_sh(tmp_path, ". {activate}; . {deactivate}") == "<unset>"
    # a value of the user's survives both
    preset = f"export {activation.VARIABLE}=9.0"
    assert run_sh(tmp_path, ". {activate}", preset) == "9.0"
    assert run_sh(tmp_path, ". {activate}; . {deactivate}", preset) == "9.0"


def test_activation_refuses_what_it_cannot_write_and_leaves_nothing(tmp_path):
    with pytest.raises(MegabuildError, match="must be a plain list"):
        activation.write_activation_scripts(tmp_path, '8.0"; rm -rf ~; "')
    assert not (tmp_path / "etc").exists()
    (tmp_path / activation.DEACTIVATE).parent.mkdir(parents=True)
    (tmp_path / activation.DEACTIVATE).write_text("someone else's")
    with pytest.raises(MegabuildError, match="exists already"):
        activation.write_activation_scripts(tmp_path, "9.0")
    assert not (tmp_path / activation.ACTIVATE).exists()
    assert (tmp_path / activation.DEACTIVATE).read_text() == "someone else's"
