#!/usr/bin/env python3
"""Build configurations of this feedstock on your machine, the way CI builds them.

Each configuration is a file in .ci_support/ (see --list). A Linux configuration -- and a macOS one
on a Linux machine, given OSX_SDK_DIR -- is built in conda-forge's Docker image by
.scripts/run_docker_build.sh; on a Mac, macOS configurations run .scripts/run_osx_build.sh.

Where this machine cannot build the configuration (no Docker daemon, a Windows configuration on Linux,
macOS without OSX_SDK_DIR), build-locally.py says why and runs the offline megabuild rehearsal of it
instead: the recipe's build scripts against a small stand-in of PyTorch's build. A rehearsal builds no
PyTorch and makes no package, and says so. --build insists on the real build (an error saying what is
missing); --rehearse always rehearses.

Choosing configurations:
  CONFIG            exact name, a unique part of a name, or a glob ('linux_64_*cuda*13.0*');
                    a glob may select several, which are then built one after another
  (none)            pick from a numbered list (on a terminal)
  --all, --match P  build every configuration, or every one matching P, in a row: each build's
                    output goes to build_artifacts/build-locally/<config>.log, a finished build
                    leaves build_artifacts/conda-forge-build-done-<config> so a rerun skips it
                    (--force rebuilds), and a summary table and a zip of the logs end the run

Examples:
  ./build-locally.py --list
  ./build-locally.py linux_64_c_compiler_version14  # CUDA 12.9, both BLAS (one job)
  ./build-locally.py --match '*cuda_compiler_version1*' --prune  # every CUDA build in a row
  OSX_SDK_DIR=SDKs ./build-locally.py osx_arm64 --dry-run        # print what would run
  ./build-locally.py 'linux_64*2.28*' --debug --output-id 'pytorch-*'
  ./build-locally.py --rehearse                                  # the offline megabuild rehearsal
  ./build-locally.py --build linux_64_c_compiler_version14  # a real build, or an error

Standard library only (except the rehearsal, which needs requirements-dev.txt).
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from feedstock_tools.common import closed_pipe, config_selector, interruption  # noqa: E402
from feedstock_tools.common.configuration import Configuration  # noqa: E402
from feedstock_tools.common.errors import ToolError  # noqa: E402
from feedstock_tools.common.feedstock import Feedstock  # noqa: E402
from feedstock_tools.common.run_lock import LockBusy, RunLock  # noqa: E402
from feedstock_tools.conda.recipe_files import check_first_pass, check_recipe  # noqa: E402
from megabuild import atomic_file  # noqa: E402  (every file build-locally writes goes through it)

LOG_DIR = Path("build_artifacts") / "build-locally"
LOG_ZIP = Path("build_artifacts") / "build-locally-logs.zip"
DONE_MARKER = "conda-forge-build-done-{config}"  # written by .scripts/build_steps.sh as its last step
PACKAGE_SUFFIXES = (".conda", ".tar.bz2")
# conda-smithy writes these keys into every .ci_support file (channel_sources first, target_platform among
# the last, the keys being sorted): a file without them is empty or was cut short.
REQUIRED_KEYS = ("channel_sources", "target_platform")
# How long a build started here gets to stop after a forwarded signal before it is killed: longer than
# the rehearsal's own wait for its build scripts (which is longer than the driver's for its build).
STOP_GRACE_SECONDS = 1.5 * interruption.GRACE_SECONDS


class UserError(Exception):
    """A problem the user can fix: printed as one line, exit status 2."""


class CannotBuildHere(UserError):
    """This machine cannot build a configuration: ``reason`` says what is missing and how to get it. With
    --build (or an option only a build has) it is the error; otherwise the rehearsal runs instead."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class Running:
    """What this run has started and is waiting for: named by the interruption line."""

    what: str
    # the rehearsal prints its own interruption line; a build script does not
    reports_itself: bool = False
    process: subprocess.Popen | None = None
    own_group: bool = True


# What was started, the last entry running now: the one piece of state the interruption line reads.
STARTED: list[Running] = []


@dataclass(frozen=True)
class BuildResult:
    config: str
    result: str  # "ok", "FAILED (exit N)", "skipped (done)"
    seconds: float
    packages: tuple[str, ...]


# --- choosing configurations -----------------------------------------------------------------------------


def load_configs(root: Path) -> list[Configuration]:
    feedstock = Feedstock(root)
    files = feedstock.configuration_files()
    if not files:
        raise UserError(
            f"no configurations in {feedstock.ci_support}: "
            "run 'python -m feedstock_tools render-ci' (or 'conda smithy rerender')"
        )
    configs = []
    try:
        for path in files:
            config = feedstock.configuration(path)
            missing = [key for key in REQUIRED_KEYS if key not in config]
            if missing:
                raise UserError(
                    f"{path.relative_to(root)} is empty or truncated (no {', '.join(missing)}): "
                    "re-render it with 'python -m feedstock_tools render-ci' (or 'conda smithy rerender')"
                )
            configs.append(config)
    except ToolError as exc:  # the reader's line names the file, the problem and the fix
        raise UserError(str(exc)) from exc
    return configs


def by_selector(
    configs: Sequence[Configuration], selector: str, root: Path, several: bool
) -> list[Configuration]:
    """The configurations a name, part, glob or .ci_support path chooses (common/config_selector.py);
    ``several`` False: a part that matches more than one is an error naming them."""
    if config_selector.is_path(selector):
        names = [config_selector.resolve_one(selector, Feedstock(root).ci_support).stem]
    elif several:
        names = config_selector.select([config.name for config in configs], selector)
    else:
        names = [config_selector.select_one([config.name for config in configs], selector)]
    chosen = [config for config in configs if config.name in names]
    if not chosen:  # a path to a configuration that --platform/--cuda/--blas left out
        raise UserError(f"{selector} is not among the configurations the filters keep; drop a filter")
    return chosen


def choose_interactively(configs: Sequence[Configuration]) -> Configuration:
    print(format_table(configs, numbered=True))
    try:
        answer = input(f"\nbuild which configuration? [1-{len(configs)}] ").strip()
    except EOFError:
        raise UserError("no answer (standard input closed): pass a configuration (see --list)") from None
    if not answer.isdigit() or not 1 <= int(answer) <= len(configs):
        raise UserError(f"{answer!r} is not a number between 1 and {len(configs)}")
    return configs[int(answer) - 1]


def format_table(configs: Sequence[Configuration], numbered: bool = False) -> str:
    header = ["configuration", "platform", "BLAS", "CUDA", "Python"]
    rows = [
        [
            config.name,
            config.target_platform,
            "+".join(config.blases) or "-",
            config.cuda or "CPU",
            " ".join(python.version for python in config.pythons),
        ]
        for config in configs
    ]
    if numbered:
        header = ["#", *header]
        rows = [[str(index), *row] for index, row in enumerate(rows, start=1)]
    return table(header, rows)


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    rule = "  ".join("-" * width for width in widths)
    head = "  ".join(cell.ljust(width) for cell, width in zip(header, widths, strict=True)).rstrip()
    return "\n".join([head, rule, *lines])


# --- checks ---------------------------------------------------------------------------------------------


def rehearsal_instead(configs: Sequence[Configuration]) -> str:
    """The way around a build this machine cannot run: the offline rehearsal of the same configurations."""
    chosen = configs[0].name if len(configs) == 1 else "CONFIG"
    return f"or rehearse it offline: ./build-locally.py --rehearse {shlex.quote(chosen)}"


def check_buildable(config: Configuration) -> None:
    if config.platform == "win" and platform.system() != "Windows":
        reason = f"{config.name} is a Windows configuration; it can only be built on Windows"
        raise CannotBuildHere(reason, f"{reason} ({rehearsal_instead([config])})")
    if config.platform == "osx" and platform.system() != "Darwin" and not os.environ.get("OSX_SDK_DIR"):
        reason = (
            f"{config.name} needs the macOS SDK on Linux: 'export OSX_SDK_DIR=$PWD/SDKs' and the build "
            "downloads it there (setting it means you accept Apple's SDK license), or point OSX_SDK_DIR at "
            "a directory holding MacOSX<version>.sdk"
        )
        raise CannotBuildHere(reason, f"{reason}; {rehearsal_instead([config])}")


def uses_docker(config: Configuration) -> bool:
    return not (config.platform == "osx" and platform.system() == "Darwin")


def check_docker(configs: Sequence[Configuration]) -> None:
    around = rehearsal_instead(configs)
    if shutil.which("docker") is None:
        reason = "docker not found on PATH: install Docker (https://docs.docker.com/engine/install/)"
        raise CannotBuildHere(reason, f"{reason}, {around}")
    timeout = seconds_from_env("BUILD_LOCALLY_DOCKER_TIMEOUT", 30.0)  # a healthy daemon answers at once
    try:
        info = subprocess.run(
            ["docker", "info"], capture_output=True, text=True, check=False, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        reason = (
            f"'docker info' did not answer within {timeout:g} s: the Docker daemon hangs; restart it "
            "(e.g. 'sudo systemctl restart docker') or raise BUILD_LOCALLY_DOCKER_TIMEOUT"
        )
        raise CannotBuildHere(reason, f"{reason}, {around}") from None
    if info.returncode != 0:
        # a docker CLI without a daemon (a container, a machine without dockerd) fails here
        reason = (
            "the Docker daemon is not running ('docker info' failed): "
            "start it, e.g. 'sudo systemctl start docker'"
        )
        raise CannotBuildHere(reason, f"{reason}, {around}")


def check_can_build(configs: Sequence[Configuration]) -> None:
    """CannotBuildHere when this machine cannot build one of ``configs`` (the first reason found)."""
    for config in configs:
        check_buildable(config)
    if any(uses_docker(config) for config in configs):
        check_docker(configs)


# Options only a real build has: given one, the user wants that build, never a rehearsal instead.
BUILD_ONLY = {
    "debug": "--debug",
    "output_id": "--output-id",
    "prune": "--prune",
    "cpu_count": "--cpu-count",
    "max_jobs": "--max-jobs",
    "debug_build": "--debug-build",
    "rel_with_deb_info": "--rel-with-deb-info",
    "force": "--force",
}


def insists_on_building(args: argparse.Namespace) -> bool:
    return args.build or any(getattr(args, dest) for dest in BUILD_ONLY)


# --- what runs ------------------------------------------------------------------------------------------


def build_environment(config: Configuration, args: argparse.Namespace, root: Path) -> dict[str, str]:
    """The variables build-locally sets for .scripts/ (on top of the caller's environment)."""
    env = {"CONFIG": config.name, "UPLOAD_PACKAGES": "False", "IS_PR_BUILD": "True"}
    if uses_docker(config):
        if config.docker_image:
            env["DOCKER_IMAGE"] = config.docker_image
        elif config.platform == "osx":
            # macOS targets cross-compile in the linux-64 build image.
            env["DOCKER_IMAGE"] = linux_64_image(root)
    else:
        env["MINIFORGE_HOME"] = os.environ.get("MINIFORGE_HOME", str(root / "miniforge3"))
    if args.debug:
        env["BUILD_WITH_CONDA_DEBUG"] = "1"
        if args.output_id:
            env["BUILD_OUTPUT_ID"] = args.output_id
    if args.cpu_count:
        env["CPU_COUNT"] = str(args.cpu_count)
    if args.max_jobs:
        env["MAX_JOBS"] = str(args.max_jobs)
    if args.debug_build:
        env["DEBUG"] = "1"
    if args.rel_with_deb_info:
        env["REL_WITH_DEB_INFO"] = "1"
    if args.verbose:
        # VERBOSE: the CI scripts echo their commands; MEGABUILD_VERBOSE: the driver's full compile lines
        env["VERBOSE"] = "1"
        env["MEGABUILD_VERBOSE"] = "1"
    return env


def linux_64_image(root: Path) -> str:
    for config in Feedstock(root).configurations("linux_64_*.yaml"):
        if config.docker_image:
            return config.docker_image
    raise UserError("no linux_64 configuration names a docker_image to cross-compile macOS targets in")


def build_command(config: Configuration) -> list[str]:
    script = "run_docker_build.sh" if uses_docker(config) else "run_osx_build.sh"
    return [str(Path(".scripts") / script)]


def describe(command: Sequence[str], env: dict[str, str]) -> str:
    assignments = " ".join(f"{key}={shlex.quote(value)}" for key, value in sorted(env.items()))
    return f"{assignments} {shlex.join(command)}"


def packages_in(artifacts: Path) -> dict[Path, float]:
    if not artifacts.is_dir():
        return {}
    return {
        path: path.stat().st_mtime
        for path in artifacts.glob("*/*")
        if path.name.endswith(PACKAGE_SUFFIXES) and path.parent.name != "pkg_cache"
    }


def on_terminal() -> bool:
    return sys.stdin is not None and not sys.stdin.closed and sys.stdin.isatty()


def run_child(
    command: Sequence[str], running: Running, cwd: Path, env: dict[str, str], **options: Any
) -> int:
    """Run ``command`` as what runs now, through the one runner (recipe/megabuild/child_process.py), and
    return its exit status. ``own_group`` (default True): in a process group of its own, which a signal to
    this process is forwarded to as a whole; a build that needs the terminal (docker -it, --debug's shell)
    stays in ours, where a Ctrl-C reaches it anyway, and only it is signalled."""
    STARTED.append(running)
    running.own_group = options.get("own_group", True)

    def started(process: subprocess.Popen) -> None:
        running.process = process

    return interruption.run_child(command, cwd, env, on_start=started, grace=STOP_GRACE_SECONDS, **options)


def run_one(
    config: Configuration, args: argparse.Namespace, root: Path, log: Path | None
) -> tuple[int, tuple[str, ...]]:
    env = build_environment(config, args, root)
    command = build_command(config)
    before = packages_in(root / "build_artifacts")
    full_env = {**os.environ, **env}
    running = Running(f"the build of {config.name}")
    if log is None:
        returncode = run_child(command, running, root, full_env, own_group=not on_terminal())
    else:
        log.parent.mkdir(parents=True, exist_ok=True)
        # a fresh log (its command line written whole), then the build's output written into it

        def saw(line: str) -> None:
            if args.verbose:
                print(line, flush=True)
            heartbeat.saw(line)

        with Heartbeat(None if args.verbose else heartbeat_seconds()) as heartbeat:
            returncode = run_child(
                command, running, root, full_env, log=log, header=f"$ {describe(command, env)}\n", on_line=saw
            )
    after = packages_in(root / "build_artifacts")
    produced = tuple(
        sorted(path.name for path, mtime in after.items() if path not in before or before[path] != mtime)
    )
    return returncode, produced


class Heartbeat:
    """A megabuild runs for hours, with long silent stretches (a CUDA link, a package upload): every
    ``interval`` seconds print the elapsed time and the build's last line, on a timer, whether the build
    printed or not. ``interval`` None: no heartbeat (the build's own output is shown)."""

    MIN_TIMER = 0.5  # the timer's own tick; with a shorter interval every new line also prints one

    def __init__(self, interval: float | None) -> None:
        self.interval = interval
        self.start = self.last_report = time.monotonic()
        self.last_line = "(no output yet)"
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)

    def __enter__(self) -> Heartbeat:
        if self.interval is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def saw(self, line: str) -> None:
        with self._lock:
            self.last_line = line.strip()[:100] or self.last_line
        self._maybe_report()

    def _tick(self) -> None:
        assert self.interval is not None
        while not self._stop.wait(max(self.interval, self.MIN_TIMER)):
            self._maybe_report()

    def _maybe_report(self) -> None:
        if self.interval is None:
            return
        with self._lock:
            now = time.monotonic()
            if now - self.last_report < self.interval:
                return
            self.last_report = now
            print(f"    {duration(now - self.start)} elapsed: {self.last_line}", flush=True)


def heartbeat_seconds() -> float:
    """How often a sequential build prints a progress line (BUILD_LOCALLY_HEARTBEAT, default 5 min)."""
    return seconds_from_env("BUILD_LOCALLY_HEARTBEAT", 300.0)


def seconds_from_env(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return float(value)
    except ValueError:
        raise UserError(f"{name} must be a number of seconds, not {value!r}") from None


def duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def run_sequence(configs: Sequence[Configuration], args: argparse.Namespace, root: Path) -> int:
    results: list[BuildResult] = []
    for index, config in enumerate(configs, start=1):
        marker = root / "build_artifacts" / DONE_MARKER.format(config=config.name)
        progress = f"[{index}/{len(configs)}] {config.name}"
        # One run per configuration at a time: two runs would write one log and one done-marker.
        lock = RunLock(root / LOG_DIR / f".{config.name}.lock", f"configuration {config.name}")
        try:
            lock.acquire()
        except LockBusy as exc:
            print(f"{progress}: skipped, {exc}", flush=True)
            results.append(BuildResult(config.name, "skipped (busy)", 0.0, ()))
            continue
        with lock:
            if marker.is_file() and not args.force:
                print(f"{progress}: already built ({marker.relative_to(root)} exists), skipped", flush=True)
                results.append(BuildResult(config.name, "skipped (done)", 0.0, ()))
                continue
            # build_steps.sh writes the marker as its last step: an old one must not outlive a failed rebuild
            marker.unlink(missing_ok=True)
            log = root / LOG_DIR / f"{config.name}.log"
            print(f"{progress}: building, log: {log.relative_to(root)}", flush=True)
            start = time.monotonic()
            returncode, produced = run_one(config, args, root, log)
            elapsed = time.monotonic() - start
        result = "ok" if returncode == 0 else f"FAILED (exit {returncode})"
        print(f"{progress}: {result} after {duration(elapsed)}, {len(produced)} package(s)", flush=True)
        results.append(BuildResult(config.name, result, elapsed, produced))
        if args.prune and index < len(configs):
            # A CUDA megabuild leaves tens of GB of images and build cache behind.
            interruption.run_child(["docker", "system", "prune", "--force"], root, dict(os.environ))
    write_log_zip(root)
    print()
    print(
        table(
            ["configuration", "result", "duration", "packages"],
            [[r.config, r.result, duration(r.seconds), str(len(r.packages))] for r in results],
        )
    )
    print(f"\nlogs: {LOG_ZIP}")
    return 1 if any(r.result.startswith(("FAILED", "skipped (busy)")) for r in results) else 0


def write_log_zip(root: Path) -> None:
    """Atomically (the one writer's temporary file renamed over it): two runs may finish at once."""
    logs = sorted((root / LOG_DIR).glob("*.log"))
    with (
        atomic_file.replacing(root / LOG_ZIP) as raw,
        zipfile.ZipFile(raw, "w", compression=zipfile.ZIP_DEFLATED) as archive,
    ):
        for log in logs:
            archive.write(log, arcname=log.name)


# --- command line ---------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="build-locally.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "config",
        nargs="?",
        help="configuration: exact name, unique part of a name, a glob, or a .ci_support/*.yaml path",
    )
    choice = parser.add_argument_group("which configurations")
    choice.add_argument("--list", action="store_true", help="print the configurations and exit")
    choice.add_argument(
        "--platform", help="only configurations for this target platform (linux-64, osx-arm64, ...)"
    )
    choice.add_argument(
        "--cuda", metavar="VERSION", help="only this CUDA version (12.9, 13.0), 'none' (CPU) or 'any' (CUDA)"
    )
    choice.add_argument("--blas", help="only the configurations that build this BLAS (mkl, generic)")
    choice.add_argument("--all", action="store_true", help="build every configuration, one after another")
    choice.add_argument(
        "--match", metavar="PATTERN", help="build every configuration matching a glob or substring"
    )
    choice.add_argument(
        "--force", action="store_true", help="rebuild configurations whose done-marker exists"
    )
    run = parser.add_argument_group("how to run")
    run.add_argument("--dry-run", action="store_true", help="print the commands and environment, run nothing")
    run.add_argument("--prune", action="store_true", help="'docker system prune --force' between builds")
    run.add_argument(
        "--debug", action="store_true", help="set up a conda debug environment and open a shell in it"
    )
    run.add_argument("--output-id", help="with --debug: the output to debug (e.g. 'pytorch-*')")
    run.add_argument(
        "--cpu-count", type=int, metavar="N", help="CPU_COUNT for the build (default: all cores)"
    )
    run.add_argument(
        "--max-jobs", type=int, metavar="N", help="MAX_JOBS: parallel compile jobs of PyTorch's build"
    )
    kind = run.add_mutually_exclusive_group()
    kind.add_argument("--debug-build", action="store_true", help="DEBUG=1: a debug build of PyTorch")
    kind.add_argument(
        "--rel-with-deb-info", action="store_true", help="REL_WITH_DEB_INFO=1: optimized, with symbols"
    )
    run.add_argument(
        "-v", "--verbose", action="store_true", help="VERBOSE=1 build; also echo logs of sequential runs"
    )
    mode = run.add_mutually_exclusive_group()
    mode.add_argument(
        "--build",
        action="store_true",
        help="build for real or stop with what this machine lacks (Docker, Windows, OSX_SDK_DIR); without "
        "it, a configuration this machine cannot build is rehearsed instead",
    )
    mode.add_argument(
        "--rehearse",
        action="store_true",
        help="run the offline megabuild rehearsal of CONFIG (default: a linux-64 CUDA one) instead of a "
        "real build, even where this machine could build it",
    )
    run.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for given, what in ((args.config, "CONFIG"), (args.match, "--match")):
        if given is not None and not given.strip():
            parser.error(f"{what} is empty: give a configuration's name, a part of it or a glob (see --list)")
    if args.output_id and not args.debug:
        parser.error("--output-id only applies with --debug")
    if sum(bool(x) for x in (args.all, args.match, args.list)) > 1:
        parser.error("use only one of --list, --all and --match")
    if (args.all or args.match) and args.config:
        parser.error("give either a configuration or --all/--match")
    return args


def rehearse(
    args: argparse.Namespace, chosen: Sequence[Configuration] | None, instead: str | None = None
) -> int:
    """The rehearsal of each configuration of ``chosen`` in a row (None: the rehearsal's default one).
    ``instead``: why this machine cannot build them, said before and after the rehearsal, with the command
    that builds them for real."""
    names: list[str | None] = [config.name for config in chosen] if chosen else [None]
    if instead is not None:
        what = names[0] if len(names) == 1 else f"these {len(names)} configurations"
        print(
            f"{'# ' if args.dry_run else ''}build-locally.py cannot build {what} on this machine: {instead}. "
            "Rehearsing instead: the recipe's build scripts run offline against a small stand-in of "
            "PyTorch's build; this builds NO PyTorch and makes no package.",
            flush=True,
        )
    if chosen and len(chosen) > 1 and not args.dry_run:
        announce(chosen, "rehearsing")
    failed = []
    for name in names:
        command = [sys.executable, "-m", "feedstock_tools", "rehearse", *([name] if name else [])]
        if args.verbose:
            command.append("--verbose")
        if args.dry_run:
            print(shlex.join(command))
            continue
        running = Running(f"the rehearsal of {name or 'the default configuration'}", reports_itself=True)
        # The rehearsal needs no terminal: always a group of its own, so a signal reaches all of it.
        if run_child(command, running, args.root, dict(os.environ)) != 0:
            failed.append(name or "(default)")
    if failed and len(names) > 1:  # one rehearsal has said why it failed, in its own last line
        print(f"rehearsal failed for {', '.join(failed)}", file=sys.stderr)
    if instead is not None and not args.dry_run:
        print(
            f"rehearsed {', '.join(n for n in names if n)} offline ({'failed' if failed else 'passed'}): "
            "PyTorch was NOT built and no package was made; for the real build, do what the first line "
            f"says, then: ./build-locally.py --build {build_selector(args)}",
            flush=True,
        )
    return 1 if failed else 0


def build_selector(args: argparse.Namespace) -> str:
    """How this run named its configurations, for the command that builds them for real."""
    if args.all:
        return "--all"
    if args.match:
        return f"--match {shlex.quote(args.match)}"
    return shlex.quote(args.config) if args.config else "CONFIG"


def announce(chosen: Sequence[Configuration], doing: str) -> None:
    """Before a selector's several configurations run: which, so a glob that chose too many shows it."""
    print(f"{doing} {len(chosen)} configurations in a row:", flush=True)
    for config in chosen:
        print(f"  {config.name}", flush=True)


def choose(configs: Sequence[Configuration], args: argparse.Namespace) -> tuple[list[Configuration], bool]:
    """The configurations to build, and whether they run in sequence (logs, markers, summary)."""
    if args.all:
        return list(configs), True
    if args.match:
        return by_selector(configs, args.match, args.root, several=True), True
    if args.config and config_selector.is_glob(args.config):
        chosen = by_selector(configs, args.config, args.root, several=True)
        return chosen, len(chosen) > 1
    if args.config:
        return by_selector(configs, args.config, args.root, several=False), False
    if len(configs) == 1:
        return list(configs), False
    if sys.stdin is not None and not sys.stdin.closed and sys.stdin.isatty():
        return [choose_interactively(configs)], False
    raise UserError("no configuration given and no terminal to ask on: pass one (see --list) or --all")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    interruption.install()  # SIGINT, SIGTERM, SIGHUP -> interruption.Interrupted: what was started is stopped
    root = args.root.resolve()
    configs = load_configs(root)
    only = config_selector.ConfigFilter(args.platform, args.cuda, args.blas)
    if only:
        configs = only.apply(configs)
    if args.list:
        print(format_table(configs))
        return 0
    # The recipe's files as every tool checks them, before a container or a rehearsal starts: conda-build
    # would find a broken one only after the image is pulled, the rehearsal in its own line after ours.
    check_recipe(root / "recipe")
    if args.rehearse:
        default = not (args.all or args.match or args.config)  # the rehearsal's own default configuration
        return rehearse(args, None if default else choose(configs, args)[0])
    chosen, sequential = choose(configs, args)
    if sequential and args.debug:
        raise UserError("--debug opens a shell in one build; choose a single configuration")
    check_first_pass(root / "recipe", {config.target_platform for config in chosen})
    insists = insists_on_building(args)
    if not insists:
        try:
            check_can_build(chosen)
        except CannotBuildHere as exc:
            return rehearse(args, chosen, instead=exc.reason)
    for config in chosen:
        check_buildable(config)
    if args.dry_run:
        for config in chosen:
            log = f" (output to {LOG_DIR / (config.name + '.log')})" if sequential else ""
            print(f"# {config.name}{log}")
            print(describe(build_command(config), build_environment(config, args, root)))
        return 0
    if insists and any(uses_docker(config) for config in chosen):
        check_docker(chosen)  # (without --build, check_can_build asked the daemon already)
    if sequential:
        announce(chosen, "building")
        return run_sequence(chosen, args, root)
    config = chosen[0]
    print(f"building {config.name}", flush=True)
    returncode, produced = run_one(config, args, root, None)
    for name in produced:
        print(f"built {name}")
    return returncode


def interrupted_line(exc: interruption.Interrupted) -> str | None:
    """The one line for an interruption, or None where the stopped rehearsal has printed its own."""
    running = STARTED[-1] if STARTED else None
    if running is None or running.process is None:
        return f"error: build-locally.py was {exc} before starting anything; run the same command again"
    if running.reports_itself and running.process.returncode == exc.exit_status:
        return None
    group = f"process group {running.process.pid}" if running.own_group else f"process {running.process.pid}"
    return (
        f"error: build-locally.py was {exc}: {running.what} ({group}) was stopped and no process of it is "
        "left; run the same command again (with --all/--match, configurations already built are skipped)"
    )


if __name__ == "__main__":
    try:
        status = main()
        closed_pipe.flush()
        sys.exit(status)
    except BrokenPipeError:  # `./build-locally.py --list | head -1`: the reader went away
        closed_pipe.quiet_exit()
    except (UserError, ToolError) as exc:  # ToolError: a selection error, LockBusy
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except interruption.Interrupted as exc:
        line = interrupted_line(exc)
        if line:
            print(line, file=sys.stderr, flush=True)
        sys.exit(exc.exit_status)
