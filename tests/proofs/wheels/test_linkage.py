"""The linkage check and wheel-layout on every target's real 2.13.0 wheel, through its small fixtures.

The wheels (111-527 MB) are not in CI: ``tests/data`` keeps each one's file list and the needed libraries of
each of its binaries, read with lief from the real files (``wheel-layout --file-list/--needs-list``).
Skeleton wheels (``tests/wheel_fixtures.py``) and the needs-list reader ``linkage.StagedWheelNeeds``
carry them through the real staging and the real check. The check's own reading of binaries runs on
small ELF libraries compiled here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from wheel_fixtures import (
    WHEELS,
    WheelFixture,
    binaries_and_markers,
    ci_config,
    write_skeleton_wheel,
)

from feedstock_tools.common.errors import ToolError
from feedstock_tools.conda.recipe_render import render_recipe
from feedstock_tools.proofs.wheels import linkage
from feedstock_tools.proofs.wheels.runtime_libraries import WHEEL_ONLY
from feedstock_tools.proofs.wheels.wheel_layout import (
    find_config,
    parse_wheel_name,
    run,
    wheel_cuda_version,
)
from megabuild.package_files import LIBTORCH, LIBTORCH_CUDA_LINALG, NOT_SHIPPED, PYTORCH, rules_for
from megabuild.staging import INSTALL_TREE_DIRS, rule_claims

REPO = Path(__file__).resolve().parents[3]
wheels = pytest.mark.parametrize("wheel", WHEELS, ids=lambda w: w.target)


def wheel_cuda(wheel: WheelFixture) -> str:
    return "13.0" if wheel.target.startswith("cuda130") else "None"


def dropped(path: str, wheel: WheelFixture) -> bool:
    """A wheel file the staging table leaves out (bundled libraries, protoc)."""
    if not path.startswith(("torch/lib/", "torch/bin/")):
        return False
    install = path.removeprefix("torch/")
    rules = rules_for(wheel.shlib)
    return any(r.package == NOT_SHIPPED for r in rules if rule_claims(r, "install", install, wheel.shlib))


def checked_run(wheel: WheelFixture, directory: Path, drop: tuple[str, ...] = ()) -> str:
    """The real wheel-layout run on the wheel's binaries (skeleton), their needs from the fixture."""
    needs = wheel.needs
    files = [f for f in binaries_and_markers(wheel.files, needs) if f.path not in drop]
    skeleton = write_skeleton_wheel(files, directory, wheel.wheel_name)
    work = directory / "work"
    reader = linkage.StagedWheelNeeds(needs, work / "packages", parse_wheel_name(skeleton).site_packages)
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
        claimed = [rule for rule in rules_for(wheel.shlib) if rule_claims(rule, "install", path, wheel.shlib)]
        assert len(claimed) == 1, (path, [rule.pattern for rule in claimed])
        counts[claimed[0].package] = counts.get(claimed[0].package, 0) + 1
    expected = {
        # (pytorch: lib/libtorch_python; the real wheel-layout runs reported the same libtorch and
        # (not shipped) counts: docs/reference/package-contents.md)
        "cuda130": {LIBTORCH: 9207, LIBTORCH_CUDA_LINALG: 1, PYTORCH: 1, NOT_SHIPPED: 284},
        "cuda130-aarch64": {LIBTORCH: 9207, LIBTORCH_CUDA_LINALG: 1, PYTORCH: 1, NOT_SHIPPED: 453},
        "macos-arm64": {LIBTORCH: 9703, PYTORCH: 1, NOT_SHIPPED: 370},
        # pytorch: torch_python.dll and its import library
        "cp312-win_amd64": {LIBTORCH: 9165, PYTORCH: 2, NOT_SHIPPED: 260},
    }[wheel.target]
    assert counts == expected


def shared_libraries(wheel: WheelFixture) -> list[str]:
    """The wheel's lib/ shared libraries: lib*.so*/lib*.dylib, or on Windows every *.dll."""
    prefix, suffix = ("lib/", ".dll") if wheel.shlib == ".dll" else ("lib/lib", "")
    return [
        path
        for path in install_tree_files(wheel)
        if path.startswith(prefix) and path.count("/") == 1 and suffix in path
    ]


@wheels
def test_each_bundled_library_has_a_decision_and_is_never_shipped(wheel: WheelFixture) -> None:
    rules = rules_for(wheel.shlib)
    libraries = shared_libraries(wheel)
    for library in libraries:
        (rule,) = [r for r in rules if rule_claims(r, "install", library, wheel.shlib)]
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
        if next(r for r in rules if rule_claims(r, "install", path, wheel.shlib)).bundled
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
        "cp312-win_amd64": {"lib/libiomp5md.dll", "lib/libiompstubs5md.dll", "lib/uv.dll"},
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
    if wheel.target == "cp312-win_amd64":
        # libiomp5md.dll: llvm-openmp, uv.dll: libuv, MSVCP140.dll: vc14_runtime (names without case),
        # api-ms-win-crt-*: ucrt, python312.dll: python; all run requirements, no decision needed
        assert "accepted by a bundled-library decision" not in report
        assert "| Intel OpenMP runtime libiomp5md.dll" in report and "| libuv uv.dll" in report


def test_a_dll_removed_from_the_windows_wheel_is_one_line(tmp_path: Path) -> None:
    (win,) = [w for w in WHEELS if w.target == "cp312-win_amd64"]
    with pytest.raises(ToolError) as raised:
        checked_run(win, tmp_path, drop=("torch/lib/c10.dll",))
    message = str(raised.value)
    assert "\n" not in message
    assert "need(s) c10.dll: no package provides it (expected in libtorch, by the staging rule" in message
    assert "libtorch:Library/bin/torch_cpu.dll" in message
    assert not (tmp_path / "work").exists()


def test_a_windows_dll_of_a_package_that_is_no_run_requirement_is_named(tmp_path: Path) -> None:
    """torch_cpu.dll loads libiomp5md.dll and MSVCP140.dll: without llvm-openmp, and without the MSVC
    compiler whose run_exports bring vc14_runtime, both are overlinking (a recipe edit simulated)."""
    (win,) = [w for w in WHEELS if w.target == "cp312-win_amd64"]
    needs = win.needs["torch/lib/torch_cpu.dll"]
    prefix = tmp_path / "libtorch"
    (prefix / "Library" / "bin").mkdir(parents=True)
    for name in ("torch_cpu.dll", "c10.dll"):
        (prefix / "Library" / "bin" / name).write_bytes(b"")
    run = linkage.run_requirements((), ("cmake", "libuv", "mkl-devel"), (), (), "win")
    spec = linkage.PackageSpec(LIBTORCH, prefix, run)
    report = linkage.LinkageCheck(
        [spec], "win", reader=lambda path: needs if path.name == "torch_cpu.dll" else None
    ).run()
    assert report.errors == [
        f"libtorch:Library/bin/torch_cpu.dll need(s) {library}: conda-forge's {package} provides it, but it "
        f"is not a run requirement of libtorch (overlinking)"
        for library, package in (("libiomp5md.dll", "llvm-openmp"), ("MSVCP140.dll", "vc14_runtime"),
                                 ("VCRUNTIME140.dll", "vc14_runtime"), ("VCRUNTIME140_1.dll", "vc14_runtime"))
    ] + [
        f"libtorch:Library/bin/torch_cpu.dll need(s) {library}: conda-forge's ucrt provides it, but it is "
        "not a run requirement of libtorch (overlinking)"
        for library in needs.needed if library.startswith("api-ms-win-crt-")
    ]  # fmt: skip
    assert set(run) == {"libuv", "mkl"}
    with_compiler = linkage.run_requirements((), ("vs2022_win-64", "llvm-openmp", "libuv"), (), (), "win")
    assert set(with_compiler) == {"llvm-openmp", "vc14_runtime", "ucrt", "libuv"}


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


def library_test(command: str) -> tuple[str, bool] | None:
    """A package test command about one library file: its install-tree path (``lib/<name>``, where the
    wheel has it) and whether the test wants it present. unix: ``test -f``/``test ! -e`` of
    ``${PREFIX}/lib/<name>``; win: ``if [not] exist "%LIBRARY_BIN%\\<name>"`` (or ``%LIBRARY_LIB%``)."""
    unix = re.fullmatch(r'test (-f|! -e) "\$\{PREFIX\}/(lib/[^"/]+)"', command)
    if unix:
        return unix[2], unix[1] == "-f"
    win = re.fullmatch(r'if (not )?exist "%LIBRARY_(?:BIN|LIB)%\\([^"\\]+)" exit 1', command)
    if win:
        return f"lib/{win[2]}", bool(win[1])
    return None


@wheels
def test_package_tests_expect_the_libraries_the_wheel_ships(wheel: WheelFixture) -> None:
    rules = rules_for(wheel.shlib)
    rendered = render_recipe(REPO / "recipe", ci_config(wheel.subdir, wheel_cuda(wheel)))
    shipped = {f.path.removeprefix("torch/") for f in wheel.files if f.path.startswith("torch/lib/")}
    tested: set[str] = set()
    for output in rendered.outputs:
        for command in output.test.get("commands", []):
            test = library_test(command)
            if test is None:
                continue
            library, present = test
            if present:
                assert library in shipped, (output.name, library)
                tested.add(library)
            else:
                (rule,) = [r for r in rules if rule_claims(r, "install", library, wheel.shlib)]
                assert library in shipped and rule.package == PYTORCH  # shipped by pytorch, not libtorch
    own = {
        library
        for library in shipped
        for rule in rules
        if rule.package in (LIBTORCH, LIBTORCH_CUDA_LINALG)
        and rule_claims(rule, "install", library, wheel.shlib)
    }
    # every library libtorch gets from the wheel is tested, but the one the conda build has not (NVSHMEM)
    untested = {library for library in own - tested if "nvshmem" not in library}
    assert untested == set()
    assert tested  # the commands were recognised at all
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
    ("name", "cuda", "expected", "blases"),
    [
        # linux-64 builds MKL and generic in one job: its generic builds are checked
        (
            "torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl",
            "13.0",
            "linux_64_c_compiler_version15c_stdlib_version2.28cuda_compiler_version13.0cxx_compiler_version15.yaml",
            ("generic",),
        ),
        # win-64 builds MKL only: its one configuration of that CUDA version
        ("torch-2.13.0-cp312-cp312-win_amd64.whl", None, "win_64_cuda_compiler_versionNone.yaml", ("mkl",)),
    ],
)
def test_a_wheel_is_checked_against_its_platform_configuration(
    tmp_path: Path, name: str, cuda: str | None, expected: str, blases: tuple[str, ...]
) -> None:
    from feedstock_tools.proofs.wheels.wheel_layout import find_config, parse_wheel_name

    wheel = tmp_path / name
    with zipfile.ZipFile(wheel, "w") as archive:  # only torch/version.py, which names the CUDA version
        archive.writestr("torch/version.py", f"cuda: Optional[str] = {cuda!r}\n")
    config = find_config(wheel, parse_wheel_name(wheel))
    assert (config.path.name, config.blases) == (expected, blases)
