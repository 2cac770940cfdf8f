"""The linkage check and wheel-layout on every target's real 2.13.0 wheel, through its small fixtures.

The wheels (111-527 MB) are not in CI: ``tests/data`` keeps each one's file list and the needed libraries of
each of its binaries, read with lief from the real files (``wheel-layout --file-list/--needs-list``).
Skeleton wheels and :class:`FixtureNeeds` (test doubles, ``tests/wheel_fixtures.py``) carry them through
the real staging and the real check. The check's own reading of binaries runs on small ELF libraries
compiled here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from megabuild.package_files import LIBTORCH, LIBTORCH_CUDA_LINALG, NOT_SHIPPED, PYTORCH, RULES
from megabuild.staging import INSTALL_TREE_DIRS, rule_claims
from wheel_fixtures import (
    WHEELS,
    FixtureNeeds,
    WheelFixture,
    binaries_and_markers,
    ci_config,
    write_skeleton_wheel,
)

from feedstock_tools.common.errors import ToolError
from feedstock_tools.conda.recipe_render import render_recipe
from feedstock_tools.proofs import linkage
from feedstock_tools.proofs.runtime_libraries import WHEEL_ONLY
from feedstock_tools.proofs.wheel_layout import (
    find_config,
    parse_wheel_name,
    run,
    wheel_cuda_version,
)

REPO = Path(__file__).resolve().parents[1]
wheels = pytest.mark.parametrize("wheel", WHEELS, ids=lambda w: w.target)


def wheel_cuda(wheel: WheelFixture) -> str:
    return "13.0" if wheel.target.startswith("cuda130") else "None"


def dropped(path: str, wheel: WheelFixture) -> bool:
    """A wheel file the staging table leaves out (bundled libraries, protoc)."""
    if not path.startswith(("torch/lib/", "torch/bin/")):
        return False
    install = path.removeprefix("torch/")
    return any(r.package == NOT_SHIPPED for r in RULES if rule_claims(r, "install", install, wheel.shlib))


def checked_run(wheel: WheelFixture, directory: Path, drop: tuple[str, ...] = ()) -> str:
    """The real wheel-layout run on the wheel's binaries (skeleton), their needs from the fixture."""
    needs = wheel.needs
    files = [f for f in binaries_and_markers(wheel.files, needs) if f.path not in drop]
    skeleton = write_skeleton_wheel(files, directory, wheel.wheel_name)
    work = directory / "work"
    reader = FixtureNeeds(needs, work, parse_wheel_name(skeleton).site_packages)
    return run(skeleton, work, ci_config(wheel.subdir, wheel_cuda(wheel)), reader=reader)


# ---- the staging table places every file of every wheel -------------------------------------------------


def install_tree_files(wheel: WheelFixture) -> list[str]:
    """The wheel's torch/{lib,include,share,bin} files: CMake's install tree, as wheel-layout lays it out."""
    tops = tuple(f"torch/{name}/" for name in INSTALL_TREE_DIRS)
    return [f.path.removeprefix("torch/") for f in wheel.files if f.path.startswith(tops)]


@wheels
def test_every_installed_file_of_the_wheel_has_exactly_one_rule(wheel: WheelFixture) -> None:
    """What classify() demands of the install tree (the setuptools tree's rules are platform-free and
    run on the real x86_64 layout in test_cuda_wheel_files.py and below)."""
    counts: dict[str, int] = {}
    for path in install_tree_files(wheel):
        claimed = [rule for rule in RULES if rule_claims(rule, "install", path, wheel.shlib)]
        assert len(claimed) == 1, (path, [rule.pattern for rule in claimed])
        counts[claimed[0].package] = counts.get(claimed[0].package, 0) + 1
    expected = {
        # (pytorch: lib/libtorch_python; the real wheel-layout runs reported the same libtorch and
        # (not shipped) counts: docs/recipe.md, "Real wheels of every target")
        "cuda130": {LIBTORCH: 9207, LIBTORCH_CUDA_LINALG: 1, PYTORCH: 1, NOT_SHIPPED: 284},
        "cuda130-aarch64": {LIBTORCH: 9207, LIBTORCH_CUDA_LINALG: 1, PYTORCH: 1, NOT_SHIPPED: 453},
        "macos-arm64": {LIBTORCH: 9703, PYTORCH: 1, NOT_SHIPPED: 370},
    }[wheel.target]
    assert counts == expected


@wheels
def test_each_bundled_library_has_a_decision_and_is_never_shipped(wheel: WheelFixture) -> None:
    libraries = [
        path for path in install_tree_files(wheel) if path.startswith("lib/lib") and path.count("/") == 1
    ]
    for library in libraries:
        (rule,) = [r for r in RULES if rule_claims(r, "install", library, wheel.shlib)]
        if rule.package == NOT_SHIPPED:
            assert rule.bundled is not None or rule.why.startswith("BUILD_TEST"), library
        if rule.bundled is not None:
            assert rule.package == NOT_SHIPPED and rule.action == "drop"
            assert rule.bundled.evidence
            assert bool(rule.bundled.conda_package) == (rule.bundled.decision == "run requirement")
    # the shared libraries each wheel bundles, by name
    bundled = {
        path
        for path in libraries
        if next(r for r in RULES if rule_claims(r, "install", path, wheel.shlib)).bundled
    }
    assert bundled == {
        "cuda130": {"lib/libgomp.so.1"},
        "cuda130-aarch64": {
            "lib/libgomp.so.1", "lib/libgfortran.so.5",
            "lib/libarm_compute.so", "lib/libarm_compute_graph.so",
            "lib/libnvpl_blas_core.so.0", "lib/libnvpl_blas_lp64_gomp.so.0", "lib/libnvpl_lapack_core.so.0",
            "lib/libnvpl_lapack_lp64_gomp.so.0",
        },
        "macos-arm64": {"lib/libomp.dylib"},
    }[wheel.target]  # fmt: skip


# ---- the linkage of every wheel's packages ---------------------------------------------------------------


@wheels
def test_every_need_of_every_wheel_binary_resolves(wheel: WheelFixture, tmp_path: Path) -> None:
    report = checked_run(wheel, tmp_path)
    (line,) = [line for line in report.splitlines() if line.startswith("linkage:")]
    staged = {path: needs for path, needs in wheel.needs.items() if not dropped(path, wheel)}
    binaries, needs = len(staged), sum(len(n.needed) for n in staged.values())
    assert line == f"linkage: {needs} needed libraries of {binaries} binaries resolved"
    accepted = report.split("accepted by a bundled-library decision:")[-1]
    if wheel.target == "cuda130-aarch64":
        for library in ("NVIDIA Performance Libraries", "Arm Compute Library", "NVSHMEM"):
            assert library in accepted
    if wheel.target == "cuda130":
        assert "NVSHMEM" in accepted and "Arm Compute" not in accepted
    if wheel.target == "macos-arm64":
        assert (
            "accepted by a bundled-library decision" not in report
        )  # libomp: llvm-openmp, a run requirement
        assert "| LLVM OpenMP runtime" in report


def test_a_library_removed_from_the_mac_wheel_is_one_line(tmp_path: Path) -> None:
    (mac,) = [w for w in WHEELS if w.target == "macos-arm64"]
    with pytest.raises(ToolError) as raised:
        checked_run(mac, tmp_path, drop=("torch/lib/libshm.dylib",))
    message = str(raised.value)
    assert "\n" not in message
    assert (
        "need(s) libshm.dylib: no package provides it (expected in libtorch, by the staging rule" in message
    )
    assert "pytorch:lib/libtorch_python.dylib" in message and "libtorch:bin/torch_shm_manager" in message
    assert not (tmp_path / "work").exists()  # nothing staged, nothing half-written


def test_a_missing_run_requirement_is_named(tmp_path: Path) -> None:
    """libtorch_cuda_linalg loads libcusolver: without libcusolver-dev in its host it has no run
    requirement that provides it (a recipe edit simulated on the rendered requirements)."""
    (x86,) = [w for w in WHEELS if w.target == "cuda130"]
    needs = {"lib/libtorch_cuda_linalg.so": x86.needs["torch/lib/libtorch_cuda_linalg.so"]}
    prefix = tmp_path / "linalg"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "lib" / "libtorch_cuda_linalg.so").write_bytes(b"")
    spec = linkage.PackageSpec(
        LIBTORCH_CUDA_LINALG, prefix, ("cuda-cudart", "libcublas", "libcusparse", "libstdcxx", "libgcc"),
        ("*/libc10*", "*/libtorch_c*"),
    )  # fmt: skip
    report = linkage.LinkageCheck(
        [spec], "linux", reader=lambda path: needs.get(path.relative_to(prefix).as_posix())
    ).run()
    assert report.errors == [
        "libtorch-cuda-linalg:lib/libtorch_cuda_linalg.so need(s) libcusolver.so.12: conda-forge's "
        "libcusolver provides it, but it is not a run requirement of libtorch-cuda-linalg (overlinking)"
    ]


# ---- the check on real binaries (lief) ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def elf_packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two packages of real ELF files: libdep.so in 'dep', libuser.so (needs libdep.so and libstdc++,
    RUNPATH $ORIGIN) and bin/tool (needs libuser.so, RUNPATH $ORIGIN/../lib) in 'user'."""
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.fail("g++ is missing: .ci/run installs it (Debian package g++)")
    root = tmp_path_factory.mktemp("elf")
    source = root / "src"
    source.mkdir()
    (source / "dep.cc").write_text("int dep() { return 1; }\n")
    (source / "user.cc").write_text(
        '#include <string>\nint dep();\nint user() { return dep() + std::string("x").size(); }\n'
    )
    (source / "tool.cc").write_text("int user();\nint main() { return user() - 2; }\n")
    (root / "dep" / "lib").mkdir(parents=True)
    (root / "user" / "lib").mkdir(parents=True)
    (root / "user" / "bin").mkdir()

    def build(*args: str) -> None:
        subprocess.run([compiler, *args], check=True, capture_output=True)

    build("-shared", "-fPIC", "-o", str(root / "dep/lib/libdep.so"), str(source / "dep.cc"))
    build("-shared", "-fPIC", "-o", str(root / "user/lib/libuser.so"), str(source / "user.cc"),
          f"-L{root / 'dep/lib'}", "-ldep", "-Wl,--enable-new-dtags,-rpath,$ORIGIN")  # fmt: skip
    build("-o", str(root / "user/bin/tool"), str(source / "tool.cc"), f"-L{root / 'user/lib'}", "-luser",
          "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../lib", f"-Wl,-rpath-link,{root / 'dep/lib'}")  # fmt: skip
    return root


def elf_check(root: Path, user_run: tuple[str, ...], with_dep: bool = True) -> linkage.LinkageReport:
    packages = [linkage.PackageSpec("user", root / "user", user_run)]
    if with_dep:
        packages.append(linkage.PackageSpec("dep", root / "dep", ("libgcc",)))
    return linkage.LinkageCheck(packages, "linux").run()


def test_lief_reads_needed_libraries_and_runpath(elf_packages: Path) -> None:
    needs = linkage.read_binary(elf_packages / "user" / "lib" / "libuser.so")
    assert needs is not None and needs.format == "ELF"
    assert "libdep.so" in needs.needed and "libstdc++.so.6" in needs.needed
    assert needs.search_paths == ("$ORIGIN",)
    assert linkage.read_binary(elf_packages / "src" / "dep.cc") is None


def test_real_binaries_resolve_through_runpath_and_dependencies(elf_packages: Path) -> None:
    report = elf_check(elf_packages, ("dep", "libstdcxx", "libgcc"))
    assert report.errors == []
    assert report.binaries == 3


def test_a_package_it_does_not_depend_on_is_overlinking(elf_packages: Path) -> None:
    report = elf_check(elf_packages, ("libstdcxx", "libgcc"))
    assert report.errors == [
        "user:lib/libuser.so need(s) libdep.so: found in dep (lib/libdep.so), which user does not depend on "
        "(overlinking)"
    ]


def test_a_library_no_package_has_fails_and_an_unused_requirement_warns(elf_packages: Path) -> None:
    report = elf_check(elf_packages, ("dep", "libstdcxx", "libgcc", "libcblas"), with_dep=False)
    assert report.errors == [
        "user:lib/libuser.so need(s) libdep.so: no package provides it "
        "(expected from a run requirement of user)"
    ]
    assert report.warnings == ["user: no file loads a library of run requirement(s) libcblas (overdepending)"]
    with pytest.raises(ToolError, match=r"need\(s\) libdep\.so: no package provides it .*: ship the library"):
        report.raise_for_errors()


# ---- the package tests expect what the real binaries are -------------------------------------------------


@wheels
def test_package_tests_expect_the_libraries_the_wheel_ships(wheel: WheelFixture) -> None:
    rendered = render_recipe(REPO / "recipe", ci_config(wheel.subdir, wheel_cuda(wheel)))
    shipped = {f.path.removeprefix("torch/") for f in wheel.files if f.path.startswith("torch/lib/")}
    tested: set[str] = set()
    for output in rendered.outputs:
        for command in output.test.get("commands", []):
            if command.startswith('test -f "${PREFIX}/lib/lib'):
                library = command.split('"')[1].removeprefix("${PREFIX}/")
                assert library in shipped, (output.name, library)
                tested.add(library)
            if command.startswith('test ! -e "${PREFIX}/lib/'):
                absent = command.split('"')[1].removeprefix("${PREFIX}/")
                (rule,) = [r for r in RULES if rule_claims(r, "install", absent, wheel.shlib)]
                assert absent in shipped and rule.package == PYTORCH  # shipped by pytorch, not libtorch
    own = {
        library
        for library in shipped
        for rule in RULES
        if rule.package in (LIBTORCH, LIBTORCH_CUDA_LINALG)
        and rule_claims(rule, "install", library, wheel.shlib)
    }
    # every library libtorch gets from the wheel is tested, but the one the conda build has not (NVSHMEM)
    untested = {library for library in own - tested if "nvshmem" not in library}
    assert untested == set()
    assert any("NVSHMEM" in entry.what for entry in WHEEL_ONLY)


# ---- wheel names and configurations ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "subdir", "setuptools_dir", "site_packages", "shlib"),
    [
        ("torch-2.13.0-cp312-cp312-manylinux_2_28_aarch64.whl", "linux-aarch64",
         "lib.linux-aarch64-cpython-312", "lib/python3.12/site-packages", ".so"),
        ("torch-2.13.0-cp312-cp312-macosx_14_0_arm64.whl", "osx-arm64",
         "lib.macosx-14.0-arm64-cpython-312", "lib/python3.12/site-packages", ".dylib"),
        ("torch-2.13.0-cp312-cp312-win_amd64.whl", "win-64", "lib.win-amd64-cpython-312", "Lib/site-packages",
         ".dll"),
    ],
)  # fmt: skip
def test_wheel_names_of_every_platform(name, subdir, setuptools_dir, site_packages, shlib) -> None:
    tag = parse_wheel_name(Path(name))
    assert (tag.subdir, tag.setuptools_dir, tag.site_packages, tag.shlib_ext) == (
        subdir, setuptools_dir, site_packages, shlib,
    )  # fmt: skip


@wheels
def test_the_configuration_follows_the_wheels_cuda_version(wheel: WheelFixture, tmp_path: Path) -> None:
    """torch/version.py as the real 2.13.0 wheels write it (CUDA: `cuda: Optional[str] = '13.0'`)."""
    cuda = wheel_cuda(wheel)
    value = f"'{cuda}'" if cuda != "None" else "None"
    path = tmp_path / wheel.wheel_name
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("torch/version.py", f"__version__ = '2.13.0'\ncuda: Optional[str] = {value}\n")
    assert wheel_cuda_version(path) == cuda
    assert find_config(path, parse_wheel_name(path)) == ci_config(wheel.subdir, cuda)


def test_needs_list_round_trip(tmp_path: Path) -> None:
    (mac,) = [w for w in WHEELS if w.target == "macos-arm64"]
    entries = sorted(mac.needs.items())
    written = linkage.write_needs_list(entries, tmp_path / "needs.txt.gz", "test")
    assert written == 11
    assert linkage.read_needs_list(tmp_path / "needs.txt.gz") == dict(entries)


def test_cli_cuts_a_needs_list_and_refuses_a_missing_wheel(tmp_path: Path) -> None:
    cli = subprocess.run(
        [sys.executable, "-m", "feedstock_tools", "wheel-layout", str(tmp_path / "torch-2.13.0-cp312-cp312-"
         "manylinux_2_28_x86_64.whl"), "--needs-list", str(tmp_path / "out.txt")],
        capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    assert cli.returncode == 1
    assert cli.stderr.startswith("error: wheel ") and len(cli.stderr.splitlines()) == 1
    assert "does not exist; give a PyTorch wheel (.whl; 'pip download torch==2.13.0 --no-deps'" in cli.stderr
    assert not (tmp_path / "out.txt").exists()


@pytest.mark.parametrize(
    ("name", "cuda", "expected"),
    [
        # linux-64 has MKL and generic builds: the generic one is checked
        (
            "torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl",
            "13.0",
            "linux_64_blas_implgenericc_compiler_version15c_stdlib_version2.28cuda_compiler_version13.0"
            "cxx_compiler_version15.yaml",
        ),
        # win-64 builds MKL only: its one configuration of that CUDA version
        ("torch-2.13.0-cp312-cp312-win_amd64.whl", None, "win_64_cuda_compiler_versionNone.yaml"),
    ],
)
def test_a_wheel_is_checked_against_its_platform_configuration(
    tmp_path: Path, name: str, cuda: str | None, expected: str
) -> None:
    from feedstock_tools.proofs.wheel_layout import find_config, parse_wheel_name

    wheel = tmp_path / name
    with zipfile.ZipFile(wheel, "w") as archive:  # only torch/version.py, which names the CUDA version
        archive.writestr("torch/version.py", f"cuda: Optional[str] = {cuda!r}\n")
    assert find_config(wheel, parse_wheel_name(wheel)).name == expected
