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

from feedstock_tools.common.errors import ToolError
from feedstock_tools.proofs.rehearsal.prefixes import uv_binary
from feedstock_tools.proofs.wheels.wheel_layout import (
    WheelTag,
    format_table,
    lay_out_wheel_as_build_tree,
    merge_prefixes,
    not_shipped,
    package_sizes,
    parse_wheel_name,
    stage_into_prefixes,
)
from megabuild.package_files import LIBTORCH, NOT_SHIPPED, PYTORCH
from megabuild.staging import files_by_package

CPU_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
WHEEL_VERSION = CPU_WHEEL.name.split("-")[1].split("+")[0]  # the release the wheel is, not the recipe's
RECIPE_DIR = Path(__file__).resolve().parents[3] / "recipe"

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
            f"{CPU_WHEEL} is missing: this kind of machine ships it (pip install torch=={WHEEL_VERSION})"
        )
    work = tmp_path_factory.mktemp("wheel-layout")
    tag = parse_wheel_name(CPU_WHEEL)
    trees = lay_out_wheel_as_build_tree(CPU_WHEEL, work / "src")
    prefixes = stage_into_prefixes(trees, tag, work)
    # The environment prefix: a virtual environment of the wheel's Python plays conda's env, so the merged
    # files sit at $PREFIX/lib and $PREFIX/lib/python3.11/site-packages as in a conda environment.
    interpreter = shutil.which(f"python{tag.python}") or sys.executable
    env = work / "env"
    # uv, as the rehearsal's venvs: nothing byte-compiled ahead, Python compiles what an import needs
    # (ensurepip and compiling all of sympy were 18 s of the 23 s this took with venv and pip, measured);
    # copies, not links into uv's cache, since the prefixes are merged into this tree
    uv = uv_binary()
    subprocess.run([uv, "venv", "--quiet", "--python", interpreter, str(env)], check=True)
    subprocess.run(
        # pybind11: the CMake consumer's torch_python extension is built against it, as in the recipe's test
        [uv, "pip", "install", "--quiet", "--link-mode", "copy", "--python", str(env / "bin" / "python"),
         *runtime_requirements(trees.metadata), "pybind11"],
        check=True,
    )  # fmt: skip
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
    assert probe["version"].startswith(WHEEL_VERSION)
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
    """libtorch's test uses $PREFIX/share/cmake/Torch; pytorch's adds the torch_python extension.

    From site-packages only the extension is built and imported: the executable compiles the same headers
    (site-packages/torch/include is a link to $PREFIX/include) and links the same TORCH_LIBRARIES as the
    extension does, and compiling torch/torch.h once more costs 20 s of CPU here (measured)."""
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
    if location == "site-packages":
        # the consumer's check_extension target: import torch + the extension, call it
        compiled = run_with_tools_on_path(["cmake", "--build", build, "--target", "check_extension"])
        assert compiled.returncode == 0, compiled.stdout + compiled.stderr
        assert "torch_python extension OK: 10.0" in compiled.stdout
        extension = subprocess.run(
            ["readelf", "-d", *build.glob("torch_consumer_ext*.so")],
            capture_output=True,
            text=True,
            check=True,
        )
        assert re.search(r"NEEDED.*\[libtorch_cpu\.so\]", extension.stdout), extension.stdout
        assert re.search(r"NEEDED.*\[libtorch_python\.so\]", extension.stdout), extension.stdout
        return
    compiled = run_with_tools_on_path(["cmake", "--build", build])
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    executable = build / "torch_consumer"
    ran = run_clean([executable])
    assert ran.returncode == 0, f"{executable.name}: {ran.stdout}{ran.stderr}"
    assert ran.stdout.startswith(f"torch {WHEEL_VERSION}: sum(x^2)=30"), ran.stdout
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


def test_wheel_name_that_is_not_a_cpython_platform_wheel_is_refused() -> None:
    with pytest.raises(ToolError, match="is not a CPython wheel name for linux, macOS or Windows"):
        parse_wheel_name(Path("torch-2.13.0-py3-none-any.whl"))


# ---- recipe/tests scripts and patch 0015 on the real 2.13.0 torch --------------------------------------

PACKAGE_TESTS = RECIPE_DIR / "tests"


def test_build_features_check_on_the_cpu_wheel(merged: MergedEnvironment) -> None:
    """Complex dots right, oneDNN and distributed built in; a CPU build has no cuDNN/NCCL and it says so."""
    script = PACKAGE_TESTS / "check_build_features.py"
    cpu = run_clean([merged.python, script, "--require", "onednn", "distributed"])
    assert cpu.returncode == 0, cpu.stderr
    assert cpu.stdout.startswith("OK: complex dot; built in: onednn, distributed")
    cuda = run_clean([merged.python, script, "--require", "cudnn", "nccl"])
    assert cuda.returncode == 1
    assert "FAIL: cuDNN is not built in" in cuda.stderr and "FAIL: NCCL is not built in" in cuda.stderr
    mps = run_clean([merged.python, script, "--require", "mps"])  # a Linux wheel has no Metal backend
    assert mps.returncode == 1
    assert mps.stderr.endswith("FAIL: MPS is not built in (torch.backends.mps.is_built() is False)\n")


def patched_cpp_extension(merged: MergedEnvironment, directory: Path) -> Path:
    """The wheel's torch/utils/cpp_extension.py (the 2.13.0 source) with patch 0015 applied by git."""
    (directory / "torch" / "utils").mkdir(parents=True)
    shutil.copy(merged.sp_dir / "torch" / "utils" / "cpp_extension.py", directory / "torch" / "utils")
    (patch,) = (RECIPE_DIR / "patches").glob("0015-*.patch")
    subprocess.run(["git", "apply", "--unsafe-paths", "--directory=.", str(patch)], cwd=directory, check=True)
    return directory / "torch" / "utils" / "cpp_extension.py"


# Runs cpp_extension.py code as the real torch.utils.cpp_extension (same __file__, so its _TORCH_PATH is the
# installed torch) and prints its paths, for each request of argv[1] (JSON: one import of torch for all):
# the code's file, the sysconfig prefix to report (cross-python's host prefix; "" keeps the real one),
# CUDA_HOME, and the machine os.uname() reports (a test double of an aarch64 machine where given; "" keeps
# the real one).
PATHS_PROBE = r"""
import importlib.machinery, importlib.util, json, os, sys, sysconfig
import torch, torch.utils
real_config_var, real_uname = sysconfig.get_config_var, os.uname
installed = os.path.join(os.path.dirname(torch.utils.__file__), "cpp_extension.py")
answers = []
for module_file, prefix, cuda_home, machine in json.loads(sys.argv[1]):
    sysconfig.get_config_var = real_config_var
    os.uname = real_uname
    if prefix:
        def config_var(name, prefix=prefix):
            return prefix if name == "prefix" else real_config_var(name)
        sysconfig.get_config_var = config_var
    name = "torch.utils.cpp_extension"
    loader = importlib.machinery.SourceFileLoader(name, module_file)
    spec = importlib.util.spec_from_file_location(name, installed, loader=loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    if machine:  # after the import: only the paths' own os.uname() call sees the stand-in machine
        uname = real_uname()
        os.uname = lambda machine=machine: os.uname_result((*uname[:4], machine))
    module.CUDA_HOME = cuda_home or None  # a CPU torch never asks; conda's nvcc in $PREFIX/bin gives this
    out = {"cpu": module.include_paths("cpu")}
    if cuda_home:
        out.update(cuda=module.include_paths("cuda"), lib=module.library_paths("cuda"))
    answers.append(out)
print(json.dumps(answers))
"""


def cpp_extension_paths_of(merged, *requests: tuple[Path, str, str, str]) -> list[dict]:
    """The paths for each (module file, prefix, CUDA_HOME, machine), in one Python that imports torch once."""
    ran = run_clean([merged.python, "-c", PATHS_PROBE, json.dumps([[str(r[0]), *r[1:]] for r in requests])])
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout.splitlines()[-1])


def test_patch_0015_adds_the_cuda_toolkit_of_a_conda_environment(merged, tmp_path) -> None:
    """conda-forge's cuda-* packages: nvcc in $PREFIX/bin, the toolkit in $PREFIX/targets/x86_64-linux."""
    patched = patched_cpp_extension(merged, tmp_path / "patched")
    original = merged.sp_dir / "torch" / "utils" / "cpp_extension.py"
    conda = tmp_path / "conda-env"  # test double of that layout: the files the patch looks for
    target = conda / "targets" / "x86_64-linux"
    (target / "include").mkdir(parents=True)
    (target / "include" / "cuda_runtime_api.h").write_text("/* cuda-cudart-dev */\n")
    (target / "lib" / "stubs").mkdir(parents=True)
    (conda / "lib").mkdir()
    plain = tmp_path / "usr-local-cuda"  # a toolkit laid out the NVIDIA way (no targets/)
    (plain / "include").mkdir(parents=True)
    before, after, plain_before, plain_after = cpp_extension_paths_of(
        merged, *((module, "", str(home), "") for home in (conda, plain) for module in (original, patched))
    )
    assert str(target / "include") not in before["cuda"]
    assert after["cuda"] == [*before["cuda"], str(target / "include")]
    assert after["lib"] == [*before["lib"], str(target / "lib"), str(target / "lib" / "stubs")]
    assert plain_after == plain_before  # gets nothing added


def test_patch_0015_finds_the_toolkit_of_either_aarch64_kind(merged, tmp_path) -> None:
    """linux-aarch64: conda-forge's sbsa packages use targets/sbsa-linux, the Jetson (tegra) ones
    targets/aarch64-linux (pytorch-cpu-feedstock 74dd3d46 build.sh's CUDA_TARGET); the patch looks for both
    at run time, so no build-time value is written into the file."""
    patched = patched_cpp_extension(merged, tmp_path / "patched")
    original = merged.sp_dir / "torch" / "utils" / "cpp_extension.py"
    kinds = ("sbsa-linux", "aarch64-linux")
    for kind in kinds:
        conda = tmp_path / kind  # test double of that environment's layout
        (conda / "targets" / kind / "include").mkdir(parents=True)
        (conda / "targets" / kind / "include" / "cuda_runtime_api.h").write_text("/* cuda-cudart-dev */\n")
        (conda / "lib").mkdir()
    requests = [
        (module, "", str(tmp_path / kind), machine)
        for kind in kinds
        for module, machine in ((original, "aarch64"), (patched, "aarch64"), (patched, "x86_64"))
    ]
    answers = iter(cpp_extension_paths_of(merged, *requests))
    for kind in kinds:
        target = tmp_path / kind / "targets" / kind
        before, after, x86 = next(answers), next(answers), next(answers)
        assert after["cuda"] == [*before["cuda"], str(target / "include")], kind
        assert after["lib"] == [*before["lib"], str(target / "lib"), str(target / "lib" / "stubs")], kind
        # an x86_64 machine never reads an aarch64 layout
        assert str(target / "include") not in x86["cuda"], kind


SMALL_EXTENSION = """\
// the kind of code torchvision and pytorch_scatter compile: torch's C++ API types and utilities
#include <torch/types.h>
#include <torch/utils.h>
torch::Tensor twice(const torch::Tensor& t) { torch::NoGradGuard guard; return t * 2; }
"""


def compile_small_extension(include_paths: list[str], host_include: Path, where: Path, *mode: str):
    """g++ as conda-build runs it for a downstream package: its CXXFLAGS carry -isystem $PREFIX/include."""
    source = where / "extension.cpp"
    source.write_text(SMALL_EXTENSION)
    flags = [f"-I{path}" for path in include_paths]
    command = ["g++", "-std=c++20", *mode, *flags, "-isystem", str(host_include), str(source)]
    return subprocess.run(command, capture_output=True, text=True, check=False, cwd=where)


def torch_headers_used(dependencies: str) -> set[str]:
    """The include roots (up to .../include) of the torch headers g++ -M lists (-M: system headers too,
    and -isystem makes $PREFIX/include one)."""
    headers = [word for word in dependencies.split() if "/torch/" in word or "/ATen/" in word]
    return {header.split("/include/")[0] for header in headers}


def test_include_link_in_a_cross_build_both_ways(merged, tmp_path) -> None:
    """A downstream cross build: the build machine's pytorch (ours: site-packages/torch/include links to
    its $BUILD_PREFIX/include) compiles for a target whose libtorch headers are in $PREFIX/include, and
    cross-python's sysconfig names $PREFIX (pytorch/pytorch#146702's log shows conda-forge's include_paths
    returning the host prefix there). The decision, kept link + patch 0015, against the alternatives."""
    # the target's libtorch headers: a second copy, as in a cross build. Not copy2: GCC's #pragma once takes
    # files of equal size, mtime and contents for one (run here: with the mtimes kept, case 2 compiles),
    # and two packages' copies never share mtimes
    host = tmp_path / "host-prefix"
    shutil.copytree(merged.env / "include", host / "include", symlinks=True, copy_function=shutil.copy)
    build_include = merged.sp_dir / "torch" / "include"  # -> merged.env/include, the build machine's

    original = merged.sp_dir / "torch" / "utils" / "cpp_extension.py"
    patched_module = patched_cpp_extension(merged, tmp_path / "patched")
    unpatched, patched, native_patched, native_original = (
        answer["cpu"]
        for answer in cpp_extension_paths_of(
            merged,
            (original, str(host), "", ""),
            (patched_module, str(host), "", ""),
            (patched_module, "", "", ""),
            (original, "", "", ""),
        )
    )

    # 1. the link as upstream's include_paths uses it: compiles, but every torch header is the build
    #    machine's (its generated ATen/Config.h, cmake_macros.h describe the build platform)
    assert unpatched == [str(build_include), str(build_include / "torch" / "csrc" / "api" / "include")]
    deps = compile_small_extension(unpatched, host / "include", tmp_path, "-M")
    assert deps.returncode == 0, deps.stderr
    assert torch_headers_used(deps.stdout) == {str(merged.sp_dir / "torch")}

    # 2. both copies, as conda-forge's include_paths gave them before its issue 447: the same headers
    #    under two spellings come from both prefixes and redefine each other
    both = [str(host / "include"), str(host / "include/torch/csrc/api/include"), str(build_include)]
    conflict = compile_small_extension(both, host / "include", tmp_path, "-fsyntax-only", "-fmax-errors=1")
    assert conflict.returncode != 0
    assert re.search(r"conflicting declaration|redefinition", conflict.stderr), conflict.stderr[-2000:]

    # 3. the decision: keep the link, and patch 0015 makes include_paths use the target prefix's headers
    #    alone in a cross build; it compiles, from the target's headers only
    assert patched == [str(host / "include"), str(host / "include" / "torch" / "csrc" / "api" / "include")]
    deps = compile_small_extension(patched, host / "include", tmp_path, "-M")
    assert torch_headers_used(deps.stdout) == {str(host)}
    compiled = compile_small_extension(patched, host / "include", tmp_path, "-fsyntax-only")
    assert compiled.returncode == 0, compiled.stderr[-2000:]

    # natively (sysconfig's prefix is the environment the link points into) nothing changes
    assert native_patched == native_original
