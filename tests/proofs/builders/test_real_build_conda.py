"""``real-build --builder conda-build`` (feedstock_tools/proofs/builders/real_build_conda.py) and what both
builders' runs share (build_watch.py): finding a real conda-build, the meta.yaml copy, the one-line refusals,
progress and interruption. The real conda-build build itself runs only where a real conda-build is named
(``CONDA_TOOLS``); CI has none and skips it with that reason (docs/reference/real-build.md, "The real
conda-build")."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from bump_fixtures import copy_feedstock
from real_build_outcome import assert_a_job_of_both_blas

from feedstock_tools.__main__ import main
from feedstock_tools.common.configuration import read_configuration
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.common.run_lock import RunLock
from feedstock_tools.conda.recipe_render import render_recipe
from feedstock_tools.proofs.builders import real_build, real_build_conda
from feedstock_tools.proofs.builders.build_watch import BuildWatch

CI_SUPPORT = REPO_ROOT / ".ci_support"
CPU_CONFIG = next(CI_SUPPORT.glob(real_build.DEFAULT_CONFIG + ".yaml"))


def test_without_a_conda_build_the_command_says_how_to_get_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["real-build", "--builder", "conda-build", "--conda-tools", str(tmp_path), "--work-dir",
                   str(tmp_path / "work")])  # fmt: skip
    error = capsys.readouterr().err.strip()
    assert status == 1 and "\n" not in error
    assert error.startswith(f"error: real-build --builder conda-build: no real conda-build at {tmp_path}")
    assert "copy ../shared/tools/conda-tools somewhere writable, run its setup.sh" in error
    assert not (tmp_path / "work").exists()


def _plant_tool_set(root: Path, marker: Path) -> Path:
    """A tool set laid out as the README says whose env.sh, once sourced, leaves ``marker``."""
    (root / "conda-build").mkdir(parents=True)
    (root / "conda-build" / "cb.py").write_text("")
    # as the tool set's env.sh does: CF_TOOLS_VENV made absolute, from the tool set's directory
    here = 'CF_TOOLS_VENV="$(dirname "${BASH_SOURCE[0]}")/$CF_TOOLS_VENV"'
    (root / "env.sh").write_text(f"touch {shlex.quote(str(marker))}\n{here}\n")
    (root / real_build_conda.VENV / "bin").mkdir(parents=True)
    (root / real_build_conda.VENV / "bin" / "python").symlink_to(sys.executable)
    return root


def test_a_tool_set_beside_the_checkout_is_never_used(tmp_path: Path) -> None:
    """A clone in a shared directory: anyone who can write its parent plants ../tools/conda-tools and
    ../shared/tools/conda-tools (both once searched). With neither --conda-tools nor CONDA_TOOLS, real-build
    is one line saying how to get and name a tool set, sources nothing and writes nothing."""
    checkout = copy_feedstock(tmp_path / "checkout", REPO_ROOT, ("feedstock_tools", "recipe", ".ci_support"))
    marker = tmp_path / "planted-env-sh-ran"
    for planted in (tmp_path / "tools" / "conda-tools", tmp_path / "shared" / "tools" / "conda-tools"):
        _plant_tool_set(planted, marker)
    environ = {k: v for k, v in os.environ.items() if k != real_build_conda.TOOLS_VARIABLE}
    environ["PYTHONPATH"] = str(checkout)
    work = tmp_path / "work"
    run = subprocess.run(
        [sys.executable, "-m", "feedstock_tools", "real-build", "--builder", "conda-build", "--work-dir",
         str(work)],
        cwd=checkout, env=environ, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    error = run.stderr.strip()
    assert run.returncode == 1 and "\n" not in error, run.stderr
    assert error.startswith(
        "error: real-build --builder conda-build: no conda-build named (--conda-tools DIR"
    )
    assert error.endswith("then pass --conda-tools DIR or set CONDA_TOOLS")
    assert not marker.exists() and not work.exists()


def test_a_tool_set_is_taken_where_its_readme_lays_it_out(tmp_path: Path) -> None:
    """Named by CONDA_TOOLS; its env.sh sourced and the overrides exported, quoted by shlex, as bash runs it
    (the path of the tool set with a space and a quote in it)."""
    marker = tmp_path / "sourced"
    root = _plant_tool_set(tmp_path / "tool set 'a'", marker)
    (root / "conda-build" / "cb.py").write_text(
        "import os, sys; print(os.environ['CONDA_PKGS_DIRS'], sys.argv[1:])"
    )
    tools = real_build_conda.find_conda_tools(None, {real_build_conda.TOOLS_VARIABLE: str(root)})
    assert tools.root == root.resolve()
    command = tools.invocation(["recipe", "-m", "v.yaml"], {"CONDA_PKGS_DIRS": "/x y/$HOME"})
    assert command[:2] == ["bash", "-c"] and command[3:] == ["conda-build", "recipe", "-m", "v.yaml"]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    assert out == "/x y/$HOME ['recipe', '-m', 'v.yaml']\n" and marker.exists()


def test_a_configuration_of_another_platform_stops_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["real-build", "win_64_cuda_compiler_versionNone", "--work-dir", str(tmp_path)]) == 1
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "win_64_cuda_compiler_versionNone targets win-64" in error
    assert error.endswith(
        "rehearse it instead (python -m feedstock_tools rehearse win_64_cuda_compiler_versionNone)"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_second_build_of_a_work_directory_in_use_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """While a run holds the work directory's lock (the rehearsal's RunLock, held here by the test), a
    second real-build of it is one line, before anything is rendered or removed: the first run's files
    stay (without the lock it went on, emptied the directory and built)."""
    name = CPU_CONFIG.stem
    first_run = tmp_path / name / "output" / "kept.conda"
    first_run.parent.mkdir(parents=True)
    first_run.write_bytes(b"the first run's")
    with RunLock(tmp_path / f".{name}.lock", "the first real-build"):
        status = main(["real-build", "--work-dir", str(tmp_path)])
    error = capsys.readouterr().err.strip()
    assert status == 1 and "\n" not in error
    assert error.startswith(
        f"error: real-build work directory {tmp_path / name} is in use by another run (pid"
    )
    assert first_run.read_bytes() == b"the first run's"


def test_the_meta_yaml_copy_differs_in_what_the_standin_forces(tmp_path: Path) -> None:
    """The stand-in as source, no license files, the named test commands and missing test sources left out;
    everything else the recipe's, as the project's render reads it for a CPU and a CUDA configuration."""
    copy, left_out = real_build_conda.prepare_recipe(
        REPO_ROOT / "recipe", tmp_path / "recipe", real_build.STANDIN, real_build.TESTS_THAT_NEED_REAL_PYTORCH
    )
    text = (copy / "meta.yaml").read_text()
    assert f"source:\n  path: {real_build.STANDIN}\n" in text
    assert "license_file" not in text and "patches/" not in text and not (copy / "patches").exists()
    fragments = {o: [f for f, _ in skips] for o, skips in real_build.TESTS_THAT_NEED_REAL_PYTORCH.items()}
    assert {o.output for o in left_out} == {"libtorch", "pytorch"}
    assert real_build_conda.LeftOut("pytorch", "source_files: test") in left_out
    for config in (CPU_CONFIG, next(CI_SUPPORT.glob(real_build.CUDA_CONFIG + ".yaml"))):
        original = {(o.name, o.build_string): o for o in render_recipe(REPO_ROOT / "recipe", config).outputs}
        copied = {(o.name, o.build_string): o for o in render_recipe(copy, config).outputs}
        assert copied.keys() == original.keys()
        for key, output in copied.items():
            before = original[key].test.get("commands") or []
            after = output.test.get("commands") or []
            dropped = [c for c in before if any(f in c for f in fragments.get(key[0], ()))]
            assert after == [c for c in before if c not in dropped], key
            assert output.requirements == original[key].requirements


@pytest.mark.parametrize("parent", ["run #2", "job: 7"])
def test_the_standin_path_reaches_the_copy_whole(tmp_path: Path, parent: str) -> None:
    """A checkout at /home/ci/run #2/ or /srv/job: 7/: written as it was, the first path became
    /home/ci/run (YAML's comment) and the second a ScannerError; written by the YAML serializer, the
    rendered recipe's source is the stand-in's path, whole."""
    standin = tmp_path / parent / "upstream_standin"
    standin.mkdir(parents=True)
    copy, _ = real_build_conda.prepare_recipe(
        REPO_ROOT / "recipe", tmp_path / "recipe", standin, real_build.TESTS_THAT_NEED_REAL_PYTORCH
    )
    top_level = render_recipe(copy, CPU_CONFIG).top_level
    assert top_level is not None and top_level.source == {"path": str(standin)}


def test_the_report_wrapper_copies_into_a_work_directory_of_any_name(tmp_path: Path) -> None:
    """build.sh's wrapper names the reports directory through shlex: a work directory under "run #2" with a
    "$" and a quote in its name gets each pass's report, ninja log, pass 1's state and compile database."""
    recipe_dir, source = tmp_path / "recipe", tmp_path / "src"
    (source / "build" / "megabuild").mkdir(parents=True)
    (source / "build" / "megabuild-report.json").write_text("{}")
    (source / "build" / ".ninja_log").write_text("# ninja log v5\n")
    (source / "build" / "megabuild" / "pass1.json").write_text('{"blas": "MKL"}')
    ninja_file = "rule cc\n  command = cc -c $in -o $out\nbuild a.o: cc a.c\n"
    (source / "build" / "build.ninja").write_text(ninja_file)
    recipe_dir.mkdir()
    (recipe_dir / "build.sh").write_text("true\n")
    reports = tmp_path / "run #2" / "it's $HOME" / "reports"
    reports.mkdir(parents=True)
    real_build.wrap_build_script(recipe_dir, reports)
    environ = {**os.environ, "RECIPE_DIR": str(recipe_dir), "SRC_DIR": str(source)}
    subprocess.run(["bash", str(recipe_dir / "build.sh")], env=environ, check=True)
    assert sorted(path.suffix for path in reports.iterdir()) == [".compdb", ".json", ".ninja_log", ".pass1"]
    (database,) = json.loads(next(reports.glob("*.compdb")).read_text())
    assert (database["output"], database["file"]) == ("a.o", "a.c")


def test_a_standin_path_conda_build_would_read_as_jinja_or_a_selector_is_refused(tmp_path: Path) -> None:
    for parent in ("run {{ 2 }}", "x # [win]"):
        with pytest.raises(ToolError, match=r"holds a Jinja mark or a \[selector\]"):
            real_build_conda.with_source("source:\n  url: x\n", tmp_path / parent)


def test_a_stale_left_out_test_is_named() -> None:
    with pytest.raises(ToolError, match=r"no test command of recipe/meta.yaml contains pytorch: 'gone'"):
        real_build_conda.without_tests(
            (REPO_ROOT / "recipe" / "meta.yaml").read_text(), {"pytorch": (("gone", "x"),)}
        )


# ---- progress and interruption (both builders run through BuildWatch) ----------------------------------

WATCHED = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from feedstock_tools.common import interruption
    from feedstock_tools.proofs.builders.build_watch import BuildWatch

    work = Path(sys.argv[1])
    (work / "reports").mkdir()
    # a builder that starts a build script, which starts a long compile, and says which output it builds
    script = "echo '[megabuild] PKG_NAME=libtorch-split'; sleep 300 & echo $! > compile.pid; wait"
    with interruption.handled():
        try:
            watch = BuildWatch("builder", work / "reports", work / "builder.log")
            watch.run(["bash", "-c", script], {}, work)
        except interruption.Interrupted as exc:
            sys.exit(exc.exit_status)
    """
)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=lambda s: signal.Signals(s).name)
def test_an_interrupted_build_stops_its_builder_and_what_it_started(tmp_path: Path, signum: int) -> None:
    """A signal to real-build alone (`kill`, a CI cancel) stops the builder's whole process group: the
    builder and the compile its script started, within the watch's grace (build_watch.STOP_GRACE_SECONDS)."""
    process = subprocess.Popen(
        [sys.executable, "-c", WATCHED, str(tmp_path)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "building libtorch-split ..."  # the driver's line, seen
    compile_pid = int((tmp_path / "compile.pid").read_text())
    process.send_signal(signum)
    assert process.wait(timeout=60) == 128 + signum
    assert not running(compile_pid)


def running(pid: int) -> bool:
    """A process that exists and is no zombie (a killed orphan stays one until its new parent reaps it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_failed_build_is_one_line_naming_the_output_and_leaves_no_packages(tmp_path: Path) -> None:
    log = tmp_path / "builder.log"
    log.write_text(
        "[megabuild] PKG_NAME=pytorch SRC_DIR=/w PREFIX=/p\nmegabuild error: SP_DIR=/p/lib/python3.10/site-"
        "packages is not the site-packages of this output's Python 3.12\nTests failed\n"
    )
    packages = tmp_path / "output" / "linux-64"
    packages.mkdir(parents=True)
    (packages / "libtorch-1.0-x_0.conda").write_bytes(b"")
    watch = BuildWatch("conda-build", tmp_path, log, progress=lambda line: None)
    line = watch.failure("cfg", packages)
    assert line.startswith(
        "conda-build failed on output pytorch of cfg (step: build): megabuild error: SP_DIR="
    )
    assert "\n" not in line and line.endswith(f"read {log}, fix the recipe or the driver and run again")
    assert not packages.exists()
    # rattler-build keeps the build scripts' logs in its work directories: the output is read from there
    script_log = tmp_path / "conda_build.log"
    script_log.write_text("[megabuild] PKG_NAME=libtorch-cuda-linalg SRC_DIR=/w\n")
    other = BuildWatch(
        "rattler-build", tmp_path, tmp_path / "empty.log", lambda line: None, lambda: [script_log]
    )
    (tmp_path / "empty.log").write_text("Error: Script failed to execute\n")
    line = other.failure("cfg", packages)
    assert line.startswith("rattler-build failed on output libtorch-cuda-linalg of cfg (step: build): Error:")
    assert f"read {script_log}," in line


# ---- the real conda-build (where one is named) --------------------------------------------------------


@pytest.mark.skipif(
    not os.environ.get(real_build_conda.TOOLS_VARIABLE),
    reason=f"no real conda-build (CI has none): {real_build_conda.HOW_TO_GET}",
)
def test_conda_build_builds_and_tests_the_cpu_job(tmp_path: Path) -> None:
    """The real conda-build 26.7.1 builds and tests every output of recipe/meta.yaml for linux-64's CPU job
    (both BLAS), its own order, at the compile-work limit (docs/reference/real-build.md)."""
    config = read_configuration(CPU_CONFIG)
    pythons = real_build.default_pythons(config)
    outcome = real_build.run_build(
        config, tmp_path / "work", real_build.DEFAULT_CACHE, pythons,
        builder="conda-build", progress=lambda line: None,
    )  # fmt: skip
    chosen = [p.spec for p in config.pythons if p.version in pythons]
    expected = [o.name for o in render_recipe(REPO_ROOT / "recipe", config).outputs
                if o.name != "pytorch" or o.variant["python"] in chosen]  # fmt: skip
    assert_a_job_of_both_blas(outcome, config, expected, tmp_path / "extracted")


def test_two_builders_packages_are_compared_file_by_file(tmp_path: Path) -> None:
    from feedstock_tools.proofs.builders import local_channel, package_diff

    def package(side: str, build: str, files: dict[str, bytes]) -> Path:
        (tmp_path / side).mkdir(exist_ok=True)
        draft = local_channel.PackageDraft("libtorch", "1.0", build, files=dict(files))
        return local_channel.write_package(draft, tmp_path / side)

    same = {"lib/libc10.so": b"\x7fELF", "include/c10/c10.h": b"//"}
    ours = [package("cb", "cpu_generic_h1234567_0", same)]
    theirs = [package("rb", "cpu_generic_h89abcde_0", {**same, "lib/python3.10/x/__pycache__/y.pyc": b"."})]
    differences = package_diff.compare(ours, theirs)
    assert [(d.key, d.only_first, d.only_second, d.common) for d in differences] == [
        ("libtorch 1.0 cpu_generic_h*_0", (), ("lib/python3.10/x/__pycache__/y.pyc",), 2)
    ]
    assert package_diff.describe(differences, "cb", "rb") == [
        "libtorch 1.0 cpu_generic_h*_0: 2 files in both, 0 only in cb's, 1 only in rb's",
        "  only in rb's: 1 under lib/python3.10/x/ (first lib/python3.10/x/__pycache__/y.pyc)",
    ]
    assert package_diff.describe(package_diff.compare(ours, ours), "a", "b") == [
        "libtorch 1.0 cpu_generic_h*_0: the same 2 files"
    ]
