"""The megabuild against the 2.15-shaped stand-in (tests/upstream_standin_skbuild): scikit-build-core builds.

One configuration, the linux-64 CUDA 12.9 one (it has the MAGMA pass), rehearsed once per session with
MEGABUILD_STRICT=1 through the real scikit-build-core the stand-in pins: every pass compiles only its own
targets (ratio 1.00), scikit-build-core keeps the build directory in every pass, the wheels it writes are laid
out as the real 2.15.0 wheel is, and the packages import. The other platforms are one command each
(docs/reference/megabuild-skbuild.md).
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest
from recipe_matrix import ci_config

from feedstock_tools.common import user_cache
from feedstock_tools.maintainer.version_compare import satisfies
from feedstock_tools.proofs.rehearsal import report, standins
from feedstock_tools.proofs.rehearsal.harness import REPO_ROOT, Rehearsal
from feedstock_tools.proofs.rehearsal.ninja_log import target_of
from feedstock_tools.proofs.rehearsal.plan import TOP_LEVEL_NAME

pytestmark = pytest.mark.rehearsal

# one BLAS of linux-64's CUDA 12.9 job: the scikit-build-core passes are the point here (both BLAS of a job:
# test_rehearsal.py)
CUDA_CONFIG = ci_config("linux-64", "12.9").for_blas("generic")
CACHE = user_cache.rehearsal_cache()
LAYOUT = REPO_ROOT / "tests" / "data" / "torch-2.15.0-cp312-manylinux_2_28_x86_64-wheel-layout.txt.gz"
WHEELS = Path("build") / "megabuild-wheels"


@pytest.fixture(scope="session")
def skbuild_rehearsal(tmp_path_factory: pytest.TempPathFactory, host_pythons) -> Rehearsal:
    for tool in ("cmake", "ninja", "ccache", "g++", "readelf", "patchelf"):
        if shutil.which(tool) is None:
            pytest.skip(f"the rehearsal needs {tool} on PATH (see .ci/run)")
    rehearsal = Rehearsal(
        CUDA_CONFIG.path,
        configuration=CUDA_CONFIG,
        work_root=tmp_path_factory.mktemp("rehearsal-skbuild"),
        cache_root=CACHE,
        standin=standins.SKBUILD,
        progress=lambda _line: None,
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEGABUILD_STRICT", "1")  # a compile outside a pass's targets, or a cache entry
        rehearsal.prepare()  # scikit-build-core changed beyond its own, fails the step
        rehearsal.run()
    return rehearsal


def _pass1_targets(rehearsal: Rehearsal) -> list[str]:
    (pass1,) = [r for r in rehearsal.results if r.step.name == TOP_LEVEL_NAME]
    return [target_of(o) for o in pass1.objects]


def test_every_pass_compiles_only_its_own_targets(skbuild_rehearsal: Rehearsal):
    rehearsal = skbuild_rehearsal
    assert all(r.ok for r in rehearsal.results), [r.last_line() for r in rehearsal.results if not r.ok]
    platform = rehearsal.steps[0].variant["target_platform"]
    python_linked = report.python_targets(platform)
    pass1_targets = _pass1_targets(rehearsal)
    # conda-build's order (the rehearsal's default seed): pass 1's Python comes after the others, and finds
    # its Python-linked products kept (megabuild/python_products.py): every other Python compiles its own once
    pytorch = [r.step.python for r in rehearsal.results if r.step.name == "pytorch"]
    assert pytorch.index(rehearsal.pass1_python) > 0
    for result in rehearsal.results:
        compiled = sorted(target_of(o) for o in result.objects)
        magma = result.step.variant.get("magma_variant") == "magma"
        if result.step.name == TOP_LEVEL_NAME:
            assert compiled == sorted(pass1_targets)
        elif result.step.name == "libtorch-cuda-linalg" and magma:
            assert compiled == sorted(t for t in pass1_targets if t == "torch_cuda_linalg"), result.step.label
        elif result.step.name == "pytorch" and result.step.python != rehearsal.pass1_python:
            assert compiled == sorted(t for t in pass1_targets if t in python_linked), result.step.label
        else:
            assert compiled == [], result.step.label
    ratio = report.work_ratio(rehearsal)
    assert ratio.ratio == 1.0, ratio.formula()
    assert ratio.extra_pythons >= 2 and ratio.linalg > 0


def test_scikit_build_core_kept_the_build_directory_in_every_pass(skbuild_rehearsal: Rehearsal):
    """One scikit-build-core location for every pass: never "clearing cache"
    (docs/reference/megabuild-skbuild.md)."""
    src = skbuild_rehearsal.src_dir
    info = json.loads((src / "build" / ".skbuild-info.json").read_text())
    assert Path(info["skbuild_path"]) == src / "build" / "megabuild-backend" / "scikit_build_core"
    # the stand-in's pin, or the recipe's own spec where its host names scikit-build-core (a bumped recipe)
    top = next(r.step for r in skbuild_rehearsal.results if r.step.name == TOP_LEVEL_NAME)
    (wanted,) = [
        re.sub(r"^scikit[-_]build[-_]core\s*", "", s)
        for s in skbuild_rehearsal.host_pip_requirements(top)
        if re.match(r"scikit[-_]build[-_]core\b", s)
    ]
    assert satisfies(info["skbuild_version"], wanted), (info["skbuild_version"], wanted)
    building = [r for r in skbuild_rehearsal.results if r.step.name in (TOP_LEVEL_NAME, "pytorch")]
    assert len(building) >= 5
    for result in building:
        log = result.log.read_text()
        assert "megabuild-wheel:" in log, result.step.label  # scikit-build-core built this pass's wheel
        assert "clearing cache" not in log, result.step.label


def _layout() -> tuple[set[str], set[str]]:
    with gzip.open(LAYOUT, "rt") as handle:
        lines = [line for line in handle.read().splitlines() if not line.startswith("#")]
    return {line for line in lines if not line.endswith("/")}, {line for line in lines if line.endswith("/")}


def _wheel_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return [name for name in archive.namelist() if not name.endswith("/")]


def test_the_wheels_are_laid_out_as_the_real_2_15_0_wheel(skbuild_rehearsal: Rehearsal):
    """Every file of the stand-in's wheels is where the real 2.15.0 x86_64 wheel has it (its _C tag and
    version mapped to the fixture's); headers only by directory (the stand-in installs a handful)."""
    files, dirs = _layout()
    (real_dist_info,) = {f.split("/")[0] for f in files if ".dist-info/" in f}
    real_c = next(f for f in files if re.fullmatch(r"torch/_C\.[^/]+\.so", f))
    wheels = sorted((skbuild_rehearsal.src_dir / WHEELS).glob("*/dist/*.whl"))
    assert len(wheels) == 1 + len([r for r in skbuild_rehearsal.results if r.step.name == "pytorch"])
    for wheel in wheels:
        names = _wheel_names(wheel)
        (dist_info,) = {n.split("/")[0] for n in names if ".dist-info/" in n}
        mapped = {
            real_c if re.fullmatch(r"torch/_C\.[^/]+\.so", n) else n.replace(dist_info, real_dist_info, 1)
            for n in names
        }
        headers = {n for n in mapped if n.startswith("torch/include/")}
        assert mapped - headers <= files, (wheel.name, sorted(mapped - headers - files))
        # the cut keeps torch/include's directories down to five path components (cut_wheel_layout.py)
        header_dirs = {"/".join(h.split("/")[:-1][:5]) + "/" for h in headers}
        assert header_dirs <= dirs, (wheel.name, sorted(header_dirs - dirs))
        assert {"torch/lib/libtorch_cpu.so", "torch/lib/libtorch_python.so", real_c} <= mapped


def test_version_metadata_is_the_recipes_version(skbuild_rehearsal: Rehearsal):
    """METADATA (scikit-build-core's dynamic version hook) and torch/version.py (CMake's gen_torch_version)
    say the version the recipe builds (PYTORCH_BUILD_VERSION = PKG_VERSION)."""
    version = skbuild_rehearsal.steps[0].version
    for wheel in sorted((skbuild_rehearsal.src_dir / WHEELS).glob("*/dist/*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            metadata = archive.read(f"torch-{version}.dist-info/METADATA").decode()
            version_py = archive.read("torch/version.py").decode()
        assert f"\nVersion: {version}\n" in metadata
        assert "Requires-Python: >=3.11" in metadata  # the 2.15.0 wheels' floor, not enforced by the build
        assert f'__version__ = "{version}"' in version_py


def test_the_packages_import_with_the_right_linalg(skbuild_rehearsal: Rehearsal):
    checks = report.import_checks(skbuild_rehearsal)
    assert checks and all(check.ok for check in checks), [c.detail for c in checks if not c.ok]
    assert {json.loads(c.detail)["has_magma"] for c in checks} == {True, False}
