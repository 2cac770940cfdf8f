"""The staging table on the file list of the real PyTorch 2.13.0 CUDA 13.0 wheel (527 MB, not in CI).

``tests/data/torch-2.13.0-cuda130-wheel-files.txt.gz`` is that wheel's zip directory (mode, size and path of
its 12118 files; provenance and sha256 in its first lines), written by ``wheel-layout --file-list``. A
*skeleton wheel* made from it here (a test double: the real names and modes, empty contents) goes through
the real ``wheel-layout`` run; the real sizes come from the list.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from wheel_fixtures import ci_config, write_skeleton_wheel

from feedstock_tools.common.errors import ToolError
from feedstock_tools.proofs.wheels.wheel_layout import (
    ListedFile,
    read_file_list,
    run,
)
from megabuild.package_files import LIBTORCH, LIBTORCH_CUDA_LINALG, NOT_SHIPPED, PYTORCH, RULES
from megabuild.staging import StagingError, UpstreamTrees, classify, files_by_package

REPO = Path(__file__).resolve().parents[2]
CUDA_WHEEL_FILES = REPO / "tests" / "data" / "torch-2.13.0-cuda130-wheel-files.txt.gz"
CUDA_WHEEL_NAME = "torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl"
WHEEL_VERSION = CUDA_WHEEL_NAME.split("-")[1]  # the release the wheel is, not the recipe's


@pytest.fixture(scope="module")
def listed() -> list[ListedFile]:
    return read_file_list(CUDA_WHEEL_FILES)


@pytest.fixture(scope="module")
def skeleton(listed: list[ListedFile], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_skeleton_wheel(listed, tmp_path_factory.mktemp("skeleton"), CUDA_WHEEL_NAME)


@pytest.fixture(scope="module")
def layout(skeleton: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """The real ``wheel-layout`` run on the skeleton wheel: its table and its work directory."""
    work = tmp_path_factory.mktemp("layout") / "work"
    return run(skeleton, work, ci_config("linux-64", "13.0")), work


@pytest.fixture(scope="module")
def trees(layout: tuple[str, Path]) -> UpstreamTrees:
    """The build tree the run laid out (staging copies from it, so it is still whole)."""
    src = layout[1] / "src"
    (setuptools,) = (src / "build").glob("lib.*")
    return UpstreamTrees(install=src / "torch", setuptools=setuptools, metadata=src / "build" / "metadata")


def test_the_file_list_is_the_cuda_wheel(listed: list[ListedFile]) -> None:
    paths = {f.path for f in listed}
    assert len(listed) == 12118
    assert {"torch/lib/libtorch_cuda.so", "torch/lib/libtorch_cuda_linalg.so"} <= paths
    assert (
        f"torch-{WHEEL_VERSION}.dist-info/METADATA" in paths
    )  # PyPI's CUDA 13.0 build has no +local version


def test_wheel_layout_stages_all_three_packages_of_the_cuda_wheel(layout: tuple[str, Path]) -> None:
    report, work = layout
    table = report.split("\n\n")[0]  # the packages' table; then the bundled libraries and the linkage
    rows = {line.split("|")[1].strip(): line for line in table.splitlines()[2:]}
    assert list(rows) == [LIBTORCH, LIBTORCH_CUDA_LINALG, PYTORCH, NOT_SHIPPED]
    assert rows[LIBTORCH].startswith(f"| {LIBTORCH} | 9207 | 0 |")
    assert rows[LIBTORCH_CUDA_LINALG].startswith(f"| {LIBTORCH_CUDA_LINALG} | 1 | 0 |")
    assert rows[PYTORCH].startswith(f"| {PYTORCH} | 2626 | 4 |")
    assert rows[NOT_SHIPPED].startswith(f"| {NOT_SHIPPED} | 284 | 0 |")
    env = work / "env"
    assert (env / "lib" / "libtorch_cuda_linalg.so").is_file()
    assert (env / "include" / "THC" / "THCAtomics.cuh").is_file()


def test_real_sizes_of_the_packages(trees, listed: list[ListedFile]) -> None:
    """What wheel-layout reported on the real wheel: 947.2 / 43.9 / 86.4 MB
    (docs/reference/package-contents.md)."""
    size = {f.path: f.size for f in listed}
    # install-tree paths are the wheel's torch/<path>; setuptools-tree paths are the wheel's own
    wheel_path = {"install": "torch/{}", "setuptools": "{}", "metadata": "{}"}
    megabytes = {
        # a "link" placement becomes one symlink ($SP_DIR/torch/lib -> $PREFIX/lib), not a file
        package: round(
            sum(size[wheel_path[p.tree].format(p.path)] for p in placements if p.rule.action != "link") / 1e6,
            1,
        )
        for package, placements in files_by_package(trees).items()
    }
    assert megabytes == {LIBTORCH: 947.2, LIBTORCH_CUDA_LINALG: 43.9, PYTORCH: 86.4, NOT_SHIPPED: 17.4}


def test_cuda_only_files_have_their_own_rules(trees) -> None:
    by_path = {(p.tree, p.path): p.rule for p in classify(trees)}
    thc = by_path[("install", "include/THC/THCAtomics.cuh")]
    assert thc.package == LIBTORCH and "CUDA builds" in thc.why
    assert by_path[("install", "include/THC/THCDeviceUtils.cuh")] is thc
    for library in ("libc10_cuda.so", "libtorch_cuda.so", "libcaffe2_nvrtc.so", "libtorch_nvshmem.so"):
        assert by_path[("install", f"lib/{library}")].package == LIBTORCH
    assert by_path[("install", "lib/libtorch_cuda_linalg.so")].package == LIBTORCH_CUDA_LINALG
    # without the CUDA-only rule the table stops at these very files (what a CUDA pass 1 hit)
    without_thc = [rule for rule in RULES if rule is not thc]
    with pytest.raises(
        StagingError, match=r"2 installed file\(s\) no staging rule claims, first .*THCAtomics"
    ):
        classify(trees, without_thc)


def test_an_unplaced_file_is_one_line_and_leaves_nothing(listed: list[ListedFile], tmp_path: Path) -> None:
    unknown = ListedFile(0o755, 0, "torch/lib/libtorch_cuda_future.so")
    # the libraries, and what makes a zip a torch wheel for wheel-layout: the error needs no more
    libraries = [
        f
        for f in listed
        if f.path.startswith("torch/lib/") or f.path == "torch/__init__.py" or f.path.endswith("/METADATA")
    ]
    wheel = write_skeleton_wheel([*libraries, unknown], tmp_path, CUDA_WHEEL_NAME)
    work = tmp_path / "work"
    with pytest.raises(ToolError, match=r"libtorch_cuda_future\.so: add a rule for it to recipe/megabuild"):
        run(wheel, work)
    assert not work.exists()  # nothing staged, nothing half-written
    cli = subprocess.run(
        [sys.executable, "-m", "feedstock_tools", "wheel-layout", str(wheel), "--work", str(work)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert cli.returncode == 1
    assert cli.stderr.startswith("error: 1 installed file(s) no staging rule claims")
    assert len(cli.stderr.strip().splitlines()) == 1, cli.stderr  # no traceback
    assert not work.exists()
