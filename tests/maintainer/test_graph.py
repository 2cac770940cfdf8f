"""``graph``: build structure of real CMake + Ninja build directories, checked against the built files."""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from cmake_builds import STANDIN, build, configure, have_toolchain, install_standin_magma

from feedstock_tools.__main__ import main
from feedstock_tools.maintainer.build_structure import read_build_structure
from feedstock_tools.maintainer.graph import reduced_edges, render_dot

needs_toolchain = pytest.mark.skipif(
    not have_toolchain("readelf"), reason="needs cmake, ninja, g++ and readelf (.ci/run installs them)"
)


@pytest.fixture(scope="module")
def standin_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The upstream stand-in with CUDA (compiled as plain C++) and MAGMA from a MAGMA_HOME, built."""
    work = tmp_path_factory.mktemp("standin")
    magma_home = install_standin_magma(work)
    directory = work / "build"
    configure(STANDIN, directory, "-DUSE_CUDA=ON", "-DUSE_MAGMA=ON", magma_home=magma_home)
    build(directory)
    return directory


def _needed(library: Path) -> set[str]:
    dynamic = subprocess.run(
        ["readelf", "-d", str(library)], check=True, capture_output=True, text=True
    ).stdout
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic))


@needs_toolchain
def test_structure_matches_the_built_files(standin_build: Path) -> None:
    structure = read_build_structure(standin_build)
    targets = structure.targets
    assert structure.project == "Torch"
    built = {path.name for path in (standin_build / "lib").glob("*.so")}
    # torch._C is a CMake MODULE library in 2.13.0 (the stand-in builds it into lib/ as well)
    linked_kinds = ("shared library", "module library")
    shared = {t.output.rsplit("/", 1)[-1]: t for t in targets.values() if t.kind in linked_kinds}
    assert set(shared) == built  # every built library is a node, and nothing else is one
    assert targets["_C"].kind == "module library"
    assert {"torch_cuda_linalg", "torch_shm_manager"} <= set(targets)
    assert targets["torch_shm_manager"].kind == "executable"

    soname_of = {t.name: t.output.rsplit("/", 1)[-1] for t in targets.values()}
    for file_name, target in shared.items():
        # Sources: one object file per translation unit under the target's CMakeFiles dir.
        objects = list((standin_build / "CMakeFiles" / f"{target.name}.dir").rglob("*.o"))
        objects += list(standin_build.glob(f"**/CMakeFiles/{target.name}.dir/**/*.o"))
        assert target.sources == len(set(objects)), target.name
        assert target.compile_seconds is not None and target.compile_seconds > 0
        # Links: what the linker recorded in the library is a subset of what the graph found.
        internal_needed = _needed(standin_build / "lib" / file_name) & set(soname_of.values())
        assert internal_needed <= {soname_of[link] for link in target.links}, target.name
    # torch links with --no-as-needed: its NEEDED entries are exactly its link list.
    torch_needed = _needed(standin_build / "lib" / "libtorch.so") & set(soname_of.values())
    assert torch_needed == {soname_of[link] for link in targets["torch"].links}
    # MAGMA comes from outside the build (MAGMA_HOME), as conda-forge's libmagma does.
    assert "magma" not in targets
    assert "libmagma.so" in targets["torch_cuda_linalg"].externals


@needs_toolchain
def test_picture_keeps_only_direct_links(standin_build: Path) -> None:
    structure = read_build_structure(standin_build)
    reduced = reduced_edges(structure.targets)
    # torch_cuda reaches c10 through c10_cuda and torch_cpu, so the picture draws no torch_cuda -> c10.
    assert "c10" in structure.targets["torch_cuda"].links
    assert "c10" not in reduced["torch_cuda"]
    assert set(reduced["torch_cuda"]) == {"torch_cpu", "c10_cuda"}
    dot = render_dot(structure)
    assert '"torch_cuda" -> "c10"' not in dot
    assert '"torch_cuda_linalg" -> "external:libmagma.so"' in dot
    internal_edges = [line for line in dot.splitlines() if " -> " in line and "external:" not in line]
    assert len(internal_edges) == sum(len(links) for links in reduced.values())


@needs_toolchain
@pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz dot (apt package graphviz)")
def test_cli_writes_dot_svg_png_and_summary(standin_build: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "picture"
    assert main(["graph", str(standin_build), "--output-dir", str(out), "--name", "standin"]) == 0
    files = {path.name for path in out.iterdir()}
    assert files == {"standin.dot", "standin.svg", "standin.png", "standin.txt"}
    assert (out / "standin.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = (out / "standin.svg").read_text()
    structure = read_build_structure(standin_build)
    for name in structure.targets:
        assert f"<title>{name}</title>" in svg
    summary = capsys.readouterr().out
    assert summary.splitlines()[2].split()[:3] == ["Target", "Kind", "Sources"]
    total = sum(t.sources for t in structure.targets.values())
    assert f"{len(structure.targets)} targets, {total} sources" in summary


SMALL_PROJECT = {
    "CMakeLists.txt": """
        cmake_minimum_required(VERSION 3.18)
        project(Kinds CXX)
        add_library(core_objs OBJECT a.cpp b.cpp)
        set_target_properties(core_objs PROPERTIES POSITION_INDEPENDENT_CODE ON)
        add_library(util STATIC c.cpp)
        set_target_properties(util PROPERTIES POSITION_INDEPENDENT_CODE ON)
        add_library(core SHARED $<TARGET_OBJECTS:core_objs> d.cpp)
        target_link_libraries(core PRIVATE util pthread)
        add_library(plugin MODULE e.cpp)
        target_link_libraries(plugin PRIVATE core)
        add_executable(tool main.cpp)
        target_link_libraries(tool PRIVATE core)
    """,
    **{f"{stem}.cpp": f"int {stem}_value() {{ return 1; }}\n" for stem in "abcde"},
    "main.cpp": "int main() { return 0; }\n",
}


@needs_toolchain
def test_every_target_kind_of_a_small_project(tmp_path: Path) -> None:
    source = tmp_path / "src"
    for name, text in SMALL_PROJECT.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(textwrap.dedent(text))
    directory = tmp_path / "build"
    configure(source, directory)
    configured_only = read_build_structure(directory)
    assert any("no .ninja_log" in note for note in configured_only.notes)
    assert all(t.compile_seconds is None for t in configured_only.targets.values())

    build(directory)
    targets = read_build_structure(directory).targets
    kinds = {name: t.kind for name, t in targets.items()}
    assert kinds == {
        "core_objs": "object library",
        "util": "static library",
        "core": "shared library",
        "plugin": "module library",
        "tool": "executable",
    }
    assert targets["core_objs"].sources == 2 and targets["core"].sources == 1
    assert set(targets["core"].links) == {"core_objs", "util"}
    assert "pthread" in targets["core"].externals
    assert set(targets["tool"].links) == {"core"}


def test_not_a_build_directory_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    assert main(["graph", str(tmp_path), "--output-dir", str(tmp_path / "out")]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "no CMakeCache.txt" in error
    assert not (tmp_path / "out").exists()
