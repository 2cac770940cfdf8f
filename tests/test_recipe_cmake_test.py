"""recipe/cmake_test, the CMake consumer of the package tests, built against the real 2.13.0 CPU wheel."""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

CPU_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
CONSUMER = Path(__file__).resolve().parents[1] / "recipe" / "cmake_test"
# what a C++ consumer needs of the wheel: libraries, headers, CMake package files
NEEDED_TREES = ("torch/lib/", "torch/include/", "torch/share/")

pytestmark = pytest.mark.wheel


@pytest.fixture(scope="module")
def unpacked_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not CPU_WHEEL.is_file():
        pytest.fail(
            f"{CPU_WHEEL} is missing: this kind of machine ships it (pip install torch==2.13.0 finds it)"
        )
    root = tmp_path_factory.mktemp("torch-wheel")
    with zipfile.ZipFile(CPU_WHEEL) as wheel:
        members = [name for name in wheel.namelist() if name.startswith(NEEDED_TREES)]
        wheel.extractall(root, members)
    for library in (root / "torch" / "lib").iterdir():
        library.chmod(0o755)  # zip extraction drops the mode bits
    return root / "torch"


def test_consumer_configures_builds_and_runs(unpacked_wheel: Path, tmp_path: Path) -> None:
    tools = [tool for tool in ("cmake", "ninja", "g++") if shutil.which(tool) is None]
    assert not tools, f"missing build tools {tools}: .ci/run installs cmake, ninja-build and g++"
    build = tmp_path / "build"
    torch_dir = unpacked_wheel / "share" / "cmake" / "Torch"
    environment = {**os.environ, "CXX": "g++"}
    configure = subprocess.run(
        ["cmake", "-S", str(CONSUMER), "-B", str(build), "-G", "Ninja", f"-DTorch_DIR={torch_dir}"],
        capture_output=True,
        text=True,
        check=False,
        env=environment,
    )
    assert configure.returncode == 0, configure.stdout + configure.stderr
    assert "Found Torch" in configure.stdout
    compiled = subprocess.run(
        ["cmake", "--build", str(build)], capture_output=True, text=True, check=False, env=environment
    )
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    assert not (build / "torch_consumer_ext.so").exists()  # the torch_python part is opt-in

    ran = subprocess.run([str(build / "torch_consumer")], capture_output=True, text=True, check=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.startswith("torch 2.13.0: sum(x^2)=30")
    assert ran.stdout.rstrip().endswith("OK")
    needed = subprocess.run(
        ["readelf", "-d", str(build / "torch_consumer")], capture_output=True, text=True, check=True
    ).stdout
    assert "[libtorch.so]" in needed or "[libtorch_cpu.so]" in needed
