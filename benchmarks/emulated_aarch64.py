"""Time the kinds of work the pytorch package tests do, in any Python: native, or aarch64 under QEMU.

linux-aarch64 packages are cross-compiled and their tests run under qemu-user (conda-smithy's `test:
native_and_emulated`). This measures what that costs (docs/records/2026-11-22-emulated-aarch64.md has the
figures and how the aarch64 interpreter was set up):

    python benchmarks/emulated_aarch64.py run --python "$VENV/bin/python" --json native.json
    python benchmarks/emulated_aarch64.py run --python "qemu-aarch64-static -L $SYSROOT \\
        $SYSROOT/usr/bin/python3.11" --pythonpath "$SITE" --json emulated.json
    python benchmarks/emulated_aarch64.py compare native.json emulated.json

`run` starts the interpreter once per process workload and repeat (interpreter start, `import torch`,
the recipe's own package-test scripts, pytest on a generated file) and once per repeat for the in-process
torch workloads of emulation_workloads.py, and prints a markdown table of median and minimum seconds.
`compare` prints emulated/native factors. `cpuinfo` writes the /proc/cpuinfo that QEMU >= 8.2 emulates
into a sysroot, for QEMU 7.2, under which `import torch` crashes (see docs/reference/emulated-tests.md).
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from emulation_workloads import WORKLOADS as TORCH_WORKLOADS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipe"))
from megabuild.atomic_file import write_text

RECIPE_TESTS = Path(__file__).resolve().parent.parent / "recipe" / "tests"
WORKLOADS_SCRIPT = Path(__file__).with_name("emulation_workloads.py")

# Workloads timed as whole interpreter runs (start, imports, work, exit), in this order
PROCESS_WORKLOADS = (
    "python-startup", "import-torch", "check_build_features.py", "check_torch_config.py", "pytest-generated",
)  # fmt: skip
ALL_WORKLOADS = (*PROCESS_WORKLOADS, *TORCH_WORKLOADS)

DESCRIBE = "import platform; print(platform.machine(), platform.python_version())"
# Reads what the emulated CPU reports: MIDR_EL1 (`mrs x0, midr_el1; ret`, run from executable memory;
# Linux and qemu-user both let EL0 read the ID registers) and the HWCAP/HWCAP2 auxiliary vector words.
READ_CPU_ID = """
import ctypes, json, mmap
code = (0xD5380000).to_bytes(4, "little") + (0xD65F03C0).to_bytes(4, "little")
page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(code)
midr = ctypes.CFUNCTYPE(ctypes.c_uint64)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()
libc = ctypes.CDLL(None)
libc.getauxval.restype = ctypes.c_ulong
print(json.dumps({"midr": midr, "hwcap": libc.getauxval(16), "hwcap2": libc.getauxval(26)}))
"""
# Feature names by HWCAP / HWCAP2 bit, as QEMU's emulated /proc/cpuinfo prints them (QEMU commit
# "linux-user: Emulate /proc/cpuinfo on aarch64 and arm", qemu-devel 2023-08-23, linux-user/elfload.c).
HWCAP_NAMES = (
    "fp", "asimd", "evtstrm", "aes", "pmull", "sha1", "sha2", "crc32", "atomics", "fphp", "asimdhp",
    "cpuid", "asimdrdm", "jscvt", "fcma", "lrcpc", "dcpop", "sha3", "sm3", "sm4", "asimddp", "sha512",
    "sve", "asimdfhm", "dit", "uscat", "ilrcpc", "flagm", "ssbs", "sb", "paca", "pacg",
)  # fmt: skip
HWCAP2_NAMES = (
    "dcpodp", "sve2", "sveaes", "svepmull", "svebitperm", "svesha3", "svesm4", "flagm2", "frint", "svei8mm",
    "svef32mm", "svef64mm", "svebf16", "i8mm", "bf16", "dgh", "rng", "bti", "mte", "ecv", "afp", "rpres",
    "mte3", "sme", "sme_i16i64", "sme_f64f64", "sme_i8i32", "sme_f16f32", "sme_b16f32", "sme_f32f32",
    "sme_fa64",
)  # fmt: skip


class BenchmarkError(Exception):
    """A user error: one line naming the problem and the fix."""


def child_env(pythonpath: str | None, threads: int) -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def run_python(python: list[str], argv: list[str], env: dict[str, str], timeout: float):
    """(seconds, completed process or None when it timed out) of one interpreter run."""
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [*python, *argv], env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, None
    except OSError as exc:
        raise BenchmarkError(f"cannot start {python[0]!r} ({exc.strerror}): fix --python") from None
    return time.perf_counter() - start, done


def failure(done: subprocess.CompletedProcess | None, timeout: float) -> str | None:
    if done is None:
        return f"timed out after {timeout:.0f} s"
    if done.returncode == 0:
        return None
    last = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
    return f"exit {done.returncode}: {last[:160]}"


def describe(python: list[str], env: dict[str, str]) -> tuple[str, str]:
    _, done = run_python(python, ["-c", DESCRIBE], env, timeout=600)
    if done is None or done.returncode != 0:
        raise BenchmarkError(f"{shlex.join(python)} does not run Python ({failure(done, 600)}): fix --python")
    machine, version = done.stdout.splitlines()[-1].split()
    return machine, version


def generated_test_file(directory: Path, count: int) -> Path:
    """A pure-Python test module of 2 * count tests: collection, assertion rewriting and reporting."""
    lines = ["import pytest", ""]
    for index in range(count):
        lines += [
            f"def test_sum_{index}():",
            f"    assert sum(n * {index} for n in range(50)) == {1225 * index}",
        ]
    lines += [f'@pytest.mark.parametrize("n", range({count}))', "def test_parametrized(n):"]
    lines += ["    assert str(n).isdigit()", ""]
    return write_text(directory / "test_generated.py", "\n".join(lines))


def process_argv(name: str, args: argparse.Namespace, work: Path) -> list[str]:
    """The interpreter's arguments for one run of a process workload."""
    if name == "python-startup":
        return ["-c", "pass"]
    if name == "import-torch":
        return ["-c", "import torch"]
    if name == "check_build_features.py":
        return [str(RECIPE_TESTS / name), *shlex.split(args.build_features_args)]
    if name == "check_torch_config.py":
        return [str(RECIPE_TESTS / name), *shlex.split(args.torch_config_args)]
    # a fresh file per run: pytest's assertion rewriting starts cold, as in a package test
    test_file = generated_test_file(Path(tempfile.mkdtemp(dir=work)), args.pytest_tests)
    return ["-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)]


def measure(args: argparse.Namespace) -> dict:
    python = shlex.split(args.python)
    env = child_env(args.pythonpath, args.threads)
    machine, version = describe(python, env)
    results: dict[str, dict] = {}

    def record(name: str, seconds: float, problem: str | None) -> None:
        entry = results.setdefault(name, {"seconds": [], "failure": None})
        entry["seconds"].append(seconds)
        entry["failure"] = entry["failure"] or problem
        print(f"  {name}: {seconds:.2f} s{f'  FAILED {problem}' if problem else ''}", file=sys.stderr)

    torch_names = [name for name in args.workloads if name in TORCH_WORKLOADS]
    with tempfile.TemporaryDirectory(prefix="emulated-aarch64-") as work:
        for repeat in range(1, args.repeat + 1):
            print(f"[run {repeat}/{args.repeat}] {shlex.join(python)}", file=sys.stderr)
            for name in (name for name in args.workloads if name in PROCESS_WORKLOADS):
                seconds, done = run_python(python, process_argv(name, args, Path(work)), env, args.timeout)
                record(name, seconds, failure(done, args.timeout))
            if torch_names:
                argv = [str(WORKLOADS_SCRIPT), "--threads", str(args.threads), *torch_names]
                seconds, done = run_python(python, argv, env, args.timeout)
                problem = failure(done, args.timeout)
                timed = {}
                if not problem:
                    try:
                        timed = json.loads(done.stdout.splitlines()[-1])["seconds"]
                    except (IndexError, ValueError, KeyError):
                        problem = "printed no JSON result"
                for name in torch_names:
                    for run in ("cold", "warm"):
                        record(f"{name} ({run})", timed.get(name, {}).get(run, seconds), problem)
    return {
        "python": python,
        "pythonpath": args.pythonpath,
        "machine": machine,
        "python_version": version,
        "threads": args.threads,
        "host_cpu": host_cpu(),
        "results": results,
    }


def host_cpu() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
             if line.startswith("model name")] if cpuinfo.is_file() else []  # fmt: skip
    return f"{names[0] if names else 'unknown CPU'}, {os.cpu_count()} cores"


def table(report: dict) -> str:
    lines = [
        f"{report['machine']} Python {report['python_version']} on {report['host_cpu']}, "
        f"{report['threads']} torch thread(s): `{shlex.join(report['python'])}`",
        "",
        "| workload | median s | min s | runs | result |",
        "|---|---:|---:|---:|---|",
    ]
    for name, entry in report["results"].items():
        seconds = entry["seconds"]
        result = (entry["failure"] or "ok").replace("|", r"\|")  # a | would end the table cell
        lines.append(
            f"| {name} | {statistics.median(seconds):.3f} | {min(seconds):.3f} | {len(seconds)} | {result} |"
        )
    return "\n".join(lines)


def comparison(native: dict, emulated: dict) -> str:
    lines = [
        f"native: {native['machine']} Python {native['python_version']}; emulated: {emulated['machine']} "
        f"Python {emulated['python_version']}; host {emulated['host_cpu']}",
        "",
        "| workload | native median s | emulated median s | emulated / native |",
        "|---|---:|---:|---:|",
    ]
    for name, entry in native["results"].items():
        other = emulated["results"].get(name)
        if other is None:
            continue
        base, slow = statistics.median(entry["seconds"]), statistics.median(other["seconds"])
        failed = [side for side, e in (("native", entry), ("emulated", other)) if e["failure"]]
        note = f" ({' and '.join(failed)} failed)" if failed else ""
        lines.append(f"| {name} | {base:.3f} | {slow:.3f} | {slow / base:.1f}x{note} |")
    return "\n".join(lines)


def load_report(path: Path) -> dict:
    try:
        report = json.loads(path.read_text())
        if not isinstance(report.get("results"), dict):
            raise ValueError("no results")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BenchmarkError(f"{path} is not a report of `run --json` ({exc}): run it again") from None
    return report


def write_cpuinfo(args: argparse.Namespace) -> None:
    python = shlex.split(args.python)
    env = child_env(None, 1)
    machine, _ = describe(python, env)
    if machine != "aarch64":
        raise BenchmarkError(f"{shlex.join(python)} runs on {machine}: cpuinfo needs an aarch64 interpreter")
    _, done = run_python(python, ["-c", READ_CPU_ID], env, timeout=600)
    if failure(done, 600):
        raise BenchmarkError(f"reading the emulated CPU's ID registers failed ({failure(done, 600)})")
    cpu = json.loads(done.stdout)
    text = cpuinfo_text(cpu["midr"], cpu["hwcap"], cpu["hwcap2"], os.cpu_count() or 1)
    target = args.sysroot / "proc" / "cpuinfo"
    target.parent.mkdir(parents=True, exist_ok=True)
    write_text(target, text)
    print(f"wrote {target}: MIDR 0x{cpu['midr']:08x}, HWCAP 0x{cpu['hwcap']:x}, HWCAP2 0x{cpu['hwcap2']:x}")


def cpuinfo_text(midr: int, hwcap: int, hwcap2: int, processors: int) -> str:
    """/proc/cpuinfo as QEMU >= 8.2 emulates it for aarch64: one block per host CPU, the MIDR_EL1 fields
    (revision 3:0, part 15:4, variant 23:20, implementer 31:24) in hexadecimal, architecture 8."""
    features = [name for bit, name in enumerate(HWCAP_NAMES) if hwcap >> bit & 1]
    features += [name for bit, name in enumerate(HWCAP2_NAMES) if hwcap2 >> bit & 1]
    revision = midr & 0xF
    block = (
        f"model name\t: ARMv8 Processor rev {revision} (v8l)\nBogoMIPS\t: 100.00\n"
        f"Features\t: {' '.join(features)}\nCPU implementer\t: 0x{midr >> 24 & 0xFF:02x}\n"
        f"CPU architecture: 8\nCPU variant\t: 0x{midr >> 20 & 0xF:x}\nCPU part\t: 0x{midr >> 4 & 0xFFF:03x}\n"
        f"CPU revision\t: {revision}\n\n"
    )
    return "".join(f"processor\t: {index}\n{block}" for index in range(processors))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="time the workloads in one interpreter, print a table")
    run.add_argument("--python", required=True, help='the interpreter command, e.g. "qemu-aarch64-static '
                     '-L SYSROOT SYSROOT/usr/bin/python3.11" (split like a shell does)')  # fmt: skip
    run.add_argument("--pythonpath", help="PYTHONPATH for the interpreter (where torch is installed)")
    run.add_argument("--repeat", type=int, default=3, help="runs of each workload (default 3)")
    run.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS and torch threads (default 1)")
    run.add_argument("--workloads", nargs="+", choices=ALL_WORKLOADS, default=list(ALL_WORKLOADS),
                     metavar="NAME", help=f"default all: {', '.join(ALL_WORKLOADS)}")  # fmt: skip
    run.add_argument("--build-features-args", default="--require onednn distributed",
                     help="arguments of check_build_features.py (default: a CPU build)")  # fmt: skip
    run.add_argument("--torch-config-args", default="--blas=generic --cuda=no",
                     help="arguments of check_torch_config.py (default: generic-BLAS CPU)")  # fmt: skip
    run.add_argument("--pytest-tests", type=int, default=200, help="pytest-generated: 2 x this many tests")
    run.add_argument("--timeout", type=float, default=3600, help="seconds one interpreter run may take")
    run.add_argument("--json", type=Path, help="also write the measurements here (for compare)")
    compare = commands.add_parser("compare", help="print emulated/native factors of two `run --json` files")
    compare.add_argument("native", type=Path)
    compare.add_argument("emulated", type=Path)
    cpuinfo = commands.add_parser("cpuinfo", help="write SYSROOT/proc/cpuinfo as QEMU >= 8.2 emulates it")
    cpuinfo.add_argument("--python", required=True, help="the emulated interpreter command, as for run")
    cpuinfo.add_argument("--sysroot", type=Path, required=True, help="the -L directory of qemu-aarch64")
    args = parser.parse_args(argv)
    for option in ("python", "build_features_args", "torch_config_args"):
        if not hasattr(args, option):
            continue
        try:
            words = shlex.split(getattr(args, option))
        except ValueError as exc:
            parser.error(f"--{option.replace('_', '-')}: {exc}")
        if option == "python" and not words:
            parser.error("--python is empty: give the interpreter command")
    if args.command == "run":
        if args.repeat < 1 or args.threads < 1 or args.pytest_tests < 1:
            parser.error("--repeat, --threads and --pytest-tests must be at least 1")
        if args.json and not args.json.resolve().parent.is_dir():
            parser.error(f"--json {args.json}: its directory does not exist")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.command == "compare":
            print(comparison(load_report(args.native), load_report(args.emulated)))
            return 0
        if args.command == "cpuinfo":
            write_cpuinfo(args)
            return 0
        report = measure(args)
        if args.json:
            write_text(args.json, json.dumps(report, indent=1) + "\n")
        print(table(report))
        return 1 if any(entry["failure"] for entry in report["results"].values()) else 0
    except BenchmarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: no report written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
