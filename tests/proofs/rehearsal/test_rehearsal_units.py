"""The rehearsal harness's own logic, without building anything."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from pathlib import Path

import pytest
from recipe_matrix import RECIPE_VERSION, ci_config

from feedstock_tools.__main__ import main
from feedstock_tools.common.configuration import read_configuration, version_key
from feedstock_tools.common.errors import ToolError
from feedstock_tools.proofs.rehearsal import ninja_log, resolve_config
from feedstock_tools.proofs.rehearsal.harness import REPO_ROOT, Rehearsal, reversed_variants
from feedstock_tools.proofs.rehearsal.plan import Step, conda_build_order, plan_steps, work_name
from feedstock_tools.proofs.rehearsal.relocation import relocated_rpath

CI_SUPPORT = REPO_ROOT / ".ci_support"


def _first(pattern: str) -> Path:
    found = sorted(CI_SUPPORT.glob(pattern))
    if not found:
        pytest.fail(f"no {pattern} in {CI_SUPPORT}")
    return found[0]


def test_plan_gives_each_blas_its_top_level_build_first_and_keeps_render_order() -> None:
    from feedstock_tools.conda.recipe_render import render_recipe

    config = ci_config("linux-64", "12.9")
    steps = plan_steps(config, REPO_ROOT / "recipe")
    rendered = render_recipe(REPO_ROOT / "recipe", config)
    tops = [index for index, step in enumerate(steps) if step.name == "libtorch-split"]
    assert tops[0] == 0 and len(tops) == len(rendered.top_levels) == 2
    for top, start, end in zip(rendered.top_levels, tops, [*tops[1:], len(steps)], strict=True):
        group = steps[start:end]
        blas = top.variant["blas_impl"]
        assert {step.blas for step in group} == {blas} and group[0].variant["blas_impl"] == blas
        assert [step.name for step in group[1:]] == [output.name for output in rendered.outputs_of(top)]
        pythons = [step.python for step in group if step.name == "pytorch"]
        assert "3.14" in pythons and pythons == sorted(pythons, key=version_key)
        magma = {step.variant["magma_variant"] for step in group if step.name == "libtorch-cuda-linalg"}
        assert magma == {"magma", "nomagma"}
        assert not next(step for step in group if step.name == "pytorch-gpu").has_script
    assert len({step.label for step in steps}) == len(steps)  # libtorch-mkl, libtorch-generic, ...
    # a job of one BLAS: its labels name none
    (top,) = [
        s for s in plan_steps(ci_config("osx-arm64"), REPO_ROOT / "recipe") if s.name == "libtorch-split"
    ]
    assert (top.blas, top.label) == (None, "libtorch-split")


def test_every_step_gets_the_recipes_script_env_as_conda_build_passes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NAME=value entries set NAME (the recipe's GPU architectures, the same for every step); a plain name
    passes the caller's value through and is absent when the caller has none (conda/script_env.py)."""
    config = ci_config("linux-64", "12.9").path
    rehearsal = Rehearsal(config, work_root=tmp_path, progress=lambda _: None)
    monkeypatch.setenv("MAX_JOBS", "3")
    monkeypatch.delenv("DEBUG", raising=False)
    # the compiler cache stays beside the work directory, as conda-build's does without the variable
    monkeypatch.setenv("MEGABUILD_COMPILER_CACHE", str(tmp_path / "elsewhere"))
    scripted = [step for step in rehearsal.steps if step.has_script]
    environments = [rehearsal.environment(step) for step in scripted]
    assert not any("MEGABUILD_COMPILER_CACHE" in env for env in environments)
    arch_lists = {env["MEGABUILD_CUDA_ARCH_LIST"] for env in environments}
    (entry,) = {e for step in scripted for e in step.script_env if e.startswith("MEGABUILD_CUDA_ARCH_LIST=")}
    assert arch_lists == {entry.partition("=")[2]} and entry.partition("=")[2]
    assert all(env["MAX_JOBS"] == "3" and "DEBUG" not in env for env in environments)
    assert len(scripted) > 3 and all("MAX_JOBS" in step.script_env for step in scripted)


def _step(name: str, python: str, magma: str = "", blas: str | None = None) -> Step:
    variant = {"magma_variant": magma} if magma else {}
    return Step(name, RECIPE_VERSION, 0, "", variant, True, python, blas=blas)


def test_reversed_variants_keeps_output_names_in_place_and_reverses_the_blas() -> None:
    steps = [
        _step("libtorch-split", "3.10"),
        _step("libtorch-cuda-linalg", "3.10", "magma"),
        _step("libtorch-cuda-linalg", "3.10", "nomagma"),
        _step("libtorch", "3.10"),
        _step("pytorch", "3.10"),
        _step("pytorch", "3.11"),
        _step("pytorch", "3.12"),
    ]
    labels = [step.label for step in reversed_variants(steps)]
    assert labels == [
        "libtorch-split",
        "libtorch-cuda-linalg-nomagma",
        "libtorch-cuda-linalg-magma",
        "libtorch",
        "pytorch-py3.12",
        "pytorch-py3.11",
        "pytorch-py3.10",
    ]
    groups = [_step(n, p, blas=b) for b in ("mkl", "generic") for n, p in [("libtorch-split", "3.10"),
              ("pytorch", "3.10"), ("pytorch", "3.11")]]  # fmt: skip
    assert [step.label for step in reversed_variants(groups)] == [
        "libtorch-split-generic", "pytorch-generic-py3.11", "pytorch-generic-py3.10",
        "libtorch-split-mkl", "pytorch-mkl-py3.11", "pytorch-mkl-py3.10",
    ]  # fmt: skip


def test_conda_builds_order_sorts_names_by_dependency_and_leaves_variants_to_the_seed() -> None:
    """conda-build 26.7.1 (metadata.py 926-982): libtorch runs libtorch-cuda-linalg, pytorch hosts both, the
    metapackage runs pytorch; measured on the CUDA configuration with every PYTHONHASHSEED tried: linalg,
    libtorch, the five pytorch, pytorch-gpu, the variants of one name together in a seed's order."""
    steps = plan_steps(ci_config("linux-64", "12.9"), REPO_ROOT / "recipe")
    names = ["libtorch-split", "libtorch-cuda-linalg", "libtorch", "pytorch", "pytorch-gpu"]
    orders = {seed: conda_build_order(steps, seed) for seed in (None, 0, 1, 2)}
    for ordered in orders.values():
        half = len(ordered) // 2  # one BLAS's top-level build and every output of it, then the other's
        for group in (ordered[:half], ordered[half:]):
            assert len({step.blas for step in group}) == 1
            assert list(dict.fromkeys(step.name for step in group)) == names
        assert sorted(step.label for step in ordered) == sorted(step.label for step in steps)
    generic = [s for s in steps if s.blas == "generic"]
    assert [s.label for s in orders[None]][: len(generic)] == [
        s.label for s in sorted(generic, key=lambda s: names.index(s.name))
    ]
    # the rehearsal's default builds MKL first, as conda-build 26.7.1 did with PYTHONHASHSEED 0
    assert [orders[0][0].blas, orders[None][0].blas] == ["mkl", "generic"]
    pytorch = {seed: [s.python for s in o if s.name == "pytorch"] for seed, o in orders.items()}
    assert len({tuple(p) for p in pytorch.values()}) == len(pytorch)  # the seed decides
    # the rehearsal's default: pass 1's Python after others, the case that made conda-build recompile
    assert pytorch[0].index(steps[0].python) > 0
    looped = [dataclasses.replace(steps[1], host=("libtorch",)), dataclasses.replace(steps[-1], run=("x",))]
    looped[-1] = dataclasses.replace(steps[3], run=(steps[1].name,))
    with pytest.raises(ToolError, match="depend on each other in a circle"):
        conda_build_order([steps[0], *looped], None)


def test_the_environment_is_conda_builds_for_each_step(tmp_path: Path) -> None:
    """TOP_PKG_NAME is the output's own name (build.py 1777) and absent in the top-level build; SP_DIR is
    the first lib/python?.* of the host prefix, whatever the output's Python (utils.py 995-1010)."""
    rehearsal = Rehearsal(_first("linux_64_*cuda_compiler_versionNone*.yaml"), work_root=tmp_path)
    top, pytorch = rehearsal.steps[0], next(s for s in rehearsal.steps if s.python == "3.12")
    assert "TOP_PKG_NAME" not in rehearsal.environment(top)
    env = rehearsal.environment(pytorch)
    assert (env["TOP_PKG_NAME"], env["TOP_PKG_VERSION"], env["PKG_NAME"]) == (
        "pytorch",
        RECIPE_VERSION,
        "pytorch",
    )
    assert env["SP_DIR"] == str(rehearsal.prefix / "lib" / "python3.12" / "site-packages")  # none there yet
    for python in ("3.12", "3.10"):
        (rehearsal.prefix / "lib" / f"python{python}" / "site-packages").mkdir(parents=True)
    env = rehearsal.environment(pytorch)
    assert (env["PY_VER"], env["SP_DIR"]) == ("3.12", str(rehearsal.prefix / "lib/python3.10/site-packages"))


def test_relocated_rpath_follows_conda_build(tmp_path: Path) -> None:
    prefix = tmp_path / "h_env"
    library = prefix / "lib" / "python3.11" / "site-packages" / "torch" / "_C.so"
    entries = ["$ORIGIN/lib", f"{prefix}/lib", "/work/src/build/lib", "relative/dir"]
    assert relocated_rpath(entries, library, prefix) == "$ORIGIN/lib:$ORIGIN/../../.."
    assert relocated_rpath([], prefix / "lib" / "libc10.so", prefix) == "$ORIGIN/."


# Real v5 lines (ninja 1.10/1.11): start and end ms restart at 0 with every ninja run, mtime in ns.
_C10 = "12\t803\t1763730001123456789\tc10/CMakeFiles/c10.dir/core/Device.cpp.o\t8a1b9c2d3e4f5061\n"
_BINDINGS_1 = (
    "15\t1204\t1763730001524000123\ttorch/CMakeFiles/torch_python.dir/csrc/Module.cpp.o\t2f3e4d5c6b7a8190\n"
)
_BINDINGS_2 = (
    "15\t1204\t1763730099871000456\ttorch/CMakeFiles/torch_python.dir/csrc/Module.cpp.o\t2f3e4d5c6b7a8190\n"
)
_LIBRARY = "1204\t1250\t1763730099901000789\tlib/libtorch_python.so\t0a9b8c7d6e5f4031\n"


def test_ninja_log_adapter_reads_a_step_across_appends_and_compaction(tmp_path: Path) -> None:
    """The second ninja run recompiles the bindings (same start/end, newer mtime) and relinks: only that
    object counts, whether ninja appended its lines or compacted the log to one line per output."""
    log = tmp_path / ".ninja_log"
    assert ninja_log.snapshot(log) == {}  # nothing built yet
    log.write_text("# ninja log v5\n" + _C10 + _BINDINGS_1)
    before = ninja_log.snapshot(log)
    bindings = ["torch/CMakeFiles/torch_python.dir/csrc/Module.cpp.o"]
    log.write_text("# ninja log v5\n" + _C10 + _BINDINGS_1 + _BINDINGS_2 + _LIBRARY)
    assert ninja_log.objects_between(before, ninja_log.snapshot(log)) == bindings
    log.write_text("# ninja log v5\n" + _LIBRARY + _BINDINGS_2 + _C10)  # compacted, another order
    assert ninja_log.objects_between(before, ninja_log.snapshot(log)) == bindings
    assert ninja_log.objects_between(ninja_log.snapshot(log), ninja_log.snapshot(log)) == []
    # the driver put the first object back with ninja's own line for it (megabuild/python_products.py):
    # a line seen in an earlier snapshot is no compile
    latest = ninja_log.snapshot(log)
    seen = {*before.values(), *latest.values()}
    log.write_text(log.read_text() + _BINDINGS_1)
    after = ninja_log.snapshot(log)
    assert ninja_log.objects_between(latest, after) == bindings  # without its history, it looks compiled
    assert ninja_log.objects_between(latest, after, seen) == []
    assert ninja_log.targets_of([*bindings, "third_party/x/CMakeFiles/magma.dir/magma.cpp.o"]) == [
        "magma",
        "torch_python",
    ]
    with pytest.raises(ValueError, match="not an object of a CMake target"):
        ninja_log.target_of("lib/libtorch_python.so")
    log.write_text("# ninja log v4\n" + _C10)
    with pytest.raises(ToolError, match="unsupported ninja log header"):
        ninja_log.snapshot(log)


def test_work_names_are_short_and_distinct() -> None:
    names = {work_name(read_configuration(path)) for path in CI_SUPPORT.glob("linux_*.yaml")}
    assert len(names) == len(list(CI_SUPPORT.glob("linux_*.yaml")))
    assert "linux-64_generic+mkl_cuda12.9" in names  # one job, both BLAS
    # the two linux-aarch64 CUDA 12.9 configurations differ only by arm_variant_type
    assert {"linux-aarch64_generic_cuda12.9_sbsa", "linux-aarch64_generic_cuda12.9_tegra"} <= names


def test_config_names_with_dots_resolve() -> None:
    config = _first("linux_64_*cuda_compiler_versionNone*.yaml")
    assert resolve_config(config.name.removesuffix(".yaml")).path == config
    assert resolve_config(str(config)).path == config


def test_a_rehearsal_reads_each_configuration_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default choice (the first linux-64 CUDA configuration) and the plan of its steps read the file
    once: the Configuration is passed on, not read again."""
    from feedstock_tools.common import configuration

    reads: list[str] = []
    real = configuration.read_text
    monkeypatch.setattr(configuration, "read_text", lambda path: reads.append(path.name) or real(path))
    config = resolve_config(None)
    rehearsal = Rehearsal(config.path, configuration=config, work_root=Path(os.devnull))
    assert rehearsal.name == "linux-64_generic+mkl_cuda12.9" and rehearsal.steps
    assert sorted(reads) == sorted(path.name for path in CI_SUPPORT.glob("*.yaml"))  # each once


def test_unknown_config_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rehearse", "linux_64_no_such_configuration"]) == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: no configuration matches 'linux_64_no_such_configuration'; list them")
    assert "\n" not in error


def test_osx_and_windows_are_simulated_and_an_unknown_platform_is_refused() -> None:
    from feedstock_tools.proofs.rehearsal.target import target_for

    rehearsal = Rehearsal(_first("osx_*.yaml"), work_root=Path(os.devnull))
    assert rehearsal.target.macos and rehearsal.target.shlib_ext == ".dylib"
    windows = target_for("win-64", REPO_ROOT)
    assert windows.windows and windows.ext_suffix("312") == ".cp312-win_amd64.pyd"
    with pytest.raises(ToolError, match=r"target_platform win-arm64 cannot be rehearsed .*add it to TARGETS"):
        target_for("win-arm64", REPO_ROOT)


def test_the_build_machine_of_a_target_is_conda_forge_yml_s(tmp_path: Path) -> None:
    from feedstock_tools.proofs.rehearsal.target import target_for

    # this feedstock: macOS on Apple silicon, linux-aarch64 cross-compiled on linux-64
    osx_64, osx_arm64 = target_for("osx-64", REPO_ROOT), target_for("osx-arm64", REPO_ROOT)
    assert (osx_64.build_subdir, osx_64.cross) == ("osx-arm64", True)
    assert (osx_arm64.build_subdir, osx_arm64.cross) == ("osx-arm64", False)
    assert target_for("linux-aarch64", REPO_ROOT).build_subdir == "linux-64"
    (tmp_path / "conda-forge.yml").write_text("build_platform:\n  osx_arm64: osx_64\n")
    assert target_for("osx-arm64", tmp_path).cross and not target_for("osx-64", tmp_path).cross
    (tmp_path / "conda-forge.yml").write_text("build_platform:\n  osx_arm64: win_arm64\n")
    with pytest.raises(ToolError, match=r"^conda-forge.yml builds osx-arm64 on win-arm64, .*fix build_"):
        target_for("osx-arm64", tmp_path)


@pytest.mark.parametrize(
    ("target", "cuda", "expected"),
    [
        # solve_requests.yaml's machine of that subdir, and the configuration's CUDA driver
        (
            "linux-64",
            "12.9",
            ("__unix=0=0", "__linux=6.8=0", "__glibc=2.35=0", "__archspec=1=x86_64", "__cuda=12.9=0"),
        ),
        ("osx-arm64", None, ("__unix=0=0", "__osx=14.5=0", "__archspec=1=m1")),
        # Windows: conda detects __win and no __unix; a unix-only dependency must not solve there
        ("win-64", "12.8", ("__win=10.0.22631=0", "__archspec=1=x86_64", "__cuda=12.8=0")),
    ],
)
def test_the_solver_pick_sees_the_virtual_packages_of_the_target(
    target: str, cuda: str | None, expected: tuple[str, ...]
) -> None:
    from feedstock_tools.proofs.solve.solve_check import machine_of

    assert machine_of(target, cuda).virtual == expected


def test_every_configuration_has_its_machine_in_the_solve_table() -> None:
    """The solver pick of any configuration's rehearsal finds its machine (solve_requests.yaml), and a
    table without it is one line naming the row to add."""
    from feedstock_tools.proofs.solve.solve_check import machine_of

    for path in sorted(CI_SUPPORT.glob("*.yaml")):
        config = read_configuration(path)
        machine = machine_of(config.target_platform, config.cuda)
        assert machine.subdir == config.target_platform
        assert [v for v in machine.virtual if v.startswith("__cuda=")] == (
            [] if config.cuda is None else [f"__cuda={config.cuda}=0"]
        )
    with pytest.raises(ToolError, match=r"has no machine named 'linux-64 cuda9\.9' \(subdir linux-64\): add"):
        machine_of("linux-64", "9.9")


def test_making_a_venv_template_shows_progress_and_a_wait_for_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first run makes the templates for minutes, or waits for another run making them: it says so."""
    import threading

    from feedstock_tools.common import cache_store
    from feedstock_tools.proofs.rehearsal import prefixes

    def make(making: cache_store.Making, *_: object) -> None:  # stands in for uv: only the progress is tested
        (making.staging / "bin").mkdir()

    monkeypatch.setattr(prefixes, "_make_venv_template", make)
    lines: list[str] = []
    cache = tmp_path / "cache"
    name = prefixes.template_dir(cache, "3.12", ()).name
    held = cache_store.EntryLock(cache, name)
    other = cache_store.EntryLock(cache, prefixes.template_dir(cache, "3.11", ()).name)
    # another run holds this template's lock; the lock of another template does not stop it
    assert other.acquire() and held.acquire()
    maker = threading.Thread(
        target=prefixes.venv_template, args=(cache, "3.12", tmp_path / "log", (), lines.append)
    )
    maker.start()
    for _ in range(600):
        if lines:
            break
        threading.Event().wait(0.05)
    held.release()
    other.release()
    maker.join(timeout=300)
    assert lines[0] == f"      waiting for another run that holds {cache / '.locks' / name} ..."
    assert lines[1] == f"      making {name} once (uv from PyPI; log {tmp_path / 'log'}) ..."
    assert re.fullmatch(rf"      made {re.escape(name)} in \d+ s", lines[2])
    assert len(lines) == 3
    again: list[str] = []
    prefixes.venv_template(cache, "3.12", tmp_path / "log", (), again.append)
    assert again == []  # made: nothing to say


def test_the_exit_status_is_made_of_every_verdict(tmp_path: Path) -> None:
    """`rehearse` exits 0 only when the builds, the import checks, the linkage checks and the ratio all
    pass: each failed verdict is one problem line (the first is the command's error line)."""
    from feedstock_tools.proofs.rehearsal.harness import StepResult
    from feedstock_tools.proofs.rehearsal.report import ImportCheck, LinkageCheck, Outcome, WorkRatio

    log = tmp_path / "01.log"
    log.write_text("megabuild error: broken on purpose\n")
    step = _step("libtorch-split", "3.10")
    built = StepResult(step, 0, 1.0, [], ["a.o"], log)
    good = Outcome([step.label], [built], [ImportCheck("pytorch-py3.10", True, "{}")],
                   [LinkageCheck("libtorch", 3, [], [])], WorkRatio(1, 1, 0, 0, 0))  # fmt: skip
    assert (good.problems, good.exit_status) == ([], 0)
    bad = [
        dataclasses.replace(good, results=[dataclasses.replace(built, returncode=2)]),
        dataclasses.replace(good, planned=[step.label, "libtorch"]),
        dataclasses.replace(good, import_checks=[ImportCheck("pytorch-py3.10", False, "ImportError: x")]),
        dataclasses.replace(
            good, linkage_checks=[LinkageCheck("libtorch", 3, ["f need(s) g: no package"], [])]
        ),
        dataclasses.replace(good, ratio=WorkRatio(2, 1, 0, 0, 0)),
    ]
    lines = [outcome.problems for outcome in bad]
    assert [outcome.exit_status for outcome in bad] == [1] * 5
    assert [len(problems) for problems in lines] == [1] * 5
    assert lines[0][0].startswith(
        "libtorch-split: its build script failed with exit 2 ('megabuild error: broken"
    )
    assert lines[1] == ["1 planned step(s) did not run, the first libtorch"]
    assert lines[2] == ["import torch failed in pytorch-py3.10: see the lines above"]
    assert lines[3][0].startswith("linkage of libtorch: f need(s) g: no package (1 unresolved need(s) in all")
    assert lines[4][0].startswith("compile-work ratio 2 / (1 + 0 + 0 x 0) = 2.00, not 1.00")


def test_a_venv_template_holds_pip_and_its_packages_and_nothing_else(tmp_path: Path) -> None:
    """Templates as the rehearsal's first run makes them (uv from PyPI), one copied from the shared base of
    its setuptools: each a venv of its own (its Python's prefix, its pip's shebang) with pip, as conda's
    host prefixes have it, the packages asked for and nothing else (no setuptools where the list has none,
    which CPython 3.11's ensurepip would have left), its bytecode valid where it is (an import writes none),
    and the base left as it was."""
    import subprocess

    from feedstock_tools.proofs.rehearsal import prefixes

    cache, log = tmp_path / "cache", tmp_path / "setup.log"
    plain = prefixes.venv_template(cache, "3.11", log, ("six",))
    copied = prefixes.venv_template(cache, "3.11", log, ("setuptools", "six"))
    base = prefixes.template_dir(cache, "3.11", ("setuptools",))
    assert prefixes.base_packages(("setuptools", "six")) == ("setuptools",)
    assert sorted(cache.glob("venv-3.11-*")) == sorted([plain, copied, base])
    probe = (
        "import importlib.util as u, sys; "
        "print(sys.prefix, *(bool(u.find_spec(name)) for name in ('six', 'pip', 'setuptools')))"
    )

    def answer(venv: Path) -> list[str]:
        run = subprocess.run(
            [venv / "bin" / "python", "-c", probe], capture_output=True, text=True, check=True
        )
        return run.stdout.split()

    assert answer(plain) == [str(plain), "True", "True", "False"]
    assert answer(copied) == [str(copied), "True", "True", "True"]
    assert answer(base) == [str(base), "False", "True", "True"]
    for venv in (plain, copied):
        # uv writes a '#!/bin/sh' script that execs the interpreter where a shebang would pass the kernel's
        # length limit: either way it names this venv's python, and not where the venv was made
        script = (venv / "bin" / "pip").read_text()
        assert f"{venv}/bin/python" in "".join(script.splitlines()[:2]) and ".staging" not in script
        pip = subprocess.run([venv / "bin" / "pip", "--version"], capture_output=True, text=True, check=True)
        assert f"from {venv}/lib/python3.11/site-packages/pip" in pip.stdout

    def bytecode() -> dict[Path, int]:
        return {path: path.stat().st_mtime_ns for path in copied.rglob("*.pyc")}

    compiled = bytecode()
    subprocess.run([copied / "bin" / "python", "-c", "import setuptools, six"], check=True)
    assert compiled and bytecode() == compiled  # none written, none rewritten


def test_only_the_pythons_asked_for_are_rehearsed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``rehearse --python X.Y``: the other Pythons' pytorch outputs are left out (and listed as such), every
    other output stays; a Python the configuration has no output for is one line naming those it has."""
    config = ci_config("linux-aarch64", "cpu").path
    everything = Rehearsal(config, work_root=tmp_path)
    pytorch = sorted(s.python for s in everything.steps if s.name == "pytorch")
    newest = pytorch[-1]
    only = Rehearsal(config, work_root=tmp_path, pythons=frozenset({newest}))
    assert [s.label for s in only.steps if s.name == "pytorch"] == [f"pytorch-py{newest}"]
    assert sorted(s.python for s in only.left_out) == pytorch[:-1]
    assert [s.label for s in only.steps if s.name != "pytorch"] == [
        s.label for s in everything.steps if s.name != "pytorch"
    ]
    with pytest.raises(ToolError, match=rf"^Python 2\.7 has no pytorch output in {re.escape(config.name)} "):
        Rehearsal(config, work_root=tmp_path, pythons=frozenset({"2.7"}))
    assert main(["rehearse", str(config), "--python", "2.7", "--work-dir", str(tmp_path / "w")]) == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: Python 2.7 has no pytorch output") and "\n" not in error
    assert not (tmp_path / "w").exists() or not any((tmp_path / "w").iterdir())


def test_a_cache_lock_held_elsewhere_can_be_passed_by(tmp_path: Path) -> None:
    """``obtain(..., wait=False)``: None at once while another run holds the entry's lock; the local channel
    makes another Python's packages first while another process makes this one's."""
    from feedstock_tools.common import cache_store

    key = cache_store.EntryKey("demo", "3.12", {})
    other_key = cache_store.EntryKey("demo", "3.13", {})

    def make(making: cache_store.Making) -> None:
        (making.staging / "file").write_text("made\n")

    first = cache_store.EntryLock(tmp_path, key.name)  # another open file: another holder, for flock
    assert first.acquire()
    assert cache_store.obtain(tmp_path, key, make, wait=False) is None
    assert cache_store.obtain(tmp_path, other_key, make, wait=False) == tmp_path / other_key.name
    first.release()
    assert cache_store.obtain(tmp_path, key, make, wait=False) == tmp_path / key.name


def test_a_step_that_wrote_through_a_linked_template_removes_it(tmp_path: Path) -> None:
    """Host prefixes are hard links to cache entries (prefixes.py says why): after a step that changed host
    files, an entry it wrote into through a link is removed at once, with a line, and one it left is kept."""
    from feedstock_tools.common import cache_store

    def make(making: cache_store.Making) -> None:
        (making.staging / "lib").mkdir()
        (making.staging / "lib" / "site.pth").write_text("made\n")

    store = tmp_path / "cache"
    written = cache_store.obtain(store, cache_store.EntryKey("venv", "3.12", {"n": 1}), make)
    untouched = cache_store.obtain(store, cache_store.EntryKey("build-env", "3.12", {"n": 2}), make)
    assert written is not None and untouched is not None
    lines: list[str] = []
    config = ci_config("linux-64", "cpu").path
    rehearsal = Rehearsal(config, work_root=tmp_path / "work", cache_root=store, progress=lines.append)
    rehearsal.link_entry(written, tmp_path / "h_env")
    rehearsal.link_entry(untouched, tmp_path / "build_env")
    with (tmp_path / "h_env" / "lib" / "site.pth").open("a") as handle:  # a build step appending
        handle.write("appended\n")
    rehearsal.check_linked_entries(rehearsal.steps[0])
    assert not written.exists() and untouched.exists()
    assert lines == [
        f"      cache: {rehearsal.steps[0].label} changed {written.name} (lib/site.pth changed (size 14, "
        "manifest 5)): removed it"
    ]


def test_the_scripts_written_into_a_prefix_run_what_they_name_from_a_path_of_any_name(tmp_path: Path) -> None:
    """cross-python's shim and python3.X-config name an interpreter by its path, quoted by shlex: a cache or
    a pyenv under a directory with a space, a quote and a "$" in its name runs that interpreter."""
    from feedstock_tools.proofs.rehearsal import target

    odd = tmp_path / 'run #2 "$HOME"'
    for name in ("python", "python3.12-config"):
        (odd / "bin").mkdir(parents=True, exist_ok=True)
        (odd / "bin" / name).write_text(f'#!/bin/sh\necho "{name} ran with $*"\n')
        (odd / "bin" / name).chmod(0o755)
    shim = tmp_path / "shim"
    shim.write_text(target.cross_python_shim(odd))
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    target.write_python_config(prefix, "3.12", target.TARGETS["linux-aarch64"], odd / "bin" / "python")
    config = prefix / "bin" / "python3.12-config"
    for script, said in ((shim, "python ran with -V"), (config, "python3.12-config ran with -V")):
        out = subprocess.run(["sh", str(script), "-V"], capture_output=True, text=True, check=True).stdout
        assert out == said + "\n"


def test_the_compile_work_limit_counts_each_dependence_once_per_value() -> None:
    """compile_work.limit's terms from declared dependence: a BLAS- and Python-dependent object of a
    Python-linked target compiles once per Python for every further BLAS, a BLAS-only one there once, MAGMA's
    once; without a cache (depends None) every object of a changed target counts, the whole of pass 1 for
    a further BLAS."""
    from feedstock_tools.proofs.rehearsal import compile_work

    objects = {
        "c10/CMakeFiles/c10.dir/core/A.cpp.o": set(),
        "caffe2/CMakeFiles/torch_cpu.dir/B.cpp.o": {"blas"},
        "caffe2/torch/CMakeFiles/torch_python.dir/C.cpp.o": {"blas", "python"},
        "caffe2/torch/CMakeFiles/torch_python.dir/D.cpp.o": {"blas"},
        "caffe2/torch/CMakeFiles/torch_python.dir/E.cpp.o": {"python"},
        "caffe2/CMakeFiles/torch_cuda_linalg.dir/F.cpp.o": {"magma"},
        "caffe2/CMakeFiles/torch_cuda_linalg.dir/G.cpp.o": set(),
    }
    depends = {kind: {o for o, kinds in objects.items() if kind in kinds} for kind in compile_work.KINDS}
    terms = {"pass1_objects": list(objects), "python_linked": {"torch_python"}, "magma_ran": True}
    ratio = compile_work.limit(compiled=0, depends=depends, extra_pythons=2, extra_blases=1, **terms)
    assert (ratio.pass1, ratio.linalg, ratio.python_bindings) == (7, 1, 2)
    assert (ratio.blas, ratio.blas_static, ratio.blas_python) == (1, 1, 1)
    assert ratio.expected == 7 + 1 + 2 * 2 + 1 * (1 + 1 + 1 * 3)
    uncached = compile_work.limit(compiled=0, depends=None, extra_pythons=2, extra_blases=1, **terms)
    assert (uncached.linalg, uncached.python_bindings) == (2, 3)
    assert uncached.expected == 7 + 2 + 3 * 2 + 1 * (7 + 3 * 2)
