"""build-locally.py driven end to end: the real script and .scripts/run_docker_build.sh, a stand-in docker.

The ``docker`` on PATH in these tests is a test double (DOCKER_STANDIN_SOURCE below): it records each
call's arguments and environment in a JSON-lines file, answers ``docker info`` (or fails it to play a
stopped daemon, or hangs to play a stuck one), and for ``docker run`` does what the build container's
last steps do -- writes a package into build_artifacts/ and the done-marker (after DOCKER_STANDIN_SILENT
seconds of silence) -- or fails for the configurations listed in DOCKER_STANDIN_FAIL.

Where this machine cannot build (no docker, a stopped daemon, a Windows configuration on Linux),
build-locally.py runs ``python -m feedstock_tools rehearse`` instead; in the copy here that is a test double
too (REHEARSAL_STANDIN_SOURCE), which records its arguments and fails for REHEARSAL_STANDIN_FAIL.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from recipe_matrix import RECIPE_VERSION

from feedstock_tools.common.run_lock import RunLock

REPO = Path(__file__).resolve().parents[2]
CONFIG_NAMES = sorted(path.stem for path in (REPO / ".ci_support").glob("*.yaml"))
LINUX_NAMES = [name for name in CONFIG_NAMES if name.startswith("linux")]
OSX_NAMES = [name for name in CONFIG_NAMES if name.startswith("osx")]

DOCKER_STANDIN_SOURCE = '''#!{python}
"""Test double of the docker CLI (see tests/ci/test_build_locally.py)."""
import json, os, signal, sys, time
from pathlib import Path

signal.signal(signal.SIGINT, signal.SIG_DFL)  # a Ctrl-C ends it silently, as it ends a real build's tools

args = sys.argv[1:]
with open(os.environ["DOCKER_STANDIN_LOG"], "a") as log:
    log.write(json.dumps({{"argv": args, "env": dict(os.environ)}}) + "\\n")
if args[:1] == ["info"]:
    if os.environ.get("DOCKER_STANDIN_DAEMON") == "down":
        print("Cannot connect to the Docker daemon", file=sys.stderr)
        sys.exit(1)
    if os.environ.get("DOCKER_STANDIN_DAEMON") == "hang":
        time.sleep(600)
    sys.exit(0)
if args[:1] == ["run"]:
    mount = ":/home/conda/feedstock_root:rw,z,delegated"
    feedstock = next(a.split(":")[0] for a in args if a.endswith(mount))
    config = os.environ["CONFIG"]
    if "DOCKER_STANDIN_PIDFILE" in os.environ:  # the signal tests look for it afterwards
        Path(os.environ["DOCKER_STANDIN_PIDFILE"]).write_text(str(os.getpid()))
    print(f"stand-in build of {{config}}", flush=True)
    time.sleep(float(os.environ.get("DOCKER_STANDIN_SILENT", "0")))  # a long silent step (a CUDA link)
    if config in os.environ.get("DOCKER_STANDIN_FAIL", "").split(","):
        print("stand-in build failed", file=sys.stderr)
        sys.exit(3)
    artifacts = Path(feedstock) / "build_artifacts"
    subdir = artifacts / config.split("_")[0]
    subdir.mkdir(parents=True, exist_ok=True)
    (subdir / f"pytorch-{version}-{{config}}.conda").write_text("stand-in package")
    if os.environ.get("DOCKER_STANDIN_MARKER") != "skip":
        (artifacts / f"conda-forge-build-done-{{config}}").touch()
sys.exit(0)
'''


REHEARSAL_STANDIN_SOURCE = '''"""Test double of python -m feedstock_tools (tests/ci/test_build_locally.py)."""
import json, os, sys
from pathlib import Path
with (Path(__file__).parent / "calls.jsonl").open("a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
print(f"stand-in rehearsal of {sys.argv[-1]}", flush=True)
sys.exit(1 if os.environ.get("REHEARSAL_STANDIN_FAIL") else 0)
'''


@dataclass
class Feedstock:
    """A copy of the CI layer in a temporary directory, with the stand-in docker first on PATH."""

    root: Path
    log: Path
    env: dict[str, str]

    def run(self, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        env = {**self.env, **(extra_env or {})}
        return subprocess.run(
            [sys.executable, str(self.root / "build-locally.py"), *args],
            capture_output=True,
            text=True,
            env=env,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    def docker_calls(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def rehearsal_calls(self) -> list[list[str]]:
        log = self.root / "feedstock_tools" / "calls.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
def feedstock(tmp_path: Path) -> Feedstock:
    root = tmp_path / "pytorch-feedstock"
    root.mkdir()
    shutil.copy2(REPO / "build-locally.py", root)
    shutil.copy2(REPO / "conda-forge.yml", root)
    shutil.copytree(REPO / ".scripts", root / ".scripts")
    shutil.copytree(REPO / ".ci_support", root / ".ci_support")
    # only the standard-library modules build-locally.py imports: it must run on a bare Python
    for module in (
        "__init__.py",
        "common/__init__.py",
        "common/ci_files.py",
        "common/closed_pipe.py",
        "common/config_selector.py",
        "common/configuration.py",
        "common/errors.py",
        "common/feedstock.py",
        "common/inputs.py",
        "common/interruption.py",
        "common/run_lock.py",
        "conda/__init__.py",
        "conda/recipe_files.py",
        "conda/selectors.py",
    ):
        (root / "feedstock_tools" / module).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / "feedstock_tools" / module, root / "feedstock_tools" / module)
    # the recipe's files, which build-locally.py checks before it starts a build (conda/recipe_files.py)
    for name in ("meta.yaml", "conda_build_config.yaml"):
        (root / "recipe").mkdir(exist_ok=True)
        shutil.copy2(REPO / "recipe" / name, root / "recipe" / name)
    (root / "feedstock_tools" / "__main__.py").write_text(REHEARSAL_STANDIN_SOURCE)
    # the build driver's signal discipline, which build-locally.py shares
    shutil.copytree(REPO / "recipe" / "megabuild", root / "recipe" / "megabuild")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(DOCKER_STANDIN_SOURCE.format(python=sys.executable, version=RECIPE_VERSION))
    docker.chmod(0o755)
    log = tmp_path / "docker-calls.jsonl"
    env = {
        key: value
        for key, value in os.environ.items()
        if key
        not in (
            "CI",
            "OSX_SDK_DIR",
            "CPU_COUNT",
            "MAX_JOBS",
            "DEBUG",
            "VERBOSE",
            "MEGABUILD_VERBOSE",
            "GITHUB_ACTIONS",
        )
    }
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", DOCKER_STANDIN_LOG=str(log), HOME=str(tmp_path))
    return Feedstock(root, log, env)


def config_data(name: str) -> dict:
    return yaml.safe_load((REPO / ".ci_support" / f"{name}.yaml").read_text())


def expected_run_argv(root: Path, image: str, extra: list[str]) -> list[str]:
    passed = [
        "CONFIG",
        "HOST_USER_ID",
        "UPLOAD_PACKAGES",
        "IS_PR_BUILD",
        "GIT_BRANCH",
        "UPLOAD_ON_BRANCH",
        "CI",
        "FEEDSTOCK_NAME",
        "CPU_COUNT",
        "MAX_JOBS",
        "DEBUG",
        "REL_WITH_DEB_INFO",
        "VERBOSE",
        "MEGABUILD_VERBOSE",
        "MEGABUILD_STRICT",
        "BUILD_WITH_CONDA_DEBUG",
        "BUILD_OUTPUT_ID",
        "BINSTAR_TOKEN",
        "FEEDSTOCK_TOKEN",
        "STAGING_BINSTAR_TOKEN",
    ]
    argv = ["run", *extra]
    argv += ["-v", f"{root}/recipe:/home/conda/recipe_root:rw,z,delegated"]
    argv += ["-v", f"{root}:/home/conda/feedstock_root:rw,z,delegated"]
    for name in passed:
        argv += ["-e", name]
    return [*argv, image, "bash", "/home/conda/feedstock_root/.scripts/build_steps.sh"]


# --- the exact invocation for each configuration ----------------------------------------------------------


@pytest.mark.parametrize("name", LINUX_NAMES)
def test_linux_configuration_runs_its_docker_image(feedstock: Feedstock, name: str) -> None:
    result = feedstock.run(name)
    assert result.returncode == 0, result.stderr
    calls = feedstock.docker_calls()
    assert [call["argv"] for call in calls[:-1]] == [["info"], ["info"]]
    run = calls[-1]
    image = config_data(name)["docker_image"][0]
    assert run["argv"] == expected_run_argv(feedstock.root, image, [])
    env = run["env"]
    assert env["CONFIG"] == name
    assert (env["UPLOAD_PACKAGES"], env["IS_PR_BUILD"]) == ("False", "True")
    assert env["HOST_USER_ID"] == str(os.getuid())
    assert env["FEEDSTOCK_NAME"] == "pytorch-feedstock"
    assert env["DOCKER_IMAGE"] == image
    assert f"built pytorch-{RECIPE_VERSION}-{name}.conda" in result.stdout


@pytest.mark.parametrize("name", OSX_NAMES)
def test_osx_configuration_cross_compiles_in_docker_with_the_sdk(
    feedstock: Feedstock, name: str, tmp_path: Path
) -> None:
    sdk = tmp_path / "SDKs"
    result = feedstock.run(name, extra_env={"OSX_SDK_DIR": str(sdk)})
    assert result.returncode == 0, result.stderr
    linux_image = config_data(LINUX_NAMES[0])["docker_image"][0]
    extra = ["-v", f"{sdk}:/opt/conda-sdks:rw,z,delegated", "-e", "OSX_SDK_DIR=/opt/conda-sdks"]
    assert feedstock.docker_calls()[-1]["argv"] == expected_run_argv(feedstock.root, linux_image, extra)


def test_script_runs_as_an_executable(feedstock: Feedstock) -> None:
    result = subprocess.run(
        [str(feedstock.root / "build-locally.py"), "--list"],
        capture_output=True,
        text=True,
        env=feedstock.env,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_debug_and_build_knobs_reach_the_container(feedstock: Feedstock) -> None:
    name = LINUX_NAMES[0]
    args = [
        "--debug",
        "--output-id",
        "pytorch-*",
        "--cpu-count",
        "8",
        "--max-jobs",
        "6",
        "--rel-with-deb-info",
        "-v",
    ]
    result = feedstock.run(name, *args)
    assert result.returncode == 0, result.stderr
    env = feedstock.docker_calls()[-1]["env"]
    assert env["BUILD_WITH_CONDA_DEBUG"] == "1"
    assert env["BUILD_OUTPUT_ID"] == "pytorch-*"
    assert (
        env["CPU_COUNT"],
        env["MAX_JOBS"],
        env["REL_WITH_DEB_INFO"],
        env["VERBOSE"],
        env["MEGABUILD_VERBOSE"],
    ) == ("8", "6", "1", "1", "1")
    assert "DEBUG" not in env


def test_build_without_the_done_marker_fails(feedstock: Feedstock) -> None:
    """A container that exits 0 without reaching build_steps.sh's last step is a failed build."""
    result = feedstock.run(LINUX_NAMES[0], extra_env={"DOCKER_STANDIN_MARKER": "skip"})
    assert result.returncode != 0


# --- selection ---------------------------------------------------------------------------------------------


def test_unique_substring_selects_one(feedstock: Feedstock) -> None:
    result = feedstock.run("osx_arm64", "--dry-run", extra_env={"OSX_SDK_DIR": "sdk"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "# osx_arm64_"


def test_glob_selects_several_in_sequence(feedstock: Feedstock) -> None:
    result = feedstock.run("linux_aarch64_*", "--dry-run")
    assert result.returncode == 0, result.stderr
    headers = [line for line in result.stdout.splitlines() if line.startswith("# ")]
    aarch64 = [name for name in CONFIG_NAMES if name.startswith("linux_aarch64_")]
    assert headers == [f"# {name} (output to build_artifacts/build-locally/{name}.log)" for name in aarch64]


def test_dry_run_prints_exact_commands_and_runs_nothing(feedstock: Feedstock) -> None:
    name = LINUX_NAMES[0]
    image = config_data(name)["docker_image"][0]
    result = feedstock.run(name, "--dry-run", "--debug-build")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"# {name}",
        f"CONFIG={name} DEBUG=1 DOCKER_IMAGE={image} IS_PR_BUILD=True UPLOAD_PACKAGES=False "
        ".scripts/run_docker_build.sh",
    ]
    assert feedstock.docker_calls() == []


def test_list_shows_platform_blas_cuda_and_pythons(feedstock: Feedstock) -> None:
    result = feedstock.run("--list")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["configuration", "platform", "BLAS", "CUDA", "Python"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert sorted(rows) == CONFIG_NAMES
    for name, row in rows.items():
        data = config_data(name)
        cuda = data["cuda_compiler_version"][0]
        pythons = [p.split(".*")[0] for p in data["python"]]
        assert row == [
            data["target_platform"][0],
            "+".join(data.get("blas_impl", ["-"])),
            "CPU" if cuda == "None" else cuda,
            *pythons,
        ]


def load_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_locally", REPO / "build-locally.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up in sys.modules while the file executes
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_interactive_choice_from_a_numbered_list(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load_module()
    configs = module.load_configs(REPO)
    monkeypatch.setattr("builtins.input", lambda prompt: "2")
    assert module.choose_interactively(configs) == configs[1]
    listing = capsys.readouterr().out.splitlines()
    assert listing[2].split()[:2] == ["1", configs[0].name]
    monkeypatch.setattr("builtins.input", lambda prompt: "99")
    with pytest.raises(module.UserError, match="not a number between 1 and"):
        module.choose_interactively(configs)


# --- several configurations in a row -----------------------------------------------------------------------


def test_sequence_logs_markers_summary_and_rerun(feedstock: Feedstock) -> None:
    aarch64 = [name for name in CONFIG_NAMES if name.startswith("linux_aarch64_")]
    failing = aarch64[1]
    result = feedstock.run(
        "--match",
        "linux_aarch64_*",
        "--prune",
        extra_env={"DOCKER_STANDIN_FAIL": failing, "BUILD_LOCALLY_HEARTBEAT": "0"},
    )
    assert result.returncode == 1
    artifacts = feedstock.root / "build_artifacts"
    for name in aarch64:
        log = (artifacts / "build-locally" / f"{name}.log").read_text()
        assert f"stand-in build of {name}" in log
        assert (artifacts / f"conda-forge-build-done-{name}").exists() == (name != failing)
    progress = [line for line in result.stdout.splitlines() if line.startswith("[")]
    first = f"[1/{len(aarch64)}] {aarch64[0]}"
    assert progress[0] == f"{first}: building, log: build_artifacts/build-locally/{aarch64[0]}.log"
    # heartbeat lines while a build runs (every output line here, with the interval set to 0)
    # (the elapsed time depends on the machine's load: match its shape, not its value)
    last_line = re.escape(f"stand-in build of {aarch64[0]}"[:100])
    heartbeat = re.compile(rf"    \d+:\d\d:\d\d elapsed: {last_line}")
    assert any(heartbeat.fullmatch(line) for line in result.stdout.splitlines()), result.stdout
    summary = result.stdout.split("\n\n")[-2].splitlines()
    assert summary[0].split() == ["configuration", "result", "duration", "packages"]
    rows = {line.split()[0]: line.split()[1:] for line in summary[2:]}
    assert rows[aarch64[0]][0] == "ok" and rows[aarch64[0]][-1] == "1"
    # the stand-in's exit status (3) comes back through run_docker_build.sh's `set -e`
    assert rows[failing][:3] == ["FAILED", "(exit", "3)"] and rows[failing][-1] == "0"
    prunes = [call for call in feedstock.docker_calls() if call["argv"][:2] == ["system", "prune"]]
    assert len(prunes) == len(aarch64) - 1  # between builds
    with zipfile.ZipFile(artifacts / "build-locally-logs.zip") as archive:
        assert sorted(archive.namelist()) == sorted(f"{name}.log" for name in aarch64)

    feedstock.log.unlink()
    rerun = feedstock.run("--match", "linux_aarch64_*")
    assert rerun.returncode == 0, rerun.stdout
    runs = [call["env"]["CONFIG"] for call in feedstock.docker_calls() if call["argv"][0] == "run"]
    assert runs == [failing]
    assert f"{first}: already built" in rerun.stdout


# --- one-line errors ---------------------------------------------------------------------------------------


def error_of(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    return lines[0]


def without_docker(feedstock: Feedstock, tmp_path: Path) -> dict[str, str]:
    # a PATH with the tools the script needs but no docker at all
    tools = tmp_path / "tools"
    tools.mkdir()
    for tool in ("bash", "id", "grep"):
        found = shutil.which(tool)
        assert found
        (tools / tool).symlink_to(found)
    return {"PATH": str(tools)}


ERRORS: dict[str, tuple[list[str], Callable[[Feedstock, Path], dict[str, str]], str]] = {
    "unknown": (
        ["nope"],
        lambda f, t: {},
        "error: no configuration matches 'nope'; list them with './build-locally.py --list'",
    ),
    "ambiguous": (["linux_64"], lambda f, t: {}, "error: 'linux_64' matches 3 configurations ("),
    "osx-sdk": (
        ["osx_arm64", "--build"],
        lambda f, t: {},
        "error: osx_arm64_ needs the macOS SDK on Linux: 'export OSX_SDK_DIR=$PWD/SDKs' and the build "
        "downloads it there",
    ),
    "no-docker": (
        [LINUX_NAMES[0], "--build"],
        without_docker,
        "error: docker not found on PATH: install Docker (https://docs.docker.com/engine/install/)",
    ),
    "daemon-down": (
        [LINUX_NAMES[0], "--build"],
        lambda f, t: {"DOCKER_STANDIN_DAEMON": "down"},
        "error: the Docker daemon is not running ('docker info' failed): start it",
    ),
    "no-terminal": ([], lambda f, t: {}, "error: no configuration given and no terminal to ask on"),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_are_one_line(feedstock: Feedstock, tmp_path: Path, case: str) -> None:
    args, make_env, message = ERRORS[case]
    result = feedstock.run(*args, extra_env=make_env(feedstock, tmp_path))
    assert error_of(result).startswith(message)
    if case in ("osx-sdk", "no-docker", "daemon-down"):  # the way around: the offline rehearsal
        assert f"or rehearse it offline: ./build-locally.py --rehearse {args[0]}" in error_of(result)
    assert not any(call["argv"][0] == "run" for call in feedstock.docker_calls())
    assert feedstock.rehearsal_calls() == []  # --build: never a rehearsal instead


def test_windows_configuration_on_linux(feedstock: Feedstock) -> None:
    """The feedstock's own win-64 configurations (.scripts/run_win_build.bat builds them on Windows)."""
    name = "win_64_cuda_compiler_versionNone"
    assert (feedstock.root / ".ci_support" / f"{name}.yaml").is_file()
    message = error_of(feedstock.run(name, "--build"))
    assert message == (
        f"error: {name} is a Windows configuration; it can only be built on Windows "
        f"(or rehearse it offline: ./build-locally.py --rehearse {name})"
    )


def test_no_ci_support(feedstock: Feedstock) -> None:
    shutil.rmtree(feedstock.root / ".ci_support")
    message = error_of(feedstock.run("--list"))
    assert message.startswith(f"error: no configurations in {feedstock.root / '.ci_support'}: run")


def test_rehearse_runs_the_rehearsal_subcommand(feedstock: Feedstock) -> None:
    name = LINUX_NAMES[-1]
    result = feedstock.run("--rehearse", name[:-3], "--dry-run")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{sys.executable} -m feedstock_tools rehearse {name}"


# --- where this machine cannot build: the rehearsal instead, saying so (issue 29) ---------------------------


CANNOT_BUILD: dict[str, tuple[str, Callable[[Feedstock, Path], dict[str, str]], str]] = {
    "no-docker": (
        LINUX_NAMES[0],
        without_docker,
        "docker not found on PATH: install Docker (https://docs.docker.com/engine/install/)",
    ),
    # what a docker CLI without a daemon does (this project's machines: 'docker info' exits 1)
    "daemon-down": (
        LINUX_NAMES[0],
        lambda f, t: {"DOCKER_STANDIN_DAEMON": "down"},
        "the Docker daemon is not running ('docker info' failed): "
        "start it, e.g. 'sudo systemctl start docker'",
    ),
    "windows": (
        "win_64_cuda_compiler_versionNone",
        lambda f, t: {},
        "win_64_cuda_compiler_versionNone is a Windows configuration; it can only be built on Windows",
    ),
}


@pytest.mark.parametrize("fails", [False, True], ids=["passes", "fails"])
@pytest.mark.parametrize("case", sorted(CANNOT_BUILD))
def test_where_it_cannot_build_it_rehearses_and_says_it_built_nothing(
    feedstock: Feedstock, tmp_path: Path, case: str, fails: bool
) -> None:
    name, make_env, reason = CANNOT_BUILD[case]
    env = {**make_env(feedstock, tmp_path), **({"REHEARSAL_STANDIN_FAIL": "1"} if fails else {})}
    result = feedstock.run(name, extra_env=env)
    assert result.returncode == (1 if fails else 0), result.stderr
    assert result.stdout.splitlines() == [
        f"build-locally.py cannot build {name} on this machine: {reason}. Rehearsing instead: the recipe's "
        "build scripts run offline against a small stand-in of PyTorch's build; this builds NO PyTorch and "
        "makes no package.",
        f"stand-in rehearsal of {name}",
        f"rehearsed {name} offline ({'failed' if fails else 'passed'}): PyTorch was NOT built and no package "
        f"was made; for the real build, do what the first line says, then: ./build-locally.py --build {name}",
    ]
    # one rehearsal says why it failed in its own last line (this stand-in says nothing): no summary line
    assert result.stderr == ""
    assert feedstock.rehearsal_calls() == [["rehearse", name]]
    assert not any(call["argv"][0] == "run" for call in feedstock.docker_calls())
    assert not (feedstock.root / "build_artifacts").exists()


def test_an_option_only_a_build_has_never_falls_back_to_the_rehearsal(feedstock: Feedstock) -> None:
    result = feedstock.run(LINUX_NAMES[0], "--cpu-count", "2", extra_env={"DOCKER_STANDIN_DAEMON": "down"})
    assert error_of(result).startswith("error: the Docker daemon is not running ('docker info' failed)")
    assert feedstock.rehearsal_calls() == []


def test_dry_run_shows_the_rehearsal_it_would_run_instead(feedstock: Feedstock) -> None:
    result = feedstock.run(
        "--match", "linux_aarch64_*", "--dry-run", extra_env={"DOCKER_STANDIN_DAEMON": "down"}
    )
    assert result.returncode == 0, result.stderr
    comment, *commands = result.stdout.splitlines()
    assert comment.startswith("# build-locally.py cannot build these 4 configurations on this machine: the")
    aarch64 = [name for name in CONFIG_NAMES if name.startswith("linux_aarch64_")]
    assert commands == [f"{sys.executable} -m feedstock_tools rehearse {name}" for name in aarch64]
    assert feedstock.rehearsal_calls() == []


# --- faults (issue 13): one-line errors, no hangs, no shared logs or markers -----------------------------


def test_hung_docker_daemon_times_out(feedstock: Feedstock) -> None:
    result = feedstock.run(
        LINUX_NAMES[0],
        "--build",
        extra_env={"DOCKER_STANDIN_DAEMON": "hang", "BUILD_LOCALLY_DOCKER_TIMEOUT": "1"},
    )
    assert result.returncode == 2
    assert error_of(result).startswith("error: 'docker info' did not answer within 1 s")


def test_heartbeat_prints_on_a_timer_while_the_build_is_silent(feedstock: Feedstock) -> None:
    name = LINUX_NAMES[0]
    result = feedstock.run(
        "--match", name, extra_env={"DOCKER_STANDIN_SILENT": "2.5", "BUILD_LOCALLY_HEARTBEAT": "0.5"}
    )
    assert result.returncode == 0, result.stderr
    last_line = f"stand-in build of {name}"[:100]
    beats = [line for line in result.stdout.splitlines() if line.endswith(f"elapsed: {last_line}")]
    assert len(beats) >= 2, result.stdout  # the build printed one line, then nothing for 2.5 s


def test_closed_stdin_is_a_one_line_error(feedstock: Feedstock) -> None:
    result = subprocess.run(
        ["bash", "-c", f'exec 0<&-; exec "{sys.executable}" "{feedstock.root / "build-locally.py"}"'],
        capture_output=True,
        text=True,
        env=feedstock.env,
        check=False,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert error_of(result).startswith("error: no configuration given and no terminal to ask on")


def test_a_configuration_another_run_builds_is_skipped(feedstock: Feedstock) -> None:
    busy, free = [name for name in CONFIG_NAMES if name.startswith("linux_aarch64_")][:2]
    lock_dir = feedstock.root / "build_artifacts" / "build-locally"
    with RunLock(lock_dir / f".{busy}.lock", f"configuration {busy}"):  # another run holds it
        result = feedstock.run("--match", "linux_aarch64_*")
    assert result.returncode == 1  # not built by this run, and not known to be done
    assert f"{busy}: skipped, configuration {busy} is in use by another run" in result.stdout
    artifacts = feedstock.root / "build_artifacts"
    assert (
        not (artifacts / f"conda-forge-build-done-{busy}").exists()
        and not (lock_dir / f"{busy}.log").exists()
    )
    assert (artifacts / f"conda-forge-build-done-{free}").exists()


def test_failed_forced_rebuild_does_not_keep_the_old_done_marker(feedstock: Feedstock) -> None:
    name = LINUX_NAMES[0]
    marker = feedstock.root / "build_artifacts" / f"conda-forge-build-done-{name}"
    assert feedstock.run("--match", name).returncode == 0 and marker.exists()
    result = feedstock.run("--match", name, "--force", extra_env={"DOCKER_STANDIN_FAIL": name})
    assert result.returncode == 1 and not marker.exists()


@pytest.mark.parametrize("content", ["", "channel_sources:\n- conda-forge\n"])
def test_empty_or_truncated_ci_support_file_is_not_listed(feedstock: Feedstock, content: str) -> None:
    (feedstock.root / ".ci_support" / "linux_64_broken.yaml").write_text(content)
    result = feedstock.run("--list")
    assert result.returncode == 2
    assert error_of(result).startswith("error: .ci_support/linux_64_broken.yaml is empty or truncated")


def test_rehearse_honours_match(feedstock: Feedstock) -> None:
    aarch64 = [name for name in CONFIG_NAMES if name.startswith("linux_aarch64_")]
    result = feedstock.run("--rehearse", "--match", "linux_aarch64_*", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert [line.split()[-1] for line in result.stdout.splitlines()] == aarch64


# --- signals to build-locally.py alone (issue 22): `kill PID`, `timeout`, a CI job's cancel ----------------


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
@pytest.mark.parametrize("sequential", [False, True], ids=["single", "match"])
def test_a_signal_to_build_locally_alone_stops_the_build_it_started(
    feedstock: Feedstock, tmp_path: Path, signum: signal.Signals, sequential: bool
) -> None:
    name = LINUX_NAMES[0]
    pidfile = tmp_path / "docker-run.pid"
    env = {**feedstock.env, "DOCKER_STANDIN_SILENT": "60", "DOCKER_STANDIN_PIDFILE": str(pidfile)}
    mode = ["--match", name, "--verbose"] if sequential else [name]  # --verbose: the log echoed
    process = subprocess.Popen(
        [sys.executable, str(feedstock.root / "build-locally.py"), *mode],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the signal goes to build-locally.py only, not to a group with the build
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("stand-in build of"):  # printed once the build (docker run) has started
                break
        build_pid = int(pidfile.read_text())
        os.kill(process.pid, signum)
        err = process.communicate(timeout=60)[1]
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + signum, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(
        f"error: build-locally.py was interrupted by {signum.name}: the build of {name} "
    )
    assert "run the same command again" in lines[0]
    assert not running(build_pid)  # stopped, not orphaned
    assert not (feedstock.root / "build_artifacts" / f"conda-forge-build-done-{name}").exists()


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for init to reap it has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
