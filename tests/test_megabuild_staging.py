"""The staging table and the atomic staging into a prefix, on synthetic trees.

The same staging on the real 2.13.0 wheel, merged and used, is tests/test_wheel_layout.py.
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
