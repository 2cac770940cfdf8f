"""The megabuild rehearsal: the recipe's real build.sh and driver against the upstream stand-in.

One CUDA and one CPU configuration are rehearsed once per session, each a job of both BLAS (one group of
top-level build and outputs per BLAS, the second compiled through the first's compiler cache); the tests read
what happened from the build directory (``.ninja_log``, ``build.ninja``, ``install_manifest.txt``), the
packages the harness collected and prefixes assembled from them. Expected object sets come from the build's
own target membership, never from a list written here.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from recipe_matrix import RECIPE_VERSION, ci_config
from rehearsal_outcome import assert_rehearsal_succeeded, concluded, two_pythons

from feedstock_tools.common import user_cache
from feedstock_tools.proofs.rehearsal import ninja_log, report
from feedstock_tools.proofs.rehearsal.harness import Rehearsal, StepResult
from feedstock_tools.proofs.rehearsal.plan import TOP_LEVEL_NAME
from feedstock_tools.proofs.wheels import linkage
from megabuild import activation
from megabuild.cmake_cache import CMakeCache

pytestmark = pytest.mark.rehearsal

# Venv templates (numpy from PyPI) and the stand-in's libmagma survive between sessions here.
CACHE = user_cache.rehearsal_cache()
LINALG = "libtorch-cuda-linalg"


def _config(*, cuda: bool) -> Path:
    """linux-64's CUDA 12.9 or CPU job: both BLAS, by its fields."""
    config = ci_config("linux-64", "12.9" if cuda else "cpu")
    assert config.blases == ("generic", "mkl"), config.name
    return config.path


def _rehearse(config: Path, work_root: Path, *, alternative: bool = False) -> Rehearsal:
    """Two Pythons (pass 1's and the newest, tests/rehearsal_outcome.py two_pythons) of both BLAS in
    conda-build's order with the rehearsal's default seed (the MKL group first; pass 1's Python after the
    other among the pytorch outputs, as conda-build 26.7.1 built 3.10 after 3.12 with PYTHONHASHSEED 0), or
    ``alternative``: the groups and every output's variants reversed, each output with a fresh copy of pass
    1's work directory (as rattler-build does)."""
    for tool in ("cmake", "ninja", "ccache", "g++", "readelf", "patchelf"):
        if shutil.which(tool) is None:
            pytest.skip(f"the rehearsal needs {tool} on PATH (see .ci/run)")
    rehearsal = Rehearsal(
        config,
        work_root=work_root,
        cache_root=CACHE,
        progress=lambda _line: None,
        reverse_variants=alternative,
        fresh_work_dir=alternative,
        pythons=two_pythons(config),
    )
    rehearsal.prepare()
    # strict: a pass that compiles outside its expected targets fails (as the driver's --strict)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEGABUILD_STRICT", "1")
        rehearsal.run()
    assert_rehearsal_succeeded(rehearsal)  # every test below stands on a rehearsal `rehearse` passes
    return rehearsal


@pytest.fixture(scope="session")
def cuda_rehearsal(tmp_path_factory: pytest.TempPathFactory) -> Rehearsal:
    return _rehearse(_config(cuda=True), tmp_path_factory.mktemp("rehearsal-cuda"))


@pytest.fixture(scope="session")
def cpu_rehearsal(tmp_path_factory: pytest.TempPathFactory) -> Rehearsal:
    return _rehearse(_config(cuda=False), tmp_path_factory.mktemp("rehearsal-cpu"))


@pytest.fixture(scope="session")
def alternative_cuda_rehearsal(tmp_path_factory: pytest.TempPathFactory) -> Rehearsal:
    """The variants of every output in the reverse of the default order, each output with a fresh copy of the
    work directory as pass 1 left it: the passes may rely neither on one order nor on a shared work dir."""
    return _rehearse(_config(cuda=True), tmp_path_factory.mktemp("rehearsal-alternative"), alternative=True)


# each configuration's tests run where its rehearsal is (the xdist group named after its fixture, conftest.py)
@pytest.fixture(
    params=[
        pytest.param(kind, marks=pytest.mark.xdist_group(f"{kind}_rehearsal"))
        for kind in ("cuda", "cpu", "alternative_cuda")
    ]
)
def rehearsal(request: pytest.FixtureRequest) -> Rehearsal:
    return request.getfixturevalue(f"{request.param}_rehearsal")


@pytest.fixture(
    params=[
        pytest.param(kind, marks=pytest.mark.xdist_group(f"{kind}_rehearsal"))
        for kind in ("cuda", "alternative_cuda")
    ]
)
def cuda_rehearsals(request: pytest.FixtureRequest) -> Rehearsal:
    """The CUDA rehearsals only, for the tests whose CPU case tests/proofs/builders/test_rattler_build.py
    asserts with the real builder on the same configuration (docs/reference/real-build.md, "What of the
    rehearsal harness the real builder proves")."""
    return request.getfixturevalue(f"{request.param}_rehearsal")


# ---- what the build directory says -------------------------------------------------------------------------
def build_objects(rehearsal: Rehearsal) -> dict[str, set[str]]:
    """Every object of the build, by CMake target, from ``ninja -t targets all``."""
    listing = subprocess.run(
        ["ninja", "-C", str(rehearsal.src_dir / "build"), "-t", "targets", "all"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    by_target: dict[str, set[str]] = {}
    for line in listing.splitlines():
        output = line.rsplit(": ", 1)[0]
        if output.endswith(".o") and "/CMakeFiles/" in f"/{output}":
            by_target.setdefault(ninja_log.target_of(output), set()).add(output)
    return by_target


def expected_objects(rehearsal: Rehearsal) -> list[set[str]]:
    """Per step: pass 1 compiles everything; the MAGMA linalg pass the linalg objects; a pytorch pass the
    Python bindings when its Python is not pass 1's, in whatever order the outputs come (a return to a Python
    whose bindings were compiled before compiles nothing); nothing else."""
    by_target = build_objects(rehearsal)
    everything = set().union(*by_target.values())
    expected: list[set[str]] = []
    for result in rehearsal.results:
        step = result.step
        if step.name == TOP_LEVEL_NAME:
            expected.append(everything)
        elif step.name == LINALG and step.variant.get("magma_variant") == "magma":
            expected.append(by_target["torch_cuda_linalg"])
        elif step.name == "pytorch":
            python_linked = report.python_targets(step.variant.get("target_platform", ""))
            bindings = set().union(*(by_target[target] for target in python_linked))
            expected.append(bindings if step.python != rehearsal.pass1_python else set())
        else:
            expected.append(set())
    return expected


def test_every_step_compiled_exactly_its_objects(rehearsal: Rehearsal) -> None:
    compiled = [result.objects for result in rehearsal.results]
    for result, objects in zip(rehearsal.results, compiled, strict=True):
        assert len(objects) == len(set(objects)), f"{result.step.label} compiled an object twice"
    assert [set(objects) for objects in compiled] == expected_objects(rehearsal)


def test_the_cuda_build_has_the_lazy_linalg_library_and_the_cpu_build_none(rehearsal: Rehearsal) -> None:
    targets = set(build_objects(rehearsal))
    cuda = any(result.step.name == LINALG for result in rehearsal.results)
    assert {"c10", "torch_cpu", "torch_python", "_C", "nnapi_backend", "shm"} <= targets
    assert ({"torch_cuda", "c10_cuda", "torch_cuda_linalg"} <= targets) is cuda
    assert (targets & {"torch_cuda", "c10_cuda", "torch_cuda_linalg"} == set()) is not cuda


def test_compile_work_ratio_is_exactly_one(cuda_rehearsals: Rehearsal) -> None:
    """pass 1 + MAGMA's linalg objects + the Python-dependent objects once per Python but pass 1's + for the
    second BLAS its BLAS-dependent objects (none of them Python-linked, as in 2.6.0), counted as the compiler
    cache's misses, in conda-build's order: here one where pass 1's Python comes after the others (the shared
    work directory returns to it), or its reverse."""
    rehearsal = cuda_rehearsals
    ratio = report.work_ratio(rehearsal)
    assert ratio.pass1 > 0 and ratio.python_bindings > 0 and ratio.linalg > 0
    assert ratio.extra_blases == 1 and ratio.blas > 0 and ratio.blas_python == ratio.blas_static == 0
    pythons = [r.step.python for r in rehearsal.results if r.step.name == "pytorch"]
    assert ratio.extra_pythons == len(set(pythons) - {rehearsal.pass1_python}) == len(pythons) // 2 - 1
    assert ratio.compiled == ratio.expected, ratio.formula()
    # the second BLAS's pass 1 compiled its BLAS-dependent objects alone; ninja ran every edge again
    second = [r for r in rehearsal.results if r.step.name == TOP_LEVEL_NAME][1]
    assert second.compiles == ratio.blas + ratio.blas_static + ratio.blas_python < len(second.objects)


def test_the_default_order_returns_to_pass_1s_python(cuda_rehearsal: Rehearsal) -> None:
    """The case conda-build 26.7.1 built (pytorch for pass 1's Python after another Python's): that pass put
    back the Python-linked products pass 1 compiled and compiled nothing."""
    pytorch = [r for r in cuda_rehearsal.results if r.step.name == "pytorch"]
    back = next(r for r in pytorch if r.step.python == cuda_rehearsal.pass1_python)
    assert pytorch.index(back) > 0 and back.objects == []
    assert "Python-linked products of Python " + back.step.python + ": restored" in back.log.read_text()


def test_the_driver_report_agrees_with_the_ninja_log_and_the_cache(rehearsal: Rehearsal) -> None:
    """Each BLAS's work directory holds the report of its own passes (with a fresh copy per output, each
    output's last pass is gathered): what ninja ran, split into what the compiler compiled and what its
    cache served, as ccache's own log of the step says."""
    last_blas = rehearsal.results[-1].step.blas
    driver = report.driver_report(rehearsal)
    assert driver is not None, f"the driver wrote no {report.DRIVER_REPORT}"
    passes = driver["passes"]
    scripted = [
        r
        for r in rehearsal.results
        if r.step.has_script and (rehearsal.fresh_work_dir or r.step.blas == last_blas)
    ]
    assert len(passes) == len(scripted)
    for record, result in zip(passes, scripted, strict=True):
        assert record["package"] == result.step.name
        ran = [*record["objects_compiled"], *record["objects_from_cache"]]
        assert sorted(ran) == sorted(result.objects), record["pass_name"]
        assert len(record["objects_compiled"]) == result.compiles, record["pass_name"]


# ---- MAGMA ----------------------------------------------------------------------------------------------
def needed(library: Path) -> set[str]:
    dynamic = subprocess.run(
        ["readelf", "-d", str(library)], check=True, capture_output=True, text=True
    ).stdout
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic))


def package_of(rehearsal: Rehearsal, label: str) -> StepResult:
    return next(result for result in rehearsal.results if result.step.label == label)


def test_magma_and_nomagma_linalg_differ_exactly_by_the_magma_link(cuda_rehearsal: Rehearsal) -> None:
    for blas in ("generic", "mkl"):
        libraries = {
            variant: package_of(cuda_rehearsal, f"{LINALG}-{blas}-{variant}").package_dir
            / "lib/libtorch_cuda_linalg.so"
            for variant in ("magma", "nomagma")
        }
        with_magma, without = needed(libraries["magma"]), needed(libraries["nomagma"])
        assert "libtorch_cpu.so" in without
        assert with_magma - without == {"libmagma.so"}
        assert without - with_magma == set()


# ---- BLAS -------------------------------------------------------------------------------------------------
def test_each_blas_packages_what_its_own_pass_1_built(rehearsal: Rehearsal) -> None:
    """The MKL libtorch's libtorch_cpu links and calls MKL and ships Config.h saying so; the generic one's
    has no trace of it; each pytorch's torch._C says its BLAS (the import checks)."""
    for blas in ("generic", "mkl"):
        libtorch = package_of(rehearsal, f"libtorch-{blas}").package_dir
        assert libtorch is not None
        symbols = subprocess.run(
            ["readelf", "--dyn-syms", str(libtorch / "lib" / "libtorch_cpu.so")],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        mkl = blas == "mkl"
        assert ("libmkl_rt.so.2" in needed(libtorch / "lib" / "libtorch_cpu.so")) is mkl
        assert (" UND mkl_get_max_threads" in symbols) is mkl
        config = (libtorch / "include" / "ATen" / "Config.h").read_text()
        assert f"#define AT_MKL_ENABLED() {int(mkl)}" in config
    checks = concluded(rehearsal).import_checks
    assert checks and all(f'"has_mkl": {str("-mkl-" in c.label).lower()}' in c.detail for c in checks)


# ---- packages ---------------------------------------------------------------------------------------------
def test_the_top_level_builds_package_nothing(rehearsal: Rehearsal) -> None:
    tops = [result for result in rehearsal.results if result.step.name == TOP_LEVEL_NAME]
    assert rehearsal.results[0] == tops[0] and len(tops) == 2  # one per BLAS
    assert [top.new_files for top in tops] == [[], []]


def test_packages_of_different_names_share_no_file(rehearsal: Rehearsal) -> None:
    owners: dict[str, set[str]] = {}
    for result in rehearsal.results:
        if result.step.name == TOP_LEVEL_NAME:
            continue
        for path in result.new_files:
            owners.setdefault(path, set()).add(result.step.name)
    shared = {path: names for path, names in owners.items() if len(names) > 1}
    assert shared == {}


def test_every_installed_file_is_in_exactly_one_package(rehearsal: Rehearsal) -> None:
    """CMake's install tree goes to libtorch, libtorch-cuda-linalg or pytorch (libtorch_python), and each
    pytorch package holds its Python's setuptools tree; no package holds anything else but dist-info."""
    # CMake's install prefix of the last install: <src>/torch (setup.py) or the wheel's torch/ in
    # scikit-build-core's staging directory (either build backend, by the recipe's host)
    install_root = Path(
        CMakeCache.load(rehearsal.src_dir / "build" / "CMakeCache.txt").get("CMAKE_INSTALL_PREFIX")
    )
    manifest = (rehearsal.src_dir / "build" / "install_manifest.txt").read_text().split()
    every = {Path(path).relative_to(install_root).as_posix() for path in manifest}
    installed = {path for path in every if path.split("/")[0] in ("lib", "include", "share", "bin")}
    # the rest is the torch package's own: torch._C, which setuptools ships as package data (checked below)
    assert {path.split(".")[0] for path in every - installed} == {"_C"}
    packaged: dict[str, set[str]] = {}
    for result in rehearsal.results[1:]:
        for path in result.new_files:
            packaged.setdefault(path, set()).add(result.step.name)
    misplaced = {
        path: sorted(packaged.get(path, ())) for path in installed if len(packaged.get(path, ())) != 1
    }
    assert misplaced == {}, "installed files in no package or in packages of several names"

    accounted = set(installed)
    # CUDA libtorch adds its CF_TORCH_CUDA_ARCH_LIST activation scripts (recipe/megabuild/activation.py)
    cuda = any(result.step.name == "libtorch-cuda-linalg" for result in rehearsal.results)
    for result in rehearsal.results:
        if cuda and result.step.name == "libtorch":
            scripts = {activation.ACTIVATE, activation.DEACTIVATE}
            assert scripts <= set(result.new_files), f"{result.step.label} lacks the activation scripts"
            accounted |= scripts
    checked = []
    last_blas = rehearsal.results[-1].step.blas
    for result in rehearsal.results:
        if result.step.name != "pytorch" or result.step.blas != last_blas:
            continue  # the other BLAS's work directory (and its setuptools trees) went with its group
        site = f"lib/python{result.step.python}/site-packages/"
        tag = result.step.python.replace(".", "")
        setuptools_tree = next(  # setup.py's build/lib.*, or the unpacked wheel of scikit-build-core's pass
            (rehearsal.src_dir / "build").glob(f"lib.*-cpython-{tag}"), None
        ) or next((rehearsal.src_dir / "build" / "megabuild-wheels").glob(f"py{tag}/platlib"), None)
        if setuptools_tree is None and rehearsal.fresh_work_dir:
            continue  # that output's copy of the work directory is gone; the last one's tree is checked
        assert setuptools_tree is not None, f"no setuptools tree for Python {result.step.python}"
        checked.append(result)
        python_files = {
            f"{site}{path.relative_to(setuptools_tree).as_posix()}"
            for path in setuptools_tree.rglob("*")
            if path.is_file()
            and path.relative_to(setuptools_tree).parts[1] not in ("lib", "include", "share", "bin")
        }
        assert python_files <= set(result.new_files), f"{result.step.label} lacks setuptools files"
        assert any(name.startswith(f"{site}torch/_C.cpython-{tag}") for name in python_files)
        accounted |= python_files
        links = {f"{site}torch/{name}" for name in ("lib", "include", "share", "bin")}
        assert links <= set(result.new_files), f"{result.step.label} lacks the links into $PREFIX"
        accounted |= links
    assert checked, "no pytorch package was checked against its setuptools tree"
    extra = {
        path
        for result in rehearsal.results
        if (result.step.name != "pytorch" and result.step.blas == last_blas) or result in checked
        for path in result.new_files
        if path not in accounted and ".dist-info/" not in path
    }
    assert extra == set()


def test_no_step_changes_what_its_host_prefix_held(rehearsal: Rehearsal) -> None:
    """conda-build packages new files only: a pass rewriting e.g. libtorch's files in pytorch's host
    would lose that change silently."""
    assert {r.step.label: r.modified_host_files for r in rehearsal.results if r.modified_host_files} == {}


def test_every_package_loads_only_what_it_may_rely_on(rehearsal: Rehearsal) -> None:
    """The linkage check of each built package with the packages it depends on (what `rehearse` prints)."""
    checks = concluded(rehearsal).linkage_checks
    packaged = [r.step.label for r in rehearsal.results if r.ok and r.package_dir is not None and r.new_files]
    assert [check.label for check in checks] == packaged
    assert [check.errors for check in checks if not check.ok] == []
    assert all(check.binaries > 0 for check in checks if not check.label.startswith("pytorch-"))


def test_pytorch_without_libtorch_fails_the_linkage_check(cpu_rehearsal: Rehearsal) -> None:
    pytorch = next(r for r in cpu_rehearsal.results if r.step.name == "pytorch" and r.ok)
    spec = report.package_spec_of(pytorch, cpu_rehearsal.target.subdir)
    outcome = linkage.LinkageCheck([spec], "linux", machine_runtime=report.MACHINE_RUNTIME).run()
    assert any(
        "need(s) libc10.so: no package provides it (expected in libtorch, by the staging rule" in error
        for error in outcome.errors
    ), outcome.errors


def test_links_in_packages_stay_inside_the_prefix(rehearsal: Rehearsal) -> None:
    for result in rehearsal.results:
        if result.package_dir is None:
            continue
        for rel in result.new_files:
            path = result.package_dir / rel
            if not path.is_symlink():
                continue
            target = os.readlink(path)
            assert not os.path.isabs(target), f"{result.step.label}: {rel} -> {target} is absolute"
            resolved = os.path.normpath(os.path.join(os.path.dirname(rel), target))
            assert not resolved.startswith(".."), f"{result.step.label}: {rel} -> {target} leaves the prefix"


def test_import_torch_in_a_prefix_made_from_the_packages(cuda_rehearsals: Rehearsal) -> None:
    rehearsal = cuda_rehearsals
    checks = concluded(rehearsal).import_checks
    pythons = sorted({r.step.python for r in rehearsal.results if r.step.name == "pytorch"})
    assert pythons, "no pytorch package was built"
    assert all(check.ok for check in checks), [check for check in checks if not check.ok]
    for python in pythons:
        tag = python.replace(".", "")
        ours = [check for check in checks if check.label.endswith(f"-py{python}")]
        assert ours, f"no import check for Python {python}"
        for check in ours:
            assert f'"version": "{RECIPE_VERSION}"' in check.detail  # the stand-in builds the recipe's
            assert f"_C.cpython-{tag}" in check.detail
            cuda = LINALG in check.label
            assert f'"cuda": {str(cuda).lower()}' in check.detail
            magma = re.search(rf"{LINALG}-\w+-magma\+", check.label) is not None
            assert f'"has_magma": {str(magma).lower()}' in check.detail


# ---- driver errors: one line, non-zero exit, nothing staged ----------------------------------------------
@pytest.fixture(scope="session")
def pass1_only(tmp_path_factory: pytest.TempPathFactory) -> Rehearsal:
    """A CPU rehearsal stopped after pass 1 and libtorch: the work directory the error cases disturb."""
    rehearsal = Rehearsal(
        _config(cuda=False),
        work_root=tmp_path_factory.mktemp("rehearsal-errors"),
        cache_root=CACHE,
        progress=lambda _line: None,
    )
    rehearsal.prepare()
    for step in rehearsal.steps[:2]:
        assert rehearsal.run_step(step).ok, step.label
    return rehearsal


def pytorch_step(rehearsal: Rehearsal, *, other_python: bool) -> object:
    steps = [step for step in rehearsal.steps if step.name == "pytorch"]
    chosen = [step for step in steps if (step.python != rehearsal.pass1_python) == other_python]
    if not chosen:
        pytest.skip("needs a second local CPython for a pytorch pass with another Python")
    return chosen[0]


def assert_failed_cleanly(result: StepResult, *words: str) -> None:
    assert result.returncode != 0
    assert result.new_files == [], "a failing pass staged files"
    assert result.package_dir is None
    last = result.last_line()
    assert last.startswith("megabuild error: "), last
    for word in words:
        assert word in last, last


def test_unknown_pkg_name(pass1_only: Rehearsal) -> None:
    step = dataclasses.replace(pass1_only.steps[1], name="libtorch-extras")
    assert_failed_cleanly(pass1_only.run_step(step), "PKG_NAME", "libtorch-extras")


def test_pytorch_without_pass_1(pass1_only: Rehearsal, tmp_path: Path) -> None:
    fresh = Rehearsal(
        pass1_only.config_path, work_root=tmp_path, cache_root=CACHE, progress=lambda _line: None
    )
    fresh.prepare()
    result = fresh.run_step(pytorch_step(fresh, other_python=False))
    assert_failed_cleanly(result, "pass 1")
    assert not (fresh.src_dir / "build" / "CMakeCache.txt").exists()


def test_pytorch_with_a_cache_lacking_the_python_entries(pass1_only: Rehearsal) -> None:
    from megabuild.cmake_cache import CMakeCache

    cache_path = pass1_only.src_dir / "build" / "CMakeCache.txt"
    original = cache_path.read_bytes()
    try:
        cache = CMakeCache.load(cache_path)
        for key in [k for k in cache.entries if k.startswith(("Python_", "_Python_"))]:
            cache.remove(key)
        cache.write(cache_path)
        result = pass1_only.run_step(pytorch_step(pass1_only, other_python=True))
    finally:
        cache_path.write_bytes(original)
    assert_failed_cleanly(result, "Python_EXECUTABLE")


def test_a_failing_compile_stops_the_pass(pass1_only: Rehearsal) -> None:
    source = pass1_only.src_dir / "torch" / "csrc" / "utils" / "arith.cpp"
    original = source.read_bytes()
    try:
        source.write_bytes(original + b"\n#error broken on purpose by test_rehearsal\n")
        result = pass1_only.run_step(pytorch_step(pass1_only, other_python=True))
    finally:
        source.write_bytes(original)
    assert_failed_cleanly(result)
    assert "broken on purpose" in result.log.read_text()


# ---- find_package(Torch) from the packages -------------------------------------------------------------
CONSUMER_CMAKE = """cmake_minimum_required(VERSION 3.18)
project(torch_consumer CXX)
find_package(Torch @MAJOR_MINOR@ REQUIRED)
add_executable(torch_consumer main.cpp)
target_link_libraries(torch_consumer ${TORCH_LIBRARIES})
""".replace("@MAJOR_MINOR@", ".".join(RECIPE_VERSION.split(".")[:2]))
CONSUMER_MAIN = """#include <torch/torch.h>
#include <cstdio>
int main() { std::printf("%s %g\\n", at::version(), at::add(1.0, 2.0, 3.0)); }
"""


def test_find_package_torch_works_from_prefix_and_site_packages(
    cuda_rehearsal: Rehearsal, tmp_path: Path
) -> None:
    pytorch = next(r for r in cuda_rehearsal.results if r.step.name == "pytorch")
    libtorch = f"libtorch-{pytorch.step.blas}"
    prefix = report.assemble_prefix(
        cuda_rehearsal, tmp_path / "prefix", pytorch.step.python, [libtorch, pytorch.step.label]
    )
    project = tmp_path / "consumer"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(CONSUMER_CMAKE)
    (project / "main.cpp").write_text(CONSUMER_MAIN)
    site_config = prefix / f"lib/python{pytorch.step.python}/site-packages/torch/share/cmake/Torch"
    for name, hint in (
        ("prefix", f"-DCMAKE_PREFIX_PATH={prefix}"),
        ("site-packages", f"-DTorch_DIR={site_config}"),
    ):
        build = tmp_path / f"build-{name}"
        subprocess.run(
            ["cmake", "-GNinja", "-S", str(project), "-B", str(build), hint], check=True, capture_output=True
        )
        subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True)
        run = subprocess.run([str(build / "torch_consumer")], check=True, capture_output=True, text=True)
        assert run.stdout.split() == [RECIPE_VERSION, "7"], name
