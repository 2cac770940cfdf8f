"""The split layout proven on the real PyTorch 2.13.0 CPU wheel (issue 6).

The wheel is laid out as the build tree the megabuild driver stages from; libtorch and pytorch are staged
by the driver's own staging into separate prefixes, merged into one environment as conda install would,
and then used for real: import torch in a clean environment, autograd, and find_package(Torch) from both
CMake package locations with the recipe's own consumer project.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from megabuild.package_files import LIBTORCH, NOT_SHIPPED, PYTORCH
from megabuild.staging import files_by_package

from feedstock_tools.errors import ToolError
from feedstock_tools.wheel_layout import (
    WheelTag,
    format_table,
    lay_out_wheel_as_build_tree,
    merge_prefixes,
    not_shipped,
    package_sizes,
    parse_wheel_name,
    stage_into_prefixes,
)

CPU_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
RECIPE_DIR = Path(__file__).resolve().parents[1] / "recipe"

pytestmark = pytest.mark.wheel


@dataclass(frozen=True)
class MergedEnvironment:
    tag: WheelTag
    trees: object
    prefixes: dict[str, Path]
    env: Path

    @property
    def python(self) -> Path:
        return self.env / "bin" / "python"

    @property
    def sp_dir(self) -> Path:
        return self.env / self.tag.site_packages


def runtime_requirements(metadata_dir: Path) -> list[str]:
    """The wheel's own Requires-Dist lines without extras: what `import torch` needs besides torch."""
    (metadata,) = metadata_dir.glob("torch-*.dist-info/METADATA")
    lines = metadata.read_text().splitlines()
    return [
        line.split(":", 1)[1].strip()
        for line in lines
        if line.startswith("Requires-Dist:") and ";" not in line
    ]


@pytest.fixture(scope="module")
def merged(tmp_path_factory: pytest.TempPathFactory) -> MergedEnvironment:
    if not CPU_WHEEL.is_file():
        pytest.fail(
            f"{CPU_WHEEL} is missing: this kind of machine ships it (pip install torch==2.13.0 finds it)"
        )
    work = tmp_path_factory.mktemp("wheel-layout")
    tag = parse_wheel_name(CPU_WHEEL)
    trees = lay_out_wheel_as_build_tree(CPU_WHEEL, work / "src")
    prefixes = stage_into_prefixes(trees, tag, work)
    # The environment prefix: a virtual environment of the wheel's Python plays conda's env, so the merged
    # files sit at $PREFIX/lib and $PREFIX/lib/python3.11/site-packages as in a conda environment.
    interpreter = shutil.which(f"python{tag.python}") or sys.executable
    env = work / "env"
    subprocess.run([interpreter, "-m", "venv", str(env)], check=True)
    subprocess.run(
        # pybind11: the CMake consumer's torch_python extension is built against it, as in the recipe's test
        [
            env / "bin" / "python",
            "-m",
            "pip",
            "install",
            "-q",
            *runtime_requirements(trees.metadata),
            "pybind11",
        ],
        check=True,
    )
    merge_prefixes(prefixes, env)
    return MergedEnvironment(tag, trees, prefixes, env)


def run_clean(command: list[str | Path]) -> subprocess.CompletedProcess[str]:
    """Run with an empty environment: no LD_LIBRARY_PATH, no PYTHONPATH, nothing inherited."""
    return subprocess.run(
        [str(part) for part in command], env={}, capture_output=True, text=True, check=False
    )


def run_with_tools_on_path(command: list[str | Path]) -> subprocess.CompletedProcess[str]:
    """Like run_clean, but CMake needs PATH to find Ninja and the compilers."""
    return subprocess.run(
        [str(part) for part in command],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


PROBE = r"""
import json, torch
x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = (x * x).sum() + (torch.ones(2, 3) @ x).sum()
y.backward()
maps = open("/proc/self/maps").read().split("\n")
print(json.dumps({
    "version": torch.__version__,
    "file": torch.__file__,
    "y": y.item(),
    "grad": x.grad.tolist(),
    "loaded": sorted({line.split()[-1] for line in maps if re.search(LOADED, line)}),
}))
""".replace("import json, torch", "import json, re, torch").replace(
    "LOADED", repr(r"libtorch_cpu|libc10\.so|_C\.cpython")
)


def test_import_torch_in_a_clean_environment_uses_prefix_lib(merged: MergedEnvironment) -> None:
    result = run_clean([merged.python, "-c", PROBE])
    assert result.returncode == 0, result.stderr
    probe = json.loads(result.stdout)
    assert probe["version"].startswith("2.13.0")
    assert Path(probe["file"]) == merged.sp_dir / "torch" / "__init__.py"
    lib = merged.env / "lib"
    loaded = {Path(path) for path in probe["loaded"]}
    assert lib / "libtorch_cpu.so" in loaded, probe["loaded"]
    assert lib / "libc10.so" in loaded, probe["loaded"]
    assert (
        merged.sp_dir / "torch" / f"_C.cpython-{merged.tag.python.replace('.', '')}-x86_64-linux-gnu.so"
        in loaded
    )
    # y = sum(x^2) + 2 * sum(x) -> 14 + 12; dy/dx = 2x + 2
    assert probe["y"] == pytest.approx(26.0)
    assert probe["grad"] == pytest.approx([4.0, 6.0, 8.0])


@pytest.mark.parametrize("location", ["prefix", "site-packages"])
def test_cmake_consumer_builds_links_and_runs(
    merged: MergedEnvironment, location: str, tmp_path: Path
) -> None:
    """libtorch's test uses $PREFIX/share/cmake/Torch; pytorch's adds the torch_python extension."""
    consumer = RECIPE_DIR / "cmake_test"
    if not (consumer / "CMakeLists.txt").is_file():
        pytest.fail("recipe/cmake_test/CMakeLists.txt is missing: the recipe's CMake consumer project")
    build = tmp_path / "build"
    arguments = ["cmake", "-S", consumer, "-B", build, "-G", "Ninja"]
    if location == "prefix":
        arguments.append(f"-DTorch_DIR={merged.env / 'share' / 'cmake' / 'Torch'}")
    else:
        pybind11_dir = run_clean([merged.python, "-m", "pybind11", "--cmakedir"]).stdout.strip()
        arguments += [
            f"-DTorch_DIR={merged.sp_dir / 'torch' / 'share' / 'cmake' / 'Torch'}",
            "-DWITH_TORCH_PYTHON=ON",
            f"-DPython_EXECUTABLE={merged.python}",
            f"-Dpybind11_DIR={pybind11_dir}",
        ]
    configure = run_with_tools_on_path(arguments)
    assert configure.returncode == 0, configure.stdout + configure.stderr
    assert "Found Torch" in configure.stdout
    # the build runs the consumer's check_extension target too: import torch + the extension, call it
    compiled = run_with_tools_on_path(["cmake", "--build", build])
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    if location == "site-packages":
        assert "torch_python extension OK: 10.0" in compiled.stdout
    executable = build / "torch_consumer"
    ran = run_clean([executable])
    assert ran.returncode == 0, f"{executable.name}: {ran.stdout}{ran.stderr}"
    assert ran.stdout.startswith("torch 2.13.0: sum(x^2)=30"), ran.stdout
    assert ran.stdout.rstrip().endswith("OK"), ran.stdout
    needed = subprocess.run(["readelf", "-d", str(executable)], capture_output=True, text=True, check=True)
    assert re.search(r"NEEDED.*\[libtorch_cpu\.so\]", needed.stdout), needed.stdout


def test_every_wheel_file_is_in_exactly_one_package_or_deliberately_left_out(
    merged: MergedEnvironment,
) -> None:
    grouped = files_by_package(merged.trees)
    dropped = {p.path for p in grouped[NOT_SHIPPED]}
    # what the table leaves out on purpose: auditwheel's OpenMP, the bundled protoc, BUILD_TEST artifacts,
    # and third-party headers that conda-forge packages provide
    assert {"lib/libgomp.so.1", "bin/protoc", "lib/libtorchbind_test.so"} <= dropped
    libtorch = {p.path for p in grouped[LIBTORCH]}
    assert {"lib/libc10.so", "lib/libtorch_cpu.so", "lib/libtorch.so", "lib/libshm.so"} <= libtorch
    assert not any(path.startswith(("include/pybind11/", "include/google/")) for path in libtorch)
    with zipfile.ZipFile(CPU_WHEEL) as wheel:
        members = [info for info in wheel.infolist() if not info.is_dir()]
    missing, wrong_size = [], []
    for info in members:
        # a dropped install-tree file "lib/x" is the wheel's "torch/lib/x";
        # a dropped setuptools-tree file keeps its wheel path
        if info.filename in dropped or info.filename.removeprefix("torch/") in dropped:
            assert not (merged.sp_dir / info.filename).exists(), f"{info.filename} is shipped though dropped"
            continue
        installed = merged.sp_dir / info.filename
        if not installed.exists():
            missing.append(info.filename)
        elif installed.stat().st_size != info.file_size:
            wrong_size.append(info.filename)
    assert not missing, f"{len(missing)} wheel files not in any package, e.g. {missing[:3]}"
    assert not wrong_size, f"{len(wrong_size)} wheel files differ after staging, e.g. {wrong_size[:3]}"
    # each real file has exactly one owner: the packages' prefixes never hold the same path
    libtorch_paths = {p.relative_to(merged.prefixes[LIBTORCH]) for p in merged.prefixes[LIBTORCH].rglob("*")}
    pytorch_paths = {p.relative_to(merged.prefixes[PYTORCH]) for p in merged.prefixes[PYTORCH].rglob("*")}
    shared_files = {
        path for path in libtorch_paths & pytorch_paths if not (merged.prefixes[LIBTORCH] / path).is_dir()
    }
    assert not shared_files


def test_report_counts_every_staged_file(merged: MergedEnvironment) -> None:
    rows = {row.package: row for row in package_sizes(merged.prefixes)}
    for package, prefix in merged.prefixes.items():
        entries = [p for p in prefix.rglob("*") if p.is_symlink() or p.is_file()]
        assert rows[package].files + rows[package].links == len(entries)
    # pytorch reaches lib, include, share and bin of $PREFIX through symlinks, and owns libtorch_python
    assert rows[PYTORCH].links == 4
    assert (merged.prefixes[PYTORCH] / "lib" / "libtorch_python.so").is_file()
    assert rows[LIBTORCH].bytes > 400e6  # libtorch_cpu.so alone is 434 MB
    assert os.access(merged.env / "bin" / "torch_shm_manager", os.X_OK)  # the wheel's mode bits survive
    table = format_table(list(rows.values()), not_shipped(merged.trees))
    assert re.search(rf"^\| {LIBTORCH} \| {rows[LIBTORCH].files} \| 0 \|", table, re.MULTILINE)
    print("\n" + table)


def test_clobbering_packages_are_refused(tmp_path: Path) -> None:
    for package in ("a", "b"):
        (tmp_path / package / "lib").mkdir(parents=True)
        (tmp_path / package / "lib" / "libsame.so").write_text(package)
    with pytest.raises(ToolError, match=r"lib/libsame.so is in both a and b"):
        merge_prefixes({"a": tmp_path / "a", "b": tmp_path / "b"}, tmp_path / "env")


def test_wheel_name_that_is_not_a_linux_cpython_wheel_is_refused() -> None:
    with pytest.raises(ToolError, match="is not a Linux CPython wheel name"):
        parse_wheel_name(Path("torch-2.13.0-py3-none-any.whl"))
