"""The Windows patches 0020-0024: where meta.yaml applies them, what 0020 and 0022 do when CMake runs them.

That they apply strictly to 2.13.0's lines is test_recipe_patches.py's check (tests/patch_fixtures). Here
0020's install rules run in a real MinGW-w64 cross build (x86_64-w64-mingw32-gcc-posix writes PE DLLs and
import libraries, which CMake classifies as it does MSVC's: RUNTIME and ARCHIVE artifacts).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from test_recipe_patches import CPU_WHEEL, PATCHES, RECIPE, patch_id, preimage_tree

WINDOWS_PATCHES = [p for p in PATCHES if 20 <= int(patch_id(p)) <= 29]
MINGW_CC = "x86_64-w64-mingw32-gcc-posix"


def patched_tree(root: Path, number: str) -> Path:
    (patch,) = [p for p in WINDOWS_PATCHES if patch_id(p) == number]
    preimage_tree(root)
    subprocess.run(["git", "apply", str(patch)], cwd=root, check=True)
    return root


def selector_of(name: str) -> str:
    """The selector meta.yaml puts on a patch's line ("" for none)."""
    (line,) = [line for line in (RECIPE / "meta.yaml").read_text().splitlines() if f"patches/{name}" in line]
    found = re.search(r"#\s*\[(.*)\]\s*$", line)
    return found.group(1) if found else ""


def test_meta_yaml_applies_each_windows_patch_where_it_belongs():
    by_id = {patch_id(p): selector_of(p.name) for p in PATCHES}
    assert [patch_id(p) for p in WINDOWS_PATCHES] == ["0020", "0021", "0022", "0023", "0024"]
    assert by_id["0020"] == by_id["0022"] == by_id["0024"] == "win"
    assert by_id["0021"] == 'win and cuda_compiler_version != "None"'
    assert by_id["0023"] == ""  # the missing export is a linux problem too (its header: nm -D)
    # the MAGMA split needs the separate libtorch_cuda_linalg, which 2.13.0 builds on linux only
    assert by_id["0004"] == 'linux and cuda_compiler_version != "None"'


def test_0020_drops_the_destination_of_exactly_the_win64_targets(tmp_path: Path):
    root = patched_tree(tmp_path, "0020")
    rules = {
        match[0]: match[1]
        for path in root.rglob("CMakeLists.txt")
        for match in re.findall(r"install\(TARGETS (\w+)(.*)\)", path.read_text())
    }
    without = sorted(target for target, rest in rules.items() if "DESTINATION" not in rest)
    assert without == sorted(
        ["c10", "c10_cuda", "caffe2_nvrtc", "torch_cpu", "torch_cuda", "torch", "torch_global_deps",
         "torch_python", "shm"]
    )  # fmt: skip
    # ROCm, XPU and the linux-only linalg library keep upstream's rule
    kept = {target for target, rest in rules.items() if "DESTINATION" in rest}
    assert {"torch_hip", "torch_xpu", "torch_cuda_linalg"} <= kept


def test_0020_installs_dlls_to_bin_and_import_libraries_to_lib(tmp_path: Path):
    """c10's install rule of 2.13.0 and the patched one, in a Windows cross build: upstream's puts the DLL
    into lib/ beside its import library (the wheel's torch/lib), the patched one into bin/ (Library/bin)."""
    if shutil.which(MINGW_CC) is None:
        pytest.fail(
            f"{MINGW_CC} is missing: apt-get install gcc-mingw-w64-x86-64-posix (.ci/run installs it)"
        )
    preimage_tree(tmp_path / "pre")
    pre = (tmp_path / "pre" / "c10/CMakeLists.txt").read_text()
    post = (patched_tree(tmp_path / "post", "0020") / "c10/CMakeLists.txt").read_text()
    original = re.search(r"install\(TARGETS c10 .*\)", pre).group(0)
    patched = re.search(r"install\(TARGETS c10 .*\)", post).group(0)
    assert original != patched

    def install(rule: str, name: str) -> list[str]:
        project = tmp_path / name
        project.mkdir()
        (project / "c10.c").write_text("__declspec(dllexport) int c10_answer(void) { return 42; }\n")
        (project / "CMakeLists.txt").write_text(
            "cmake_minimum_required(VERSION 3.18)\nproject(c10 C)\n"
            "add_library(c10 SHARED c10.c)\n"
            f"{rule}\n"
            "install(EXPORT Caffe2Targets DESTINATION share/cmake/Caffe2)\n"
        )
        prefix = project / "prefix"
        common = ["-S", str(project), "-B", str(project / "build"), "-G", "Ninja"]
        cross = ["-DCMAKE_SYSTEM_NAME=Windows", f"-DCMAKE_C_COMPILER={MINGW_CC}"]
        cross.append(f"-DCMAKE_INSTALL_PREFIX={prefix}")
        for command in (["cmake", *common, *cross], ["cmake", "--build", str(project / "build")],
                        ["cmake", "--install", str(project / "build")]):  # fmt: skip
            subprocess.run(command, capture_output=True, text=True, check=True)
        return sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*") if p.suffix in (".dll", ".a"))

    assert install(original, "upstream") == ["lib/libc10.dll", "lib/libc10.dll.a"]
    assert install(patched, "patched") == ["bin/libc10.dll", "lib/libc10.dll.a"]


def test_0022_skips_the_runtime_dll_block_in_a_conda_build(tmp_path: Path):
    """The patched condition of PostBuildSteps.cmake, run by CMake as on Windows with BUILD_PYTHON: the block
    runs outside conda-build and not where conda-build has set CONDA_BUILD."""
    text = (patched_tree(tmp_path / "src", "0022") / "cmake/PostBuildSteps.cmake").read_text()
    (condition,) = re.findall(r"^if\(WIN32 AND BUILD_PYTHON.*\)$", text, re.M)
    project = tmp_path / "project"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(p NONE)\nset(WIN32 ON)\nset(BUILD_PYTHON ON)\n"
        f'{condition}\n  message(STATUS "bundling runtime DLLs")\nendif()\n'
    )

    def configure(environment: dict[str, str]) -> str:
        build = tmp_path / f"build{len(environment)}"
        return subprocess.run(
            ["cmake", "-S", str(project), "-B", str(build)],
            env=environment, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip

    outside = {k: v for k, v in os.environ.items() if k != "CONDA_BUILD"}
    assert "bundling runtime DLLs" in configure(outside)
    assert "bundling runtime DLLs" not in configure({**outside, "CONDA_BUILD": "1"})


@pytest.mark.wheel
def test_2_13_0_macros_h_needs_no_escaping_of_windows_paths(tmp_path: Path):
    """Why conda-forge's macros.h escaping (its 0017, written for the 2.12 line) is not carried: 2.13.0 writes
    the compiler path and flags into raw literals R"PYT(...)PYT" (the wheel's generated macros.h), where
    backslashes and quotes stand for themselves; escaping them would double each backslash that
    torch.__config__.show() prints. A multi-line #define like 2.13.0's, with Windows-style values, compiles
    and keeps them byte for byte."""
    if not CPU_WHEEL.is_file():
        pytest.fail(f"{CPU_WHEEL} is missing: this kind of machine ships it")
    with zipfile.ZipFile(CPU_WHEEL) as wheel:
        macros = wheel.read("torch/include/caffe2/core/macros.h").decode()
    for key in ("CXX_COMPILER", "CXX_FLAGS", "CUDA_FLAGS"):
        assert re.search(rf'\{{"{key}", R"PYT\(.*\)PYT"\}}, \\$', macros, re.M), key
    flags = r'/DWIN32 /D_WINDOWS /EHsc -IC:\bld\pytorch_1\_h_env\Library\include -DNAME="a b" /W3'
    compiler = r"C:\Program Files\Microsoft Visual Studio\2022\VC\Tools\MSVC\bin\cl.exe"
    (tmp_path / "show.cpp").write_text(
        "#include <cstdio>\n#define BUILD_STRINGS { \\\n"
        f'  {{"CXX_COMPILER", R"PYT({compiler})PYT"}}, \\\n'
        f'  {{"CXX_FLAGS", R"PYT({flags})PYT"}}, \\\n'
        "}\n"
        "struct Entry { const char* key; const char* value; };\n"
        "int main() {\n  Entry entries[] = BUILD_STRINGS;\n"
        '  for (auto& e : entries) std::printf("%s\\n", e.value);\n}\n'
    )
    program = tmp_path / "show"
    subprocess.run(["g++", "-std=c++17", "-o", str(program), str(tmp_path / "show.cpp")], check=True)
    shown = subprocess.run([str(program)], capture_output=True, text=True, check=True).stdout
    assert shown == f"{compiler}\n{flags}\n"
