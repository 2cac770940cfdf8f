"""The scripts the package tests run (recipe/tests/), on libraries and a torch test double made here."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "recipe" / "tests"


def load(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(SCRIPTS))
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def compile_library(directory: Path, name: str, source: str, *flags: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.c").write_text(source)
    output = directory / name
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(output), str(directory / f"{name}.c"), *flags], check=True
    )
    return output


@pytest.fixture(scope="module")
def linalg_builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """libtorch_cuda_linalg.so stand-ins: one linked to a libmagma.so.2, one not."""
    root = tmp_path_factory.mktemp("linalg")
    magma_dir, nomagma_dir = root / "magma", root / "nomagma"
    compile_library(
        magma_dir, "libmagma.so.2", "int magma_init(void) { return 0; }\n", "-Wl,-soname,libmagma.so.2"
    )
    (magma_dir / "libmagma.so").symlink_to("libmagma.so.2")
    source = "int magma_init(void);\nint linalg(void) { return magma_init(); }\n"
    magma = compile_library(magma_dir, "libtorch_cuda_linalg.so", source, f"-L{magma_dir}", "-lmagma", "-lm")
    nomagma = compile_library(
        nomagma_dir, "libtorch_cuda_linalg.so", "int linalg(void) { return 1; }\n", "-lm"
    )
    return {"magma": magma, "nomagma": nomagma}


def readelf_needed(library: Path) -> list[str]:
    dynamic = subprocess.run(
        ["readelf", "-d", str(library)], capture_output=True, text=True, check=True
    ).stdout
    return [line.split("[", 1)[1].rstrip("]") for line in dynamic.splitlines() if "(NEEDED)" in line]


def test_needed_entries_match_readelf(linalg_builds, monkeypatch):
    checker = load("check_linalg_needed", monkeypatch)
    for library in linalg_builds.values():
        assert checker.needed_libraries(library) == readelf_needed(library)
    assert "libmagma.so.2" in checker.needed_libraries(linalg_builds["magma"])


@pytest.mark.parametrize(
    "case",
    [("magma", "magma", 0), ("nomagma", "nomagma", 0), ("magma", "nomagma", 1), ("nomagma", "magma", 1)],
    ids=lambda case: f"{case[0]}-build-checked-as-{case[1]}",
)
def test_linalg_check_accepts_only_the_matching_variant(linalg_builds, monkeypatch, capsys, case):
    build, variant, status = case
    checker = load("check_linalg_needed", monkeypatch)
    assert checker.main([str(linalg_builds[build]), f"--magma={variant}"]) == status
    if status:
        assert "FAIL" in capsys.readouterr().err


def test_linalg_check_names_a_file_that_is_no_library(tmp_path, monkeypatch, capsys):
    checker = load("check_linalg_needed", monkeypatch)
    text = tmp_path / "libtorch_cuda_linalg.so"
    text.write_text("not a library\n")
    assert checker.main([str(text), "--magma=magma"]) == 1
    assert "not a 64-bit little-endian ELF file" in capsys.readouterr().err
    assert checker.main([str(tmp_path / "missing.so"), "--magma=magma"]) == 1


# what torch.__config__.show() prints, reduced to the lines the check reads
CONFIG = (
    "PyTorch built with:\n  - CUDA Runtime 12.9\n{magma}  - Build settings: BLAS_INFO={blas}, DEBUG=OFF\n"
)


@pytest.mark.parametrize("build", ["magma", "nomagma"])
def test_config_check_follows_the_installed_linalg_library(linalg_builds, monkeypatch, build):
    config_check = load("check_torch_config", monkeypatch)
    magma_line = "  - Magma (libmagma.so.2, linked by libtorch_cuda_linalg)\n" if build == "magma" else ""
    right = CONFIG.format(magma=magma_line, blas="mkl")
    library = linalg_builds[build]
    assert config_check.problems(right, build == "magma", "mkl", True, library) == []
    assert config_check.problems(right, build != "magma", "mkl", True, library)  # has_magma disagrees
    assert config_check.problems(right, build == "magma", "generic", True, library)  # wrong BLAS


def test_config_check_of_cpu_builds_expects_no_magma(monkeypatch):
    config_check = load("check_torch_config", monkeypatch)
    assert config_check.problems(CONFIG.format(magma="", blas="generic"), False, "generic", False, None) == []
    assert config_check.problems(CONFIG.format(magma="", blas="generic"), True, "generic", False, None)


def write_torch_test_double(root: Path, lib_dir: Path, config: str, has_magma: bool) -> Path:
    """A stand-in ``torch`` package (test double): __config__.show(), cuda.has_magma, lib/ of the linalg."""
    package = root / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        textwrap.dedent(
            f"""\
            # test double of torch for recipe/tests/check_torch_config.py
            import types
            __config__ = types.SimpleNamespace(show=lambda: {config!r})
            cuda = types.SimpleNamespace(has_magma={has_magma!r})
            """
        )
    )
    (package / "lib").symlink_to(lib_dir)
    return root


@pytest.mark.parametrize(("has_magma", "status"), [(True, 0), (False, 1)])
def test_config_check_runs_against_an_installed_torch(linalg_builds, tmp_path, has_magma, status):
    config = CONFIG.format(magma="  - Magma (libmagma.so.2)\n", blas="generic")
    root = write_torch_test_double(tmp_path, linalg_builds["magma"].parent, config, has_magma)
    result = subprocess.run(
        [sys.executable, str(SCRIPTS / "check_torch_config.py"), "--blas=generic", "--cuda=yes"],
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == status, result.stderr


@pytest.fixture
def upstream_tree(tmp_path: Path) -> Path:
    tests = tmp_path / "test"
    tests.mkdir()
    (tests / "test_good.py").write_text(
        "def test_one():\n    assert 1 + 1 == 2\n\ndef test_two():\n    pass\n"
    )
    (tests / "test_bad.py").write_text("def test_broken():\n    assert False, 'upstream failure'\n")
    return tmp_path


def test_upstream_runner_passes_fails_and_respects_keywords(upstream_tree, monkeypatch):
    runner = load("run_upstream_tests", monkeypatch)
    good = runner.Selection("test/test_good.py", None, "passes")
    bad = runner.Selection("test/test_bad.py", None, "fails")
    only_good_by_keyword = runner.Selection("test/test_good.py", "one", "keyword")
    assert runner.run((good, only_good_by_keyword), upstream_tree, budget=120) == 0
    assert runner.run((good, bad), upstream_tree, budget=120) == 1


def test_upstream_runner_reports_missing_files_and_a_used_up_budget(upstream_tree, monkeypatch, capsys):
    runner = load("run_upstream_tests", monkeypatch)
    missing = runner.Selection("test/test_absent.py", None, "missing")
    assert runner.run((missing,), upstream_tree, budget=120) == 1
    assert "test/test_absent.py missing" in capsys.readouterr().err
    good = runner.Selection("test/test_good.py", None, "passes")
    # selections the budget did not reach were not run: that fails, naming them
    assert runner.run((good,), upstream_tree, budget=0) == 1
    assert "used up before these selections ran: test/test_good.py" in capsys.readouterr().err


def test_upstream_runner_fails_a_selection_that_selects_nothing(upstream_tree, monkeypatch, capsys):
    runner = load("run_upstream_tests", monkeypatch)
    renamed = runner.Selection("test/test_good.py", "test_renamed_upstream", "keyword matches nothing")
    assert runner.run((renamed,), upstream_tree, budget=120) == 1
    assert "selected no test" in capsys.readouterr().err


def test_upstream_runner_deselects_the_skip_list(upstream_tree, monkeypatch):
    runner = load("run_upstream_tests", monkeypatch)
    bad = runner.Selection("test/test_bad.py", None, "fails")
    both = runner.Selection("test/test_good.py", None, "passes")
    skip = runner.Skip("test_broken", "known upstream failure", "test double")
    assert runner.run((bad,), upstream_tree, budget=120) == 1
    # test_bad.py has only the skipped test: nothing left is "selected no test", a failure too
    assert runner.run((bad,), upstream_tree, budget=120, skips=(skip,)) == 1
    assert runner.run((both,), upstream_tree, budget=120, skips=(skip,)) == 0
    command = runner.pytest_command(runner.Selection("test/test_good.py", "one", "k"), (skip,))
    assert command[-2:] == ["-k", "(one) and not ((test_broken))"]


def test_skip_list_entries_give_reason_and_evidence(monkeypatch):
    runner = load("run_upstream_tests", monkeypatch)
    for skip in runner.SKIPS:
        assert len(skip.why) > 15 and skip.where in {"all", "aarch64", "cuda"}
        assert skip.evidence.startswith("conda-forge/pytorch-cpu-feedstock 74dd3d46 recipe/meta.yaml:")
    cpu_x86 = runner.skips_for("cpu", "x86_64")
    assert all(skip.where == "all" for skip in cpu_x86)
    assert set(cpu_x86) < set(runner.skips_for("cuda", "aarch64"))


def test_curated_selections_name_upstream_test_files(monkeypatch):
    runner = load("run_upstream_tests", monkeypatch)
    cpu, cuda = runner.selections_for("cpu"), runner.selections_for("cuda")
    assert set(cpu) < set(cuda)
    assert all(s.path.startswith("test/test_") and s.path.endswith(".py") for s in cuda)
    assert any("linalg" in s.path for s in cpu)


def test_emulated_runs_take_only_the_cheap_selections_on_the_cpu(upstream_tree, monkeypatch, capsys):
    runner = load("run_upstream_tests", monkeypatch)
    emulated = runner.selections_for("cuda", emulated=True)
    assert [s.path for s in emulated] == ["test/test_torch.py", "test/test_linalg.py"]
    assert set(emulated) < set(runner.selections_for("cpu"))
    # --emulated needs no GPU probe (no torch import) and names what it would run
    status = runner.main(["--emulated", "--budget-seconds=60", f"--source-dir={upstream_tree}"])
    assert status == 1
    assert "test/test_torch.py, test/test_linalg.py missing under" in capsys.readouterr().err


# ---- check_cuda_arch_list.py: the build's list, torch's, the recipe's __cuda_arch bound and the GPUs -------

# lists of the kinds the recipe has, not its own (a test states none of the recipe's lists: they change):
# one from Turing with a major 11 (CUDA 13's kind), one with Pascal's and no major 11 (CUDA 12's kind)
LIST_13_0 = "7.5;8.0;8.6;9.0;11.0;12.0+PTX"
TORCH_13_0 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_110", "sm_120", "compute_120"]
LIST_12 = "5.2;6.0;7.0;8.0;8.6;10.0;12.0+PTX"


def test_arch_check_agrees_only_when_build_torch_and_recipe_agree(monkeypatch):
    check = load("check_cuda_arch_list", monkeypatch)
    assert check.torch_names(*check.parse_arch_list(LIST_13_0)) == TORCH_13_0
    assert check.problems(LIST_13_0, TORCH_13_0, "7.5", []) == []
    assert check.problems(LIST_13_0, list(reversed(TORCH_13_0)), "7.5", []) == []  # order is torch's own
    (no_ptx,) = check.problems(LIST_13_0, TORCH_13_0[:-1], "7.5", [])
    assert "torch.cuda.get_arch_list() is" in no_ptx and "compute_120" in no_ptx
    (bound,) = check.problems(LIST_13_0, TORCH_13_0, "6.0", [])
    assert "constrains __cuda_arch >=6.0, the oldest architecture of the build is 7.5" in bound
    (unset,) = check.problems(None, TORCH_13_0, "7.5", [])
    assert "CF_TORCH_CUDA_ARCH_LIST is not set" in unset
    (bad,) = check.problems("7.5;sm_80", TORCH_13_0, "7.5", [])
    assert "'sm_80'" in bad


@pytest.mark.parametrize(
    ("device", "arch_list", "covered"),
    [
        ((6, 1), LIST_12, True),  # Pascal: sm_60's code
        ((8, 9), LIST_13_0, True),  # Ada runs sm_86's code
        ((12, 1), LIST_13_0, True),
        ((13, 0), LIST_13_0, True),  # a newer GPU: the driver compiles compute_120
        ((8, 7), LIST_12, False),  # Orin: not dGPU code
        ((8, 7), "8.7+PTX", True),
        ((11, 0), LIST_12, False),  # no major 11 in the 12.x lists
        ((7, 0), LIST_13_0, False),
    ],
)
def test_arch_check_covers_a_device_by_cuda_rules(monkeypatch, device, arch_list, covered):
    check = load("check_cuda_arch_list", monkeypatch)
    assert check.covers(device, *check.parse_arch_list(arch_list)) is covered


def test_arch_check_names_a_gpu_below_the_bound_or_uncovered(monkeypatch):
    check = load("check_cuda_arch_list", monkeypatch)
    arch_list = LIST_12
    torch = check.torch_names(*check.parse_arch_list(arch_list))
    below, uncovered = check.problems(arch_list, torch, "5.2", [(3, 7), (11, 0), (6, 1)])
    assert "GPU 0 (3.7) is below __cuda_arch >=5.2" in below
    assert f"GPU 1 (11.0) is not covered by {arch_list}" in uncovered


def write_cuda_torch_double(root: Path, arch_list: list[str], devices: list[tuple[int, int]]) -> Path:
    """A stand-in ``torch`` package (test double): torch.cuda's arch list, devices and an elementwise op."""
    package = root / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        textwrap.dedent(
            f"""\
            # test double of torch for recipe/tests/check_cuda_arch_list.py
            import types
            _devices = {devices!r}
            class _Tensor:
                def __init__(self, values): self.values = values
                def __mul__(self, k): return _Tensor([v * k for v in self.values])
                def sum(self): return _Tensor([sum(self.values)])
                def item(self): return float(self.values[0])
            def ones(n, device=None): return _Tensor([1.0] * n)
            cuda = types.SimpleNamespace(
                is_available=lambda: bool(_devices),
                device_count=lambda: len(_devices),
                get_device_capability=lambda i: _devices[i],
                get_arch_list=lambda: {arch_list!r},
            )
            """
        )
    )
    return root


@pytest.mark.parametrize(
    ("environ", "devices", "status", "gpu"),
    [
        ({"CF_TORCH_CUDA_ARCH_LIST": LIST_13_0}, [], 0, "none: the build's lists are checked, no device"),
        ({"CF_TORCH_CUDA_ARCH_LIST": LIST_13_0}, [(9, 0)], 0, True),
        ({"CF_TORCH_CUDA_ARCH_LIST": LIST_13_0}, [(6, 1)], 1, True),
        ({}, [], 1, "none: the build's lists are checked, no device"),
    ],
)
def test_arch_check_runs_against_an_installed_torch(tmp_path, environ, devices, status, gpu):
    root = write_cuda_torch_double(tmp_path, TORCH_13_0, devices)
    result = subprocess.run(
        [sys.executable, str(SCRIPTS / "check_cuda_arch_list.py"), "--cuda-arch-min=7.5"],
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", **environ},
    )
    assert result.returncode == status, result.stderr
    report = json.loads(result.stdout)
    assert report["gpu"] == gpu and report["devices"] == ["{}.{}".format(*d) for d in devices]
