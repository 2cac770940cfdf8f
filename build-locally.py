#!/usr/bin/env python3
"""Build configurations of this feedstock on your machine, the way CI builds them.

Each configuration is a file in .ci_support/ (see --list). A Linux configuration -- and a macOS one
on a Linux machine, given OSX_SDK_DIR -- is built in conda-forge's Docker image by
.scripts/run_docker_build.sh; on a Mac, macOS configurations run .scripts/run_osx_build.sh.

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
  ./build-locally.py linux_64_blas_implmklc_compiler_version14  # one CUDA 12.9 MKL build
  ./build-locally.py --match '*cuda_compiler_version1*' --prune  # every CUDA build in a row
  OSX_SDK_DIR=SDKs ./build-locally.py osx_arm64 --dry-run        # print what would run
  ./build-locally.py 'linux_64_blas_implgeneric*2.28*' --debug --output-id 'pytorch-*'
  ./build-locally.py --rehearse                                  # the offline megabuild rehearsal

Standard library only (except --rehearse, which needs requirements-dev.txt).
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from feedstock_tools.ci.ci_files import CiConfigSummary, CiFileError, read, summarize  # noqa: E402
from feedstock_tools.common import closed_pipe, config_selector, interruption  # noqa: E402
from feedstock_tools.common.errors import ToolError  # noqa: E402
from feedstock_tools.common.run_lock import LockBusy, RunLock  # noqa: E402
from feedstock_tools.conda.recipe_files import check_first_pass, check_recipe  # noqa: E402

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


def load_configs(root: Path) -> list[CiConfigSummary]:
    folder = root / ".ci_support"
    files = sorted(folder.glob("*.yaml")) if folder.is_dir() else []
    if not files:
        raise UserError(
            f"no configurations in {folder}: "
            "run 'python -m feedstock_tools render-ci' (or 'conda smithy rerender')"
        )
    try:
        for path in files:
            missing = [key for key in REQUIRED_KEYS if key not in read(path)]
            if missing:
                raise UserError(
                    f"{path.relative_to(root)} is empty or truncated (no {', '.join(missing)}): "
                    "re-render it with 'python -m feedstock_tools render-ci' (or 'conda smithy rerender')"
                )
        return [summarize(path) for path in files]
    except CiFileError as exc:
        raise UserError(f"cannot read {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read the files in {folder} ({exc}): check them, or re-render") from None


def by_selector(
    configs: Sequence[CiConfigSummary], selector: str, root: Path, several: bool
) -> list[CiConfigSummary]:
    """The configurations a name, part, glob or .ci_support path chooses (common/config_selector.py);
    ``several`` False: a part that matches more than one is an error naming them."""
    if config_selector.is_path(selector):
        names = [config_selector.resolve_one(selector, root / config_selector.CI_SUPPORT).stem]
    elif several:
        names = config_selector.select([config.name for config in configs], selector)
    else:
        names = [config_selector.select_one([config.name for config in configs], selector)]
    chosen = [config for config in configs if config.name in names]
    if not chosen:  # a path to a configuration that --platform/--cuda/--blas left out
        raise UserError(f"{selector} is not among the configurations the filters keep; drop a filter")
    return chosen


def choose_interactively(configs: Sequence[CiConfigSummary]) -> CiConfigSummary:
    print(format_table(configs, numbered=True))
    try:
        answer = input(f"\nbuild which configuration? [1-{len(configs)}] ").strip()
    except EOFError:
        raise UserError("no answer (standard input closed): pass a configuration (see --list)") from None
    if not answer.isdigit() or not 1 <= int(answer) <= len(configs):
        raise UserError(f"{answer!r} is not a number between 1 and {len(configs)}")
    return configs[int(answer) - 1]


def format_table(configs: Sequence[CiConfigSummary], numbered: bool = False) -> str:
    header = ["configuration", "platform", "BLAS", "CUDA", "Python"]
    rows = [
        [config.name, config.target_platform, config.blas, config.cuda, " ".join(config.pythons)]
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


def rehearsal_instead(configs: Sequence[CiConfigSummary]) -> str:
    """The way around a build this machine cannot run: the offline rehearsal of the same configurations."""
    chosen = configs[0].name if len(configs) == 1 else "CONFIG"
    return f"or rehearse it offline: ./build-locally.py --rehearse {shlex.quote(chosen)}"


def check_buildable(config: CiConfigSummary) -> None:
    if config.is_windows and platform.system() != "Windows":
        raise UserError(
            f"{config.name} is a Windows configuration; it can only be built on Windows "
            f"({rehearsal_instead([config])})"
        )
    if config.is_osx and platform.system() != "Darwin" and not os.environ.get("OSX_SDK_DIR"):
        raise UserError(
            f"{config.name} needs the macOS SDK on Linux: 'export OSX_SDK_DIR=$PWD/SDKs' and the build "
            "downloads it there (setting it means you accept Apple's SDK license), or point OSX_SDK_DIR at "
            f"a directory holding MacOSX<version>.sdk; {rehearsal_instead([config])}"
        )


def uses_docker(config: CiConfigSummary) -> bool:
    return not (config.is_osx and platform.system() == "Darwin")


def check_docker(configs: Sequence[CiConfigSummary]) -> None:
    around = rehearsal_instead(configs)
    if shutil.which("docker") is None:
        raise UserError(
            f"docker not found on PATH: install Docker (https://docs.docker.com/engine/install/), {around}"
        )
    timeout = seconds_from_env("BUILD_LOCALLY_DOCKER_TIMEOUT", 30.0)  # a healthy daemon answers at once
    try:
        info = subprocess.run(
            ["docker", "info"], capture_output=True, text=True, check=False, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise UserError(
            f"'docker info' did not answer within {timeout:g} s: the Docker daemon hangs; restart it "
            f"(e.g. 'sudo systemctl restart docker') or raise BUILD_LOCALLY_DOCKER_TIMEOUT, {around}"
        ) from None
    if info.returncode != 0:
        raise UserError(
            "the Docker daemon is not running ('docker info' failed): "
            f"start it, e.g. 'sudo systemctl start docker', {around}"
        )


# --- what runs ------------------------------------------------------------------------------------------


def build_environment(config: CiConfigSummary, args: argparse.Namespace, root: Path) -> dict[str, str]:
    """The variables build-locally sets for .scripts/ (on top of the caller's environment)."""
    env = {"CONFIG": config.name, "UPLOAD_PACKAGES": "False", "IS_PR_BUILD": "True"}
    if uses_docker(config):
        if config.docker_image:
            env["DOCKER_IMAGE"] = config.docker_image
        elif config.is_osx:
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
    for path in sorted((root / ".ci_support").glob("linux_64_*.yaml")):
        image = summarize(path).docker_image
        if image:
            return image
    raise UserError("no linux_64 configuration names a docker_image to cross-compile macOS targets in")


def build_command(config: CiConfigSummary) -> list[str]:
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


def start(command: Sequence[str], running: Running, own_group: bool, **popen: object) -> subprocess.Popen:
    """Start ``command`` as what runs now. ``own_group``: in a process group of its own, which a signal to
    this process is forwarded to as a whole; a build that needs the terminal (docker -it, --debug's shell)
    stays in ours, where a Ctrl-C reaches it anyway, and only it is signalled."""
    STARTED.append(running)
    running.own_group = own_group
    running.process = subprocess.Popen(list(command), start_new_session=own_group, **popen)  # type: ignore[call-overload]
    return running.process


def run_one(
    config: CiConfigSummary, args: argparse.Namespace, root: Path, log: Path | None
) -> tuple[int, tuple[str, ...]]:
    env = build_environment(config, args, root)
    command = build_command(config)
    before = packages_in(root / "build_artifacts")
    full_env = {**os.environ, **env}
    running = Running(f"the build of {config.name}")
    if log is None:
        own_group = not on_terminal()
        process = start(command, running, own_group, cwd=root, env=full_env)
        with interruption.stopped_on_exit(process, STOP_GRACE_SECONDS, group=own_group):
            returncode = process.wait()
    else:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("w", encoding="utf-8") as handle:
            handle.write(f"$ {describe(command, env)}\n")
            handle.flush()
            process = start(
                command,
                running,
                True,
                cwd=root,
                env=full_env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
            )
            assert process.stdout is not None
            with (
                interruption.stopped_on_exit(process, STOP_GRACE_SECONDS),
                Heartbeat(None if args.verbose else heartbeat_seconds()) as heartbeat,
            ):
                for line in process.stdout:
                    handle.write(line)
                    if args.verbose:
                        sys.stdout.write(line)
                    heartbeat.saw(line)
                returncode = process.wait()
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


def run_sequence(configs: Sequence[CiConfigSummary], args: argparse.Namespace, root: Path) -> int:
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
            subprocess.run(["docker", "system", "prune", "--force"], cwd=root, check=False)
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
    """Atomically (a temporary file renamed over it): two runs may finish at once."""
    logs = sorted((root / LOG_DIR).glob("*.log"))
    fd, tmp = tempfile.mkstemp(prefix=".build-locally-logs.", suffix=".zip", dir=(root / LOG_ZIP).parent)
    try:
        with (
            os.fdopen(fd, "wb") as raw,
            zipfile.ZipFile(raw, "w", compression=zipfile.ZIP_DEFLATED) as archive,
        ):
            for log in logs:
                archive.write(log, arcname=log.name)
        os.replace(tmp, root / LOG_ZIP)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
    choice.add_argument("--blas", help="only this BLAS (mkl, generic)")
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
    run.add_argument(
        "--rehearse",
        action="store_true",
        help="run the offline megabuild rehearsal of CONFIG instead of a real build",
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


def rehearse(args: argparse.Namespace, configs: Sequence[CiConfigSummary]) -> int:
    """The rehearsal of CONFIG, or of every configuration --all/--match choose, one after another."""
    if args.all or args.match or args.config:
        names: list[str | None] = [config.name for config in choose(configs, args)[0]]
    else:
        names = [None]  # the rehearsal's own default configuration
    if len(names) > 1 and not args.dry_run:
        announce([config for config in configs if config.name in names], "rehearsing")
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
        process = start(command, running, True, cwd=args.root)
        with interruption.stopped_on_exit(process, STOP_GRACE_SECONDS):
            if process.wait() != 0:
                failed.append(name or "(default)")
    if failed and len(names) > 1:  # one rehearsal has said why it failed, in its own last line
        print(f"rehearsal failed for {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def announce(chosen: Sequence[CiConfigSummary], doing: str) -> None:
    """Before a selector's several configurations run: which, so a glob that chose too many shows it."""
    print(f"{doing} {len(chosen)} configurations in a row:", flush=True)
    for config in chosen:
        print(f"  {config.name}", flush=True)


def choose(
    configs: Sequence[CiConfigSummary], args: argparse.Namespace
) -> tuple[list[CiConfigSummary], bool]:
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
        return rehearse(args, configs)
    chosen, sequential = choose(configs, args)
    if sequential and args.debug:
        raise UserError("--debug opens a shell in one build; choose a single configuration")
    check_first_pass(root / "recipe", {config.target_platform for config in chosen})
    for config in chosen:
        check_buildable(config)
    if args.dry_run:
        for config in chosen:
            log = f" (output to {LOG_DIR / (config.name + '.log')})" if sequential else ""
            print(f"# {config.name}{log}")
            print(describe(build_command(config), build_environment(config, args, root)))
        return 0
    if any(uses_docker(config) for config in chosen):
        check_docker(chosen)
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
