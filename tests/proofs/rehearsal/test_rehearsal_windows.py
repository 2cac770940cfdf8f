"""A rehearsal of a win-64 CUDA configuration, simulated on linux-64 (proofs/rehearsal/target.py).

Three steps of the CUDA 12.8 configuration run, strict: pass 1 (the oldest Python), libtorch, and pytorch for
the next Python, whose pass retargets the cache from pass 1's through the typed Windows retarget. The whole
configuration (every Python) is the documented command in docs/records/2026-11-28-rehearsals.md.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from rehearsal_outcome import assert_rehearsal_succeeded, concluded

from feedstock_tools.common import user_cache
from feedstock_tools.common.configuration import read_configuration, version_key
from feedstock_tools.proofs.rehearsal import report
from feedstock_tools.proofs.rehearsal import target as targets
from feedstock_tools.proofs.rehearsal.harness import REPO_ROOT, Rehearsal
from feedstock_tools.proofs.rehearsal.plan import TOP_LEVEL_NAME
from feedstock_tools.proofs.wheels import linkage

pytestmark = pytest.mark.rehearsal

CACHE = user_cache.rehearsal_cache()
WIN_64_CUDA = REPO_ROOT / ".ci_support" / "win_64_cuda_compiler_version12.8.yaml"
# the Python after pass 1's (the floor): its pass retargets the cache from pass 1's Python
NEXT_PYTHON = sorted((p.version for p in read_configuration(WIN_64_CUDA).pythons), key=version_key)[1]
PYTORCH_NEXT = f"pytorch-py{NEXT_PYTHON}"


@pytest.fixture(scope="module")
def windows_cuda(tmp_path_factory: pytest.TempPathFactory, host_pythons) -> Rehearsal:
    for tool in ("cmake", "ninja", "g++", "patchelf"):
        if shutil.which(tool) is None:
            pytest.skip(f"the rehearsal needs {tool} on PATH (see .ci/run)")
    root = tmp_path_factory.mktemp("rehearsal-win-64")
    rehearsal = Rehearsal(WIN_64_CUDA, work_root=root, cache_root=CACHE, progress=lambda _line: None)
    assert rehearsal.target.windows and not rehearsal.target.cross
    rehearsal.steps = [s for s in rehearsal.steps if s.label in (TOP_LEVEL_NAME, "libtorch", PYTORCH_NEXT)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(
            "MEGABUILD_STRICT", "1"
        )  # a compile outside a pass's targets, an unknown Python entry fail
        rehearsal.prepare()
        rehearsal.run()
    assert_rehearsal_succeeded(rehearsal)  # builds, import check, linkage checks, ratio: all of it
    return rehearsal


def files_of(rehearsal: Rehearsal, label: str) -> list[str]:
    return next(r for r in rehearsal.results if r.step.label == label).new_files


def test_windows_layout_of_the_packages(windows_cuda: Rehearsal) -> None:
    libtorch = files_of(windows_cuda, "libtorch")
    for stem in ("c10", "c10_cuda", "torch_cpu", "torch_cuda", "torch", "shm"):
        assert f"Library/bin/{stem}.dll" in libtorch and f"Library/lib/{stem}.lib" in libtorch
    assert "Library/share/cmake/Torch/TorchConfig.cmake" in libtorch
    assert "etc/conda/activate.d/libtorch_cuda_arch_list.bat" in libtorch
    assert not [f for f in libtorch if "linalg" in f]  # MAGMA and the linalg code are in torch_cuda.dll
    pytorch = files_of(windows_cuda, PYTORCH_NEXT)
    site = f"lib/python{NEXT_PYTHON}/site-packages"  # the rehearsal's venv; Lib\site-packages on Windows
    assert {"Library/bin/torch_python.dll", f"{site}/torch/lib/torch_python.lib"} <= set(pytorch)
    assert f"{site}/torch/_C.cp311-win_amd64.pyd" in pytorch
    assert not [f for f in pytorch if f.endswith((".so", ".dylib")) or "/lib/lib" in f]


def test_windows_passes_compile_each_object_once(windows_cuda: Rehearsal) -> None:
    assert all(result.ok for result in windows_cuda.results)
    ratio = report.work_ratio(windows_cuda)
    assert ratio.extra_pythons == 1 and ratio.ratio == 1.0, ratio.formula()
    pytorch = next(r for r in windows_cuda.results if r.step.name == "pytorch")
    assert set(report.ninja_log.targets_of(pytorch.objects)) <= {"torch_python", "_C", "nnapi_backend"}


def test_windows_package_imports_and_has_magma(windows_cuda: Rehearsal) -> None:
    (check,) = concluded(windows_cuda).import_checks
    assert check.ok, check.detail
    assert '"cuda": true, "has_magma": true, "_C": "_C.cp311-win_amd64.pyd"' in check.detail


def test_torch_c_finds_torch_python_in_library_bin_as_windows_loader_does(windows_cuda: Rehearsal) -> None:
    """torch._C needs torch_python.dll, which the pytorch package puts in Library/bin: Windows' loader
    finds it there (torch/__init__.py adds that directory to the DLL search), read as the PE file the
    stand-in's binary stands for. Read with the ELF rule (its RUNPATH), it would be found nowhere: the
    rehearsal's verdict before report.stand_in_reader."""
    packages = {r.step.label: r for r in windows_cuda.results if r.package_dir is not None}
    specs = [report.package_spec_of(packages[label], "win-64") for label in ("libtorch", PYTORCH_NEXT)]

    def check(reader: linkage.BinaryReader) -> list[str]:
        found = linkage.LinkageCheck(specs, "linux", reader=reader, machine_runtime=report.MACHINE_RUNTIME)
        return found.run(checked=["pytorch"]).errors

    assert check(report.stand_in_reader(windows_cuda.target)) == []
    site = f"lib/python{NEXT_PYTHON}/site-packages"
    assert check(linkage.read_binary) == [
        f"pytorch:{site}/torch/_C.cp311-win_amd64.pyd need(s) torch_python.dll: no package provides it "
        "(expected from a run requirement of pytorch)"
    ]


def test_a_host_python_without_its_import_library_stops_the_pass(
    windows_cuda: Rehearsal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bad input: the host's python lacks libs/python3XY.lib. One line names it and the fix, the step fails,
    and nothing is staged (runs last: it adds a failed step to the rehearsal's results)."""
    step = next(s for s in windows_cuda.steps if s.label == PYTORCH_NEXT)
    real = targets.make_windows_python_layout

    def without_import_library(prefix: Path, minor: str) -> None:
        real(prefix, minor)
        (prefix / "libs" / f"python{minor.replace('.', '')}.lib").unlink()

    monkeypatch.setattr(targets, "make_windows_python_layout", without_import_library)
    monkeypatch.setenv("MEGABUILD_STRICT", "1")
    result = windows_cuda.run_step(step)
    assert not result.ok and result.new_files == []
    assert re.fullmatch(
        r"megabuild error: \S*/libs/python311\.lib is missing: FindPython needs Python 3\.11's import "
        r"library on Windows; add python 3\.11 .* to the host requirements of this output",
        result.last_line(),
    )
