"""The win-64 staging table against every file of the real torch 2.13.0 win_amd64 wheel.

tests/data/torch-2.13.0-cp312-win_amd64-wheel-files.txt.gz lists the wheel's 12061 files (written by
``python -m feedstock_tools wheel-layout WHEEL --file-list``; its header names the download command and the
wheel's sha256). The trees are laid out from it as a finished ``setup.py build`` of PyTorch on Windows has
them (the setuptools tree holds the wheel; CMake's install tree is its torch/{lib,include,share,bin}),
with empty files: placement depends on paths only. The contents that matter are written where a test
needs them (CRLF text: nearly every text file of the Windows wheel has CRLF line ends).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from feedstock_tools.proofs.wheels.wheel_layout import read_file_list
from megabuild.package_files import LIBRARY, LIBTORCH, NOT_SHIPPED, PYTORCH, WINDOWS_RULES
from megabuild.staging import StagingError, UpstreamTrees, files_by_package, stage_package

FILE_LIST = Path(__file__).parents[1] / "data" / "torch-2.13.0-cp312-win_amd64-wheel-files.txt.gz"
SETUPTOOLS_DIR = "lib.win-amd64-cpython-312"
SP_DIR = "Lib/site-packages"  # conda-build's get_site_packages on win
INSTALL_DIRS = ("lib", "include", "share", "bin")


# PyTorch's own libraries: CMake's install(TARGETS) places them; third-party DLLs (uv, libiomp5md) are
# installed with install(FILES ... DESTINATION lib) and stay in lib/ with patch 0008 too
OWN_DLLS = ("c10", "shm", "torch", "torch_cpu", "torch_global_deps", "torch_python")
# the part of the wheel the smaller tests need: binaries, CMake files, one header, the Python entry points
SMALL = ("torch/lib/", "torch/bin/", "torch/share/", "torch/include/ATen/ATen.h", "torch/__init__.py",
         "torch/_C.cp312-win_amd64.pyd", "torch/version.py", "torch-2.13.0.dist-info/")  # fmt: skip


def lay_out(src: Path, move_dlls_to_bin: bool = False, only: tuple[str, ...] = ()) -> UpstreamTrees:
    """The wheel's files (``only``: those starting so) as the build's trees; ``move_dlls_to_bin``: the
    install tree as CMake writes it with conda-forge's patch 0008 (RUNTIME DESTINATION bin), where 2.13.0
    itself writes lib/."""
    built = src / "build" / SETUPTOOLS_DIR
    metadata = src / "build" / "metadata"
    for listed in read_file_list(FILE_LIST):
        if only and not listed.path.startswith(only):
            continue
        root = metadata if listed.path.startswith("torch-2.13.0.dist-info/") else built
        path = root / listed.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    install = src / "torch"
    for name in INSTALL_DIRS:
        if (built / "torch" / name).is_dir():
            shutil.copytree(built / "torch" / name, install / name)
    if move_dlls_to_bin:
        for stem in OWN_DLLS:
            (install / "lib" / f"{stem}.dll").rename(install / "bin" / f"{stem}.dll")
    return UpstreamTrees(install=install, setuptools=built, metadata=metadata, shlib_ext=".dll")


@pytest.fixture(scope="module")
def wheel_trees(tmp_path_factory: pytest.TempPathFactory) -> UpstreamTrees:
    return lay_out(tmp_path_factory.mktemp("win-wheel") / "src")


def stage_both(trees: UpstreamTrees, root: Path) -> dict[str, set[str]]:
    staged = {}
    for package in (LIBTORCH, PYTORCH):
        prefix = root / package
        result = stage_package(package, trees, prefix, prefix / SP_DIR)
        assert not result.links  # no symlinks on Windows
        staged[package] = set(result.files)
    return staged


def test_the_real_wheel_stages_with_nothing_unclaimed(wheel_trees: UpstreamTrees, tmp_path: Path) -> None:
    grouped = files_by_package(wheel_trees)  # raises on an unclaimed or twice-claimed file
    staged = stage_both(wheel_trees, tmp_path)
    libtorch, pytorch = staged[LIBTORCH], staged[PYTORCH]
    # the C++ libraries: DLLs in Library/bin, import libraries in Library/lib (conda-forge's layout)
    for stem in ("c10", "shm", "torch", "torch_cpu"):
        assert {f"{LIBRARY}/bin/{stem}.dll", f"{LIBRARY}/lib/{stem}.lib"} <= libtorch
    assert f"{LIBRARY}/bin/torch_global_deps.dll" in libtorch  # no import library: nothing links it
    assert f"{LIBRARY}/share/cmake/Torch/TorchConfig.cmake" in libtorch
    assert f"{LIBRARY}/include/ATen/ATen.h" in libtorch and f"{LIBRARY}/include/libshm.h" in libtorch
    # torch_python: the DLL beside the others, the import library where cpp_extension links it
    assert {f"{LIBRARY}/bin/torch_python.dll", f"{SP_DIR}/torch/lib/torch_python.lib"} <= pytorch
    assert f"{SP_DIR}/torch/_C.cp312-win_amd64.pyd" in pytorch
    assert f"{SP_DIR}/torch-2.13.0.dist-info/METADATA" in pytorch
    # site-packages/torch keeps no copy of the install tree: no DLL, header or CMake file twice
    copies = [f for f in pytorch if f.startswith(tuple(f"{SP_DIR}/torch/{d}/" for d in INSTALL_DIRS))]
    assert copies == [f"{SP_DIR}/torch/lib/torch_python.lib"]
    assert not libtorch & pytorch
    # every file of the wheel is staged once or deliberately left out
    dropped = {(p.tree, p.path) for p in grouped[NOT_SHIPPED]}
    wheel = len(read_file_list(FILE_LIST))
    install_files = sum(
        1 for name in INSTALL_DIRS for f in (wheel_trees.install / name).rglob("*") if f.is_file()
    )
    assert len(libtorch) + len(pytorch) + len(dropped) == wheel + install_files
    # third-party binaries of the wheel: conda-forge packages (intel-openmp, libuv, libprotobuf), not ours
    for name in ("lib/libiomp5md.dll", "lib/libiompstubs5md.dll", "lib/uv.dll", "bin/protoc.exe"):
        assert ("install", name) in dropped
    for name in ("cpuinfo", "fmt", "libittnotify", "sleef"):  # static libraries of bundled code
        assert ("install", f"lib/{name}.lib") in dropped


def test_crlf_text_is_staged_byte_for_byte(tmp_path: Path) -> None:
    trees = lay_out(tmp_path / "src", only=SMALL)
    assert trees.install is not None and trees.setuptools is not None
    crlf = b"# TorchConfig.cmake of the Windows wheel\r\nset(TORCH_FOUND TRUE)\r\n"
    (trees.install / "share" / "cmake" / "Torch" / "TorchConfig.cmake").write_bytes(crlf)
    (trees.setuptools / "torch" / "version.py").write_bytes(b"__version__ = '2.13.0'\r\n")
    stage_both(trees, tmp_path / "out")
    assert (
        tmp_path / "out" / LIBTORCH / LIBRARY / "share/cmake/Torch/TorchConfig.cmake"
    ).read_bytes() == crlf
    version = tmp_path / "out" / PYTORCH / SP_DIR / "torch" / "version.py"
    assert version.read_bytes() == b"__version__ = '2.13.0'\r\n"


def test_dlls_in_bin_as_patch_0008_installs_them(tmp_path: Path) -> None:
    trees = lay_out(tmp_path / "src", move_dlls_to_bin=True, only=SMALL)
    assert trees.install is not None and (trees.install / "bin" / "c10.dll").exists()
    staged = stage_both(trees, tmp_path / "out")
    assert {f"{LIBRARY}/bin/c10.dll", f"{LIBRARY}/lib/c10.lib"} <= staged[LIBTORCH]
    assert f"{LIBRARY}/bin/torch_python.dll" in staged[PYTORCH]


def test_a_dll_in_both_places_is_one_error_and_nothing_is_staged(tmp_path: Path) -> None:
    trees = lay_out(tmp_path / "src", only=SMALL)
    assert trees.install is not None
    shutil.copy(trees.install / "lib" / "c10.dll", trees.install / "bin" / "c10.dll")
    prefix = tmp_path / "out" / LIBTORCH
    with pytest.raises(StagingError, match=r"c10\.dll and .*c10\.dll both go to Library/bin/c10\.dll"):
        stage_package(LIBTORCH, trees, prefix, prefix / SP_DIR)
    assert not any(prefix.iterdir())


def test_an_unknown_dll_is_unclaimed_and_nothing_is_staged(tmp_path: Path) -> None:
    trees = lay_out(tmp_path / "src", only=SMALL)
    assert trees.install is not None
    (trees.install / "lib" / "asmjit.dll").touch()
    prefix = tmp_path / "out" / LIBTORCH
    with pytest.raises(
        StagingError, match=r"1 installed file\(s\) no staging rule claims, first .*asmjit\.dll"
    ):
        stage_package(LIBTORCH, trees, prefix, prefix / SP_DIR)
    assert not prefix.exists() or not any(prefix.iterdir())


def test_every_library_of_the_linux_table_has_its_windows_rules() -> None:
    """The Windows table is derived: a library added to the Linux rules is named on Windows too."""
    patterns = {rule.pattern for rule in WINDOWS_RULES}
    for stem in ("c10", "c10_cuda", "torch_cuda", "caffe2_nvrtc", "torch_cuda_linalg", "torch_python"):
        assert {f"lib/{stem}.dll", f"bin/{stem}.dll", f"lib/{stem}.lib"} <= patterns
    assert all(rule.action != "link" for rule in WINDOWS_RULES)
