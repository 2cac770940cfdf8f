"""The staging table and the atomic staging into a prefix, on synthetic trees.

The same staging on the real 2.13.0 wheel, merged and used, is tests/proofs/wheels/test_wheel_layout.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from megabuild import staging
from megabuild.package_files import LIBTORCH, LIBTORCH_CUDA_LINALG, NOT_SHIPPED, PYTORCH, RULES
from megabuild.staging import StagingError, UpstreamTrees, classify, files_by_package, matches, stage_package

SOABI_DIR = "lib.linux-x86_64-cpython-312"


def touch(path: Path, text: str = "x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def trees(tmp_path: Path) -> UpstreamTrees:
    """A small build tree shaped like PyTorch's: install tree, setuptools tree for 3.12, dist-info."""
    install = tmp_path / "src" / "torch"
    for name in (
        "libc10.so",
        "libtorch_cpu.so",
        "libtorch.so",
        "libtorch_python.so",
        "libtorch_cuda_linalg.so",
    ):
        touch(install / "lib" / name, name)
    touch(install / "lib" / "libshm" / "core.cpp")  # libshm's sources live in the install dir upstream
    touch(install / "include" / "ATen" / "ATen.h")
    touch(install / "include" / "fmt" / "core.h")  # bundled third-party header, not shipped
    touch(install / "share" / "cmake" / "Torch" / "TorchConfig.cmake")
    touch(install / "bin" / "torch_shm_manager")
    touch(install / "__init__.py")  # Python sources beside the install dirs are not part of the install tree
    built = tmp_path / "src" / "build" / SOABI_DIR
    touch(built / "torch" / "__init__.py")
    touch(built / "torch" / "_C.cpython-312-x86_64-linux-gnu.so")
    touch(built / "torch" / "lib" / "libc10.so")
    touch(built / "torch" / "include" / "ATen" / "ATen.h")
    touch(built / "torch" / "share" / "cmake" / "Torch" / "TorchConfig.cmake")
    touch(built / "torch" / "bin" / "torch_shm_manager")
    touch(built / "torchgen" / "gen.py")
    meta = tmp_path / "meta"
    touch(meta / "torch-2.13.0.dist-info" / "METADATA")
    return UpstreamTrees(install, built, meta)


def test_patterns() -> None:
    assert matches("lib/*.so", "lib/libc10.so")
    assert not matches("lib/*.so", "lib/sub/libc10.so")
    assert matches("include/ATen/**", "include/ATen/core/Tensor.h")
    assert not matches("include/ATen/**", "include/ATenX/a.h")
    assert matches("bin/protoc-*", "bin/protoc-3.13.0.0")


def test_every_file_has_exactly_one_place(trees: UpstreamTrees) -> None:
    grouped = files_by_package(trees)
    paths = {package: sorted(p.path for p in placements) for package, placements in grouped.items()}
    assert paths[LIBTORCH] == [
        "bin/torch_shm_manager",
        "include/ATen/ATen.h",
        "lib/libc10.so",
        "lib/libtorch.so",
        "lib/libtorch_cpu.so",
        "share/cmake/Torch/TorchConfig.cmake",
    ]
    assert paths[LIBTORCH_CUDA_LINALG] == ["lib/libtorch_cuda_linalg.so"]
    assert "lib/libtorch_python.so" in paths[PYTORCH]
    assert "torch-2.13.0.dist-info/METADATA" in paths[PYTORCH]
    assert paths[NOT_SHIPPED] == ["include/fmt/core.h", "lib/libshm/core.cpp"]


def test_unclaimed_file_stops_with_its_path(trees: UpstreamTrees) -> None:
    assert trees.install is not None
    touch(trees.install / "lib" / "libsurprise.so")
    with pytest.raises(
        StagingError, match=r"no staging rule claims, first .*/lib/libsurprise\.so: add a rule"
    ):
        classify(trees)


def test_file_claimed_twice_stops_with_its_path(trees: UpstreamTrees) -> None:
    overlapping = (*RULES, staging.Rule("install", "lib/*.so", LIBTORCH, "test double: overlaps"))
    with pytest.raises(StagingError, match=r"claimed by two staging rules: .*/lib/libc10\.so \(by "):
        classify(trees, overlapping)


def test_stage_libtorch_and_pytorch_layout(trees: UpstreamTrees, tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    sp_dir = prefix / "lib" / "python3.12" / "site-packages"
    stage_package(LIBTORCH, trees, prefix, sp_dir)
    result = stage_package(PYTORCH, trees, prefix, sp_dir)
    assert (prefix / "lib" / "libtorch_python.so").read_text() == "libtorch_python.so"
    assert (sp_dir / "torch" / "_C.cpython-312-x86_64-linux-gnu.so").is_file()
    assert (sp_dir / "torch-2.13.0.dist-info" / "METADATA").is_file()
    for name in ("lib", "include", "share", "bin"):
        link = sp_dir / "torch" / name
        assert link.is_symlink() and not os.path.isabs(os.readlink(link))
        assert link.resolve() == (prefix / name).resolve()
    assert (sp_dir / "torch" / "share" / "cmake" / "Torch" / "TorchConfig.cmake").is_file()
    assert "lib/python3.12/site-packages/torch/lib" in result.links
    assert not (prefix / "include" / "fmt").exists()
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".megabuild-stage")]
    assert leftovers == []


def test_clash_with_prefix_stages_nothing(trees: UpstreamTrees, tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    touch(prefix / "include" / "ATen" / "ATen.h", "from another package")
    with pytest.raises(StagingError, match=r"include/ATen/ATen\.h already exists in PREFIX"):
        stage_package(LIBTORCH, trees, prefix)
    assert sorted(p.relative_to(prefix).as_posix() for p in prefix.rglob("*")) == [
        "include",
        "include/ATen",
        "include/ATen/ATen.h",
    ]


def test_failure_during_move_takes_everything_back(
    trees: UpstreamTrees, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    real_replace = os.replace
    calls = {"n": 0}

    def replace_failing_on_third(src: str, dst: str) -> None:  # test double of os.replace
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("simulated failure")
        real_replace(src, dst)

    monkeypatch.setattr(staging.os, "replace", replace_failing_on_third)
    with pytest.raises(StagingError, match="staging libtorch failed: simulated failure"):
        stage_package(LIBTORCH, trees, prefix)
    assert list(prefix.iterdir()) == []
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".megabuild")] == []


def test_package_without_files_is_an_error(tmp_path: Path) -> None:
    install = tmp_path / "torch"
    touch(install / "lib" / "libc10.so")
    with pytest.raises(StagingError, match="no files for libtorch-cuda-linalg"):
        stage_package(LIBTORCH_CUDA_LINALG, UpstreamTrees(install=install), tmp_path / "prefix")


# ---- platform library naming -------------------------------------------------------------------------------
# The macOS names are those conda-forge's 2.13.0 recipe tests on osx (pytorch-cpu-feedstock 74dd3d46,
# recipe/meta.yaml: `test -f $PREFIX/lib/lib{c10,shm,torch,torch_cpu,torch_global_deps}.dylib  # [osx]`,
# `test -f $PREFIX/lib/libtorch_python${SHLIB_EXT}`), the extension module name is CPython's darwin
# EXT_SUFFIX (.cpython-312-darwin.so).
MACOS_LIBRARIES = ("c10", "shm", "torch", "torch_cpu", "torch_global_deps", "torch_python")


@pytest.fixture
def macos_trees(tmp_path: Path) -> UpstreamTrees:
    """An install and setuptools tree as a macOS build leaves them: .dylib libraries, a darwin _C."""
    install = tmp_path / "macos" / "torch"
    for stem in MACOS_LIBRARIES:
        touch(install / "lib" / f"lib{stem}.dylib", stem)
    touch(install / "include" / "ATen" / "ATen.h")
    touch(install / "share" / "cmake" / "Torch" / "TorchConfig.cmake")
    touch(install / "bin" / "torch_shm_manager")
    built = tmp_path / "macos" / "build" / "lib.macosx-11.0-arm64-cpython-312"
    touch(built / "torch" / "__init__.py")
    touch(built / "torch" / "_C.cpython-312-darwin.so")
    touch(built / "torch" / "lib" / "libc10.dylib")
    return UpstreamTrees(install, built, shlib_ext=".dylib")


def test_macos_tree_stages_by_dylib_names(macos_trees: UpstreamTrees, tmp_path: Path) -> None:
    grouped = files_by_package(macos_trees)
    libtorch = sorted(p.path for p in grouped[LIBTORCH] if p.path.startswith("lib/"))
    assert libtorch == [f"lib/lib{stem}.dylib" for stem in sorted(MACOS_LIBRARIES) if stem != "torch_python"]
    pytorch = {p.path for p in grouped[PYTORCH]}
    assert {"lib/libtorch_python.dylib", "torch/_C.cpython-312-darwin.so"} <= pytorch
    prefix = tmp_path / "prefix"
    sp_dir = prefix / "lib" / "python3.12" / "site-packages"
    stage_package(LIBTORCH, macos_trees, prefix, sp_dir)
    stage_package(PYTORCH, macos_trees, prefix, sp_dir)
    assert (prefix / "lib" / "libtorch_cpu.dylib").read_text() == "torch_cpu"
    assert (sp_dir / "torch" / "lib" / "libtorch_python.dylib").is_file()  # through the torch/lib link


def test_a_library_of_the_other_platform_is_unclaimed(
    macos_trees: UpstreamTrees, trees: UpstreamTrees
) -> None:
    assert macos_trees.install is not None and trees.install is not None
    touch(macos_trees.install / "lib" / "libtorch_cuda.so")
    with pytest.raises(StagingError, match=r"first .*/lib/libtorch_cuda\.so: add a rule"):
        classify(macos_trees)
    touch(trees.install / "lib" / "libtorch_cuda.dylib")
    with pytest.raises(StagingError, match=r"first .*/lib/libtorch_cuda\.dylib: add a rule"):
        classify(trees)


@pytest.mark.parametrize(
    ("shlib_ext", "names"),
    [
        (".so", ("libc10.so", "libc10.so.2", "libc10.so.2.13.0")),
        (".dylib", ("libc10.dylib", "libc10.2.dylib", "libc10.2.13.0.dylib")),
    ],
)
def test_versioned_libraries_and_their_links_stage_together(
    tmp_path: Path, shlib_ext: str, names: tuple[str, str, str]
) -> None:
    """CMake's VERSION/SOVERSION naming: the real file and its two links, all claimed by the one rule."""
    lib = tmp_path / "torch" / "lib"
    touch(lib / names[2], "library")
    os.symlink(names[2], lib / names[1])
    os.symlink(names[1], lib / names[0])
    trees = UpstreamTrees(install=tmp_path / "torch", shlib_ext=shlib_ext)
    assert sorted(p.path for p in files_by_package(trees)[LIBTORCH]) == sorted(f"lib/{n}" for n in names)
    prefix = tmp_path / "prefix"
    staged = stage_package(LIBTORCH, trees, prefix)
    assert sorted(staged.files) == sorted(f"lib/{n}" for n in names)
    assert os.readlink(prefix / "lib" / names[0]) == names[1]
    assert (prefix / "lib" / names[0]).read_text() == "library"


def test_versioned_name_of_another_library_is_not_claimed(tmp_path: Path) -> None:
    """``{shlib}`` allows a version, not any suffix: libc10.so.bak or libc10_extra.so is nobody's."""
    for name in ("libc10.so.bak", "libc10_extra.so"):
        assert not matches("lib/libc10{shlib}", f"lib/{name}")
    assert not matches("lib/libc10{shlib}", "lib/libc10.so", ".dylib")
    assert matches("lib/libc10{shlib}", "lib/libc10.1.dylib", ".dylib")


def test_unknown_shlib_ext_is_one_clear_error(trees: UpstreamTrees) -> None:
    hp_ux = UpstreamTrees(trees.install, shlib_ext=".sl")
    with pytest.raises(StagingError, match=r"SHLIB_EXT='\.sl' is not a platform the staging table knows"):
        classify(hp_ux)
    # a Linux tree read with the Windows table (.dll): its libraries are unclaimed, not misplaced
    with pytest.raises(StagingError, match=r"no staging rule claims, first .*/lib/libc10\.so"):
        classify(UpstreamTrees(trees.install, shlib_ext=".dll"))


def test_extension_module_for_the_outputs_python(macos_trees: UpstreamTrees) -> None:
    assert macos_trees.setuptools is not None
    found = staging.require_extension_module(macos_trees.setuptools, ".cpython-312-darwin.so", "3.12")
    assert found.name == "_C.cpython-312-darwin.so"
    with pytest.raises(
        StagingError,
        match=r"no torch/_C\.cpython-313-darwin\.so for Python 3\.13 .*found: "
        r"_C\.cpython-312-darwin\.so\)",
    ):
        staging.require_extension_module(macos_trees.setuptools, ".cpython-313-darwin.so", "3.13")


def test_untagged_extension_module_names_the_cross_fix(tmp_path: Path) -> None:
    """What a cross build without the SOABI fix leaves (pytorch-cpu-feedstock 74dd3d46, patch 0022)."""
    tree = tmp_path / "lib.linux-aarch64-cpython-312"
    touch(tree / "torch" / "_C.so")
    with pytest.raises(StagingError, match=r"found: _C\.so\).*Python_SOABI from the target interpreter"):
        staging.require_extension_module(tree, ".cpython-312-aarch64-linux-gnu.so", "3.12")


@pytest.mark.parametrize("listing", ["macos-arm64", "cuda130"])
def test_rules_claiming_answers_as_asking_every_rule(listing: str) -> None:
    """``rules_claiming`` asks a path only of the rules whose literal beginning it can have: for every file
    of a real wheel, in every tree it takes, it names the same rules in the same order as asking each."""
    from feedstock_tools.proofs.wheels.wheel_layout import read_file_list
    from feedstock_tools.release.staging_rows import tree_paths

    data = Path(__file__).resolve().parents[1] / "data"
    files = read_file_list(data / f"torch-2.13.0-{listing}-wheel-files.txt.gz")
    shlib = ".dylib" if listing.startswith("macos") else ".so"
    places = [place for listed in files for place in tree_paths(listed.path)]
    trees = {tree for tree, _path in places}
    claiming = {tree: staging.rules_claiming(RULES, tree, shlib) for tree in trees}
    differing = [
        (tree, path)
        for tree, path in places
        if claiming[tree](path) != [rule for rule in RULES if staging.rule_claims(rule, tree, path, shlib)]
    ]
    assert len(places) > len(files) > 10_000 and trees == {"setuptools", "install", "metadata"}
    assert differing == []
