"""The macOS and cross-compilation patches 0010-0012: what they change, and that 0012's CMake works.

That they apply strictly to 2.13.0's lines is test_recipe_patches.py's check, on the lines conda-forge's
2.13.0 patches 0019, 0021 and 0022 show as context (in tests/patch_fixtures/pytorch-2.13.0-preimage.txt);
the tests here start from the same pre-image tree.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_recipe_patches import preimage_tree

RECIPE = Path(__file__).resolve().parents[2] / "recipe"
PLATFORM_PATCHES = sorted(
    p for p in (RECIPE / "patches").glob("*.patch") if 10 <= int(p.name.split("-", 1)[0]) <= 14
)


def apply(patch: Path, root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "apply", *extra, str(patch)], cwd=root, capture_output=True, text=True, check=False
    )


def test_the_platform_patches_are_there():
    assert [p.name.split("-", 1)[0] for p in PLATFORM_PATCHES] == ["0010", "0011", "0012"]


def test_a_wrong_context_line_is_caught(tmp_path: Path):
    """The check has teeth: one changed context line in the pre-image and 0011 no longer applies."""
    (patch,) = [p for p in PLATFORM_PATCHES if p.name.startswith("0011")]
    preimage_tree(tmp_path)
    target = tmp_path / "cmake/Codegen.cmake"
    target.write_text(target.read_text().replace("if(CXX_AVX2_FOUND)", "if(CXX_AVX2_FOUND AND X)"))
    assert apply(patch, tmp_path, "--check").returncode != 0


def test_cpu_capability_macros_no_longer_go_through_cxx_flags(tmp_path: Path):
    (patch,) = [p for p in PLATFORM_PATCHES if p.name.startswith("0011")]
    preimage_tree(tmp_path)
    target = tmp_path / "cmake/Codegen.cmake"
    assert apply(patch, tmp_path).returncode == 0
    text = target.read_text()
    assert not re.search(r"CMAKE_CXX_FLAGS.*_CPU_DEFINITION", text)
    assert sorted(re.findall(r"add_compile_definitions\(HAVE_(\w+)_CPU_DEFINITION\)", text)) == [
        "AVX2", "AVX512", "SVE", "VSX", "ZVECTOR",
    ]  # fmt: skip


def _soabi_block(tmp_path: Path) -> str:
    """The CMake code patch 0012 adds to Dependencies.cmake, from the patched pre-image."""
    (patch,) = [p for p in PLATFORM_PATCHES if p.name.startswith("0012")]
    preimage_tree(tmp_path / "src")
    target = tmp_path / "src" / "cmake/Dependencies.cmake"
    assert apply(patch, tmp_path / "src").returncode == 0
    text = target.read_text()
    start = text.index("    # conda-forge: cross-compiling")
    return text[start : text.index("  else()\n", start)]


def _configure(tmp_path: Path, block: str, soabi: str, interpreter: str, cross: bool):
    project = tmp_path / ("cross" if cross else "native")
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(soabi NONE)\n"
        f'set(Python_EXECUTABLE "{interpreter}")\nset(Python_SOABI "{soabi}")\n'
        f"{block}"
        'message(STATUS "SOABI=[${Python_SOABI}] crosscompiling=[${CMAKE_CROSSCOMPILING}]")\n'
    )
    # CMAKE_SYSTEM_NAME on the command line is how conda-forge's activation marks a cross build
    # (clang-compiler-activation-feedstock activate-clang.sh; ctng's likewise): CMAKE_CROSSCOMPILING.
    system = ["-DCMAKE_SYSTEM_NAME=Linux", "-DCMAKE_SYSTEM_PROCESSOR=aarch64"] if cross else []
    return subprocess.run(
        ["cmake", "-S", str(project), "-B", str(project / "build"), *system],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def target_python(tmp_path: Path) -> Path:
    """A test double of cross-python's interpreter: this machine's Python reporting an aarch64 SOABI."""
    script = tmp_path / "cross-python"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -c \"print('cpython-312-aarch64-linux-gnu')\"\n")
    script.chmod(0o755)
    return script


def test_empty_soabi_is_taken_from_the_target_interpreter_when_cross(tmp_path: Path, target_python: Path):
    result = _configure(tmp_path, _soabi_block(tmp_path), "", str(target_python), cross=True)
    assert result.returncode == 0, result.stderr
    assert "SOABI=[cpython-312-aarch64-linux-gnu] crosscompiling=[TRUE]" in result.stdout


def test_a_soabi_findpython_computed_is_kept(tmp_path: Path, target_python: Path):
    result = _configure(tmp_path, _soabi_block(tmp_path), "cpython-312-x", str(target_python), cross=True)
    assert "SOABI=[cpython-312-x]" in result.stdout


def test_native_builds_are_untouched(tmp_path: Path, target_python: Path):
    result = _configure(tmp_path, _soabi_block(tmp_path), "", str(target_python), cross=False)
    assert "SOABI=[] crosscompiling=[FALSE]" in result.stdout


def test_an_interpreter_that_cannot_run_stops_the_configure(tmp_path: Path):
    result = _configure(tmp_path, _soabi_block(tmp_path), "", "/bin/false", cross=True)
    assert result.returncode != 0
    assert "did not report the target's SOABI: build with cross-python" in " ".join(result.stderr.split())
