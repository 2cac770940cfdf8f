"""The driver end to end: recipe/build.sh run per output against the upstream stand-in (a test double of
PyTorch's build interface), with conda-build's environment played by ``CondaBuildDouble`` below.

Asserted from .ninja_log through the driver's report: pass 1 compiles everything, the MAGMA pass only
torch_cuda_linalg, every pytorch pass only torch_python; plus the package contents, and that every error
gives its one-line message, a non-zero exit and stages nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from recipe_matrix import RECIPE_VERSION

from megabuild.ninja_log import target_of_object
from megabuild.staging import tree_files

if TYPE_CHECKING:
    from conftest import HostPython

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipe"
STANDIN = REPO / "tests" / "upstream_standin"

pytestmark = [
    pytest.mark.rehearsal,
    pytest.mark.skipif(
        not all(shutil.which(tool) for tool in ("cmake", "ninja", "c++", "bash")) or not STANDIN.is_dir(),
        reason="needs cmake, ninja, a C++ compiler and tests/upstream_standin",
    ),
]


@dataclass
class CondaBuildDouble:
    """Test double of conda-build for one recipe build: one work dir, one PREFIX path that every output gets
    afresh (a venv of the output's Python, numpy reached through a .pth file, plus its host packages)."""

    root: Path
    pythons: dict[str, HostPython]  # the host_pythons fixture (tests/conftest.py)
    variant: dict[str, str] = field(default_factory=dict)
    packages: dict[str, list[str]] = field(default_factory=dict)  # package label -> files added to PREFIX

    def __post_init__(self) -> None:
        shutil.copytree(STANDIN, self.src_dir, ignore=shutil.ignore_patterns("build", "__pycache__"))
        (self.root / "build_env" / "bin").mkdir(parents=True)
        # the driver runs under the build environment's python: standard library only
        (self.root / "build_env" / "bin" / "python").symlink_to(sys.executable)
        self.magma = self.install_library("magma")
        # the host of a BLAS=MKL build holds mkl-devel: the stand-in's tiny MKL
        self.mkl = self.install_library("mkl") if self.variant.get("blas_impl") == "mkl" else None

    def install_library(self, name: str) -> Path:
        """The stand-in's tiny third_party library ``name`` built and installed once for this build."""
        install = self.root / f"{name}-install"
        subprocess.run(
            ["cmake", "-S", str(STANDIN / "third_party" / name), "-B", str(self.root / f"{name}-build"),
             "-G", "Ninja", f"-DCMAKE_INSTALL_PREFIX={install}"],
            check=True, capture_output=True,
        )  # fmt: skip
        subprocess.run(
            ["cmake", "--build", str(self.root / f"{name}-build"), "--target", "install"],
            check=True,
            capture_output=True,
        )
        return install

    @property
    def src_dir(self) -> Path:
        return self.root / "work"

    @property
    def prefix(self) -> Path:
        return self.root / "host_env_placehold"

    def provision(self, python: str | None, packages: list[str] = (), magma: bool = False) -> None:
        shutil.rmtree(self.prefix, ignore_errors=True)
        if python is None:
            self.prefix.mkdir()
        else:
            host = self.pythons[python]
            subprocess.run([str(host.base), "-m", "venv", "--without-pip", str(self.prefix)], check=True)
            sp = next((self.prefix / "lib").glob("python3.*/site-packages"))
            (sp / "numpy-and-setuptools.pth").write_text(f"{host.site_packages}\n")
        for label in packages:
            for rel in self.packages[label]:
                source = self.root / "packages" / label / rel
                target = self.prefix / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                if source.is_symlink():
                    target.symlink_to(os.readlink(source))
                else:
                    shutil.copy2(source, target)
        if magma:
            shutil.copytree(self.magma, self.prefix, dirs_exist_ok=True)
        if self.mkl is not None:
            shutil.copytree(self.mkl, self.prefix, dirs_exist_ok=True, symlinks=True)

    def env(self, pkg_name: str, python: str | None, **extra: str) -> dict[str, str]:
        py = python or "3.10"
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("USE_", "BUILD_", "CMAKE_", "TORCH_"))
        }
        env.update(
            PKG_NAME=pkg_name, PKG_VERSION=RECIPE_VERSION, PKG_BUILDNUM="0", PREFIX=str(self.prefix),
            BUILD_PREFIX=str(self.root / "build_env"), SRC_DIR=str(self.src_dir), RECIPE_DIR=str(RECIPE),
            PYTHON=str(self.prefix / "bin" / "python"), PY_VER=py,
            SP_DIR=str(self.prefix / "lib" / f"python{py}" / "site-packages"), CPU_COUNT="2", SHLIB_EXT=".so",
            target_platform="linux-64", build_platform="linux-64", CMAKE_GENERATOR="Unix Makefiles",
            LDFLAGS="-Wl,-O2 -Wl,--as-needed -Wl,-z,relro -Wl,-z,now", MEGABUILD_STRICT="1",
        )  # fmt: skip
        env.update(self.variant)
        env.update(extra)
        return env

    def run(
        self, pkg_name: str, python: str | None, host: list[str] = (), magma: bool = False, **extra: str
    ) -> subprocess.CompletedProcess[str]:
        """Provision PREFIX, run build.sh like conda-build, and keep what the script added as the package."""
        self.provision(python, list(host), magma)
        before = set(tree_files("metadata", self.prefix))
        result = subprocess.run(
            ["bash", str(RECIPE / "build.sh")],
            cwd=self.src_dir,
            env=self.env(pkg_name, python, **extra),
            capture_output=True,
            text=True,
            check=False,
        )
        added = sorted(set(tree_files("metadata", self.prefix)) - before)
        magma_variant = [extra["magma_variant"]] if "magma_variant" in extra else []
        label = "-".join([pkg_name, *magma_variant, *([python] if pkg_name == "pytorch" else [])])
        if result.returncode == 0 and pkg_name != "libtorch-split":
            self.packages[label] = added
            for rel in added:
                target = self.root / "packages" / label / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(self.prefix / rel, target)
        else:
            result.added = added  # type: ignore[attr-defined]
        return result

    def report(self) -> list[dict]:
        return json.loads((self.src_dir / "build" / "megabuild-report.json").read_text())["passes"]


def check(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


@pytest.fixture(scope="module")
def cuda_megabuild(
    tmp_path_factory: pytest.TempPathFactory, host_pythons: dict[str, HostPython]
) -> CondaBuildDouble:
    """A whole CUDA configuration, outputs in an order conda-build could choose."""
    build = CondaBuildDouble(
        tmp_path_factory.mktemp("megabuild"),
        host_pythons,
        # and recipe/meta.yaml's script_env: the configuration's GPU architectures (test input)
        {"cuda_compiler_version": "12.9", "blas_impl": "mkl", "MEGABUILD_CUDA_ARCH_LIST": "5.0;8.6;12.0+PTX"},
    )
    first, *others = sorted(host_pythons)
    check(build.run("libtorch-split", first))
    # pytorch for one Python before the MAGMA pass, another after it: order must not matter
    check(build.run("pytorch", others[0], host=[]))
    check(build.run("libtorch-cuda-linalg", first, magma=True, magma_variant="magma"))
    check(build.run("libtorch-cuda-linalg", first, magma_variant="nomagma"))
    check(build.run("libtorch", None))
    # after the MAGMA pass the shared cache links libmagma: the pytorch host needs libmagma-devel (build only)
    result = build.run("pytorch", first, host=["libtorch"])
    assert_error(result, "the build cache uses MAGMA", "add libmagma-devel to this output's host")
    check(build.run("pytorch", first, host=["libtorch"], magma=True))
    return build


def ran(record: dict, target: str) -> int:
    """The objects of ``target`` ninja ran in a pass: those compiled and those the compiler cache served."""
    return sum(
        target_of_object(o) == target for o in [*record["objects_compiled"], *record["objects_from_cache"]]
    )


def test_each_pass_compiles_only_its_targets(cuda_megabuild: CondaBuildDouble) -> None:
    passes = {record["pass_name"]: record for record in cuda_megabuild.report()}
    first, *others = sorted(cuda_megabuild.pythons)
    pass1 = passes["1 libtorch-split"]
    assert {"c10", "torch_cpu", "torch_cuda", "torch_cuda_linalg", "torch_python"} <= set(
        pass1["objects_by_target"]
    )
    magma = passes["3 libtorch-cuda-linalg (magma)"]
    assert set(magma["objects_by_target"]) == {"torch_cuda_linalg"}
    # every linalg object again; the compiler compiles those whose preprocessed input USE_MAGMA changes
    # (the stand-in's MAGMA code), the cache serves the rest (megabuild/compiler_cache.py)
    assert ran(magma, "torch_cuda_linalg") == pass1["objects_by_target"]["torch_cuda_linalg"]
    assert 0 < magma["objects_by_target"]["torch_cuda_linalg"] < ran(magma, "torch_cuda_linalg")
    assert magma["targets_rebuilt"] == ["lib/libtorch_cuda_linalg.so"]
    assert "USE_MAGMA: BOOL='OFF' -> BOOL='ON'" in magma["cache_changes"]
    record = passes[f"4 pytorch (py{others[0]})"]
    # 2.13.0's Python-linked targets: torch_python, the CMake-built _C, nnapi_backend (not on Darwin)
    assert set(record["objects_by_target"]) == {"torch_python", "_C", "nnapi_backend"}
    for target in ("torch_python", "_C", "nnapi_backend"):
        assert ran(record, target) == pass1["objects_by_target"][target]
    assert record["unexpected_objects"] == []
    # back to pass 1's Python after another one's: its Python-linked products were kept, nothing compiles
    # (megabuild/python_products.py; expected targets none, so MEGABUILD_STRICT would stop a compile)
    back = passes[f"4 pytorch (py{first})"]
    assert (back["objects_compiled"], back["targets_rebuilt"], back["expected_targets"]) == ([], [], [])
    total = sum(len(r["objects_compiled"]) for r in passes.values())
    assert total == sum(pass1["objects_by_target"].values()) + sum(magma["objects_by_target"].values()) + sum(
        record["objects_by_target"].values()
    )
    assert passes["2 libtorch"]["objects_compiled"] == []
    assert passes["3 libtorch-cuda-linalg (nomagma)"]["objects_compiled"] == []


def test_packages_are_disjoint_and_laid_out(cuda_megabuild: CondaBuildDouble) -> None:
    packages = cuda_megabuild.packages
    libtorch = set(packages["libtorch"])
    assert {
        "lib/libc10.so",
        "lib/libtorch_cpu.so",
        "lib/libtorch_cuda.so",
        "share/cmake/Torch/TorchConfig.cmake",
    } <= libtorch
    assert packages["libtorch-cuda-linalg-magma"] == ["lib/libtorch_cuda_linalg.so"]
    assert packages["libtorch-cuda-linalg-nomagma"] == ["lib/libtorch_cuda_linalg.so"]
    # the MKL build's libtorch_cpu calls into MKL, and its headers say so (the stand-in's BLAS, README.md)
    packaged = cuda_megabuild.root / "packages" / "libtorch"
    dynamic = subprocess.run(
        ["readelf", "--dyn-syms", "-d", str(packaged / "lib" / "libtorch_cpu.so")],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    assert "(NEEDED)             Shared library: [libmkl_rt.so.2]" in dynamic
    assert " UND mkl_get_max_threads" in dynamic
    assert "#define AT_MKL_ENABLED() 1" in (packaged / "include" / "ATen" / "Config.h").read_text()
    first = sorted(cuda_megabuild.pythons)[0]
    pytorch = set(packages[f"pytorch-{first}"])
    assert "lib/libtorch_python.so" in pytorch
    sp = f"lib/python{first}/site-packages"
    assert {f"{sp}/torch/lib", f"{sp}/torch/include", f"{sp}/torch/share"} <= pytorch
    assert any(path.startswith(f"{sp}/torch-{RECIPE_VERSION}.dist-info/") for path in pytorch)
    # different packages never share a file (variants of one package do: they never share an environment)
    by_package: dict[str, set[str]] = {}
    for label, files in packages.items():
        name = (
            "pytorch"
            if label.startswith("pytorch")
            else label.removesuffix("-magma").removesuffix("-nomagma")
        )
        by_package.setdefault(name, set()).update(files)
    names = sorted(by_package)
    assert names == ["libtorch", "libtorch-cuda-linalg", "pytorch"]
    for i, one in enumerate(names):
        for other in names[i + 1 :]:
            assert not by_package[one] & by_package[other], (one, other)


def test_magma_and_nomagma_linalg_differ_by_their_magma_link(cuda_megabuild: CondaBuildDouble) -> None:
    def needed(label: str) -> set[str]:
        library = cuda_megabuild.root / "packages" / label / "lib" / "libtorch_cuda_linalg.so"
        out = subprocess.run(
            ["readelf", "-d", str(library)], check=True, capture_output=True, text=True
        ).stdout
        return {line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line}

    if shutil.which("readelf") is None:
        pytest.skip("needs readelf")
    assert needed("libtorch-cuda-linalg-magma") - needed("libtorch-cuda-linalg-nomagma") == {"libmagma.so"}
    assert needed("libtorch-cuda-linalg-nomagma") - needed("libtorch-cuda-linalg-magma") == set()


def test_import_torch_from_the_staged_packages(cuda_megabuild: CondaBuildDouble) -> None:
    first = sorted(cuda_megabuild.pythons)[0]
    cuda_megabuild.provision(
        first, [f"pytorch-{first}", "libtorch", "libtorch-cuda-linalg-magma"], magma=True
    )
    result = subprocess.run(
        [str(cuda_megabuild.prefix / "bin" / "python"), "-c", "import torch; print(torch.__version__)"],
        capture_output=True,
        text=True,
        check=False,
        cwd=cuda_megabuild.root,
    )
    assert result.returncode == 0, result.stderr
    assert RECIPE_VERSION in result.stdout


# ---- errors: one line, non-zero exit, nothing staged ------------------------------------------------------


@pytest.fixture
def fresh(tmp_path: Path, host_pythons: dict[str, HostPython]) -> CondaBuildDouble:
    return CondaBuildDouble(tmp_path, host_pythons, {"cuda_compiler_version": "None", "blas_impl": "generic"})


def assert_error(result: subprocess.CompletedProcess[str], *parts: str) -> None:
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("megabuild error: ")
    for part in parts:
        assert part in last, last
    assert result.added == []  # type: ignore[attr-defined]


def test_pytorch_without_pass_1(fresh: CondaBuildDouble) -> None:
    first = sorted(fresh.pythons)[0]
    result = fresh.run("pytorch", first)
    assert_error(result, "no saved state of pass 1", "build the whole recipe")


def test_unknown_pkg_name(fresh: CondaBuildDouble) -> None:
    result = fresh.run("pytorch-cpu", None)
    assert_error(result, "unknown PKG_NAME 'pytorch-cpu'")


def test_failing_pass_stages_nothing_and_a_cache_without_python_entries(fresh: CondaBuildDouble) -> None:
    first, second = sorted(fresh.pythons)[:2]
    check(fresh.run("libtorch-split", first))
    # an output of the other BLAS would stage this pass 1's libraries: refused before anything is staged
    result = fresh.run("libtorch", None, blas_impl="mkl")
    assert_error(result, "pass 1 of this work directory built BLAS=Generic, this output's is BLAS=MKL")
    # break a Python-binding source: the pytorch pass's build fails, nothing may be staged
    source = next((fresh.src_dir / "torch" / "csrc").rglob("*.cpp"))
    original = source.read_text()
    source.write_text(original + "\n#error deliberately broken\n")
    result = fresh.run("pytorch", second)
    assert_error(result, "failed", "exited with status", "nothing of this pass was staged")
    source.write_text(original)
    # an environment unlike pass 1's would drift the reconfigure: refused before the cache is edited
    cache_before = (fresh.src_dir / "build" / "CMakeCache.txt").read_text()
    result = fresh.run("pytorch", second, LDFLAGS="-Wl,-O1")
    assert_error(result, "environment variable LDFLAGS differs from pass 1", "give every output")
    assert "-Wl,-O1" not in result.stderr  # values may be secrets: named, never echoed
    assert (fresh.src_dir / "build" / "CMakeCache.txt").read_text() == cache_before
    # a cache that lost FindPython's entries cannot be retargeted
    cache = fresh.src_dir / "build" / "CMakeCache.txt"
    cache.write_text(
        "".join(
            line
            for line in cache.read_text().splitlines(keepends=True)
            if "_Python_INTERPRETER_PROPERTIES" not in line
        )
    )
    result = fresh.run("pytorch", second)
    assert_error(result, "lacks the Python entries _Python_INTERPRETER_PROPERTIES")


def test_bad_python_and_build_number_are_one_line_errors(fresh: CondaBuildDouble, tmp_path: Path) -> None:
    not_executable = tmp_path / "python-without-x"
    not_executable.write_text("")
    result = fresh.run("libtorch-split", None, PYTHON=str(not_executable))
    assert_error(result, f"PYTHON={not_executable} is not an executable file", "host requirements")
    missing = tmp_path / "no-such-python"
    result = fresh.run("libtorch-split", None, PYTHON=str(missing))
    assert_error(result, f"no Python at PYTHON={missing}", "host requirements")
    unrunnable = tmp_path / "python-not-a-program"
    unrunnable.write_bytes(b"\x7fELF not really")
    unrunnable.chmod(0o755)
    result = fresh.run("libtorch-split", None, PYTHON=str(unrunnable))
    assert_error(result, f"cannot run {unrunnable}", "add it to the build requirements")
    result = fresh.run("libtorch-split", sorted(fresh.pythons)[0], PYTORCH_BUILD_NUMBER="zero")
    assert_error(result, "PYTORCH_BUILD_NUMBER='zero' is not a number")


def run_as_provisioned(build: CondaBuildDouble, pkg_name: str, python: str | None, **extra: str):
    """build.sh on the host prefix as it is now (the test changed it after provisioning)."""
    return subprocess.run(
        ["bash", str(RECIPE / "build.sh")],
        cwd=build.src_dir,
        env=build.env(pkg_name, python, **extra),
        capture_output=True,
        text=True,
        check=False,
    )


def last_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("megabuild error: ")
    return last


def test_what_conda_build_puts_into_a_host_prefix_is_checked(fresh: CondaBuildDouble) -> None:
    """The host prefix and per-output values conda-build 26.7.1 hands a pass (megabuild/host_prefix.py):
    pass 1 must add nothing under its Python directories (conda-build copies what it added into every
    output's host prefix); an output's host prefix must hold nothing there its packages did not install;
    SP_DIR and PY_VER must be those of the output's Python."""
    first, second = sorted(fresh.pythons)[:2]
    # a Python that writes into its prefix whenever it starts (what a run without .pyc files does)
    fresh.provision(first)
    site = next((fresh.prefix / "lib").glob("python3.*/site-packages"))
    (site / "writes.pth").write_text(f"import pathlib; pathlib.Path({str(site / 'stray.txt')!r}).touch()\n")
    error = last_error(run_as_provisioned(fresh, "libtorch-split", first))
    assert (
        f"pass 1 added 1 file(s) to the host prefix's Python directories, first {site / 'stray.txt'}" in error
    )
    check(fresh.run("libtorch-split", first))
    # libtorch's host prefix with a package record and a file no package installed (a copy of pass 1's)
    fresh.provision(None)
    (fresh.prefix / "conda-meta").mkdir()
    (fresh.prefix / "conda-meta" / "fmt-12.1.0-h0.json").write_text(
        '{"name": "fmt", "files": ["include/x.h"]}'
    )
    stray = fresh.prefix / "lib" / f"python{first}" / "site-packages" / "__pycache__" / "numpy.cpython.pyc"
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"")
    error = last_error(run_as_provisioned(fresh, "libtorch", None))
    assert (
        f"libtorch: the host prefix holds 1 file(s) under its Python directories that no package of it "
        f"installed, first {stray}" in error
    )
    # pytorch: SP_DIR taken from another Python's directory, PY_VER of another Python
    fresh.provision(second)
    wrong = str(fresh.prefix / "lib" / f"python{first}" / "site-packages")
    error = last_error(run_as_provisioned(fresh, "pytorch", second, SP_DIR=wrong))
    assert error.startswith(
        f"megabuild error: SP_DIR={wrong} is not the site-packages of this output's Python {second}"
    )
    error = last_error(run_as_provisioned(fresh, "pytorch", second, PY_VER=first))
    assert f"PY_VER={first} but PYTHON={fresh.prefix / 'bin' / 'python'} is Python {second}" in error
