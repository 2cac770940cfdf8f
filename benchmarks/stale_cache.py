"""A rehearsal on a stale and poisoned per-user cache gives what it gives on an empty one (issue 43). Run by
hand, not by CI (three rehearsals of one configuration, minutes; PyPI for the venv templates):

    python benchmarks/stale_cache.py --work /tmp/stale-cache 'linux_64_*version12.9*'

1. A cache as a maintainer's machine has it: the rehearsal run once on it (``warm``), then spoiled the ways a
   machine spoils it: what an older commit left (a ``libmagma`` holding only an empty library, an old-format
   venv template), a host file appended to through a hard link of a venv template (a build step), a junk file
   in BUILD_PREFIX's entry, libmagma's library emptied, a template maker SIGKILLed while uv runs (its orphan
   and staging left behind), and a template made from another clone's shell (``UV_PRERELEASE=allow``).
2. The rehearsal on that cache (``stale``), then on an empty one (``empty``), at the same work directory
   (so that the paths compiled into the packages are the same).
3. Compared: each run's exit status, its steps (exit status, new files, compiled objects), the import and
   linkage checks, the compile-work ratio, and every package file's SHA-256; and what the stale run said of
   the cache (each entry it made again, with the reason).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # feedstock_tools puts recipe/ (the driver) on the path itself

from feedstock_tools.common import cache_store  # noqa: E402
from feedstock_tools.proofs.rehearsal import harness, prefixes  # noqa: E402
from megabuild import atomic_file  # noqa: E402


def rehearse(config: str, cache: Path, work: Path, log: Path, env: dict[str, str]) -> int:
    """``rehearse CONFIG`` as a maintainer runs it; its output into ``log``."""
    command = [sys.executable, "-m", "feedstock_tools", "rehearse", config, "--cache-dir", str(cache),
               "--work-dir", str(work)]  # fmt: skip
    started = time.monotonic()
    run = subprocess.run(
        command, check=False, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    atomic_file.write_bytes(log, run.stdout)
    status = run.returncode
    print(f"  rehearse on {cache.name}: exit {status} in {time.monotonic() - started:.0f} s (log {log})")
    return status


def outcome(work: Path) -> dict[str, object]:
    """What a run produced: its summary's verdicts and every package file's digest."""
    (run_dir,) = [p for p in work.iterdir() if (p / "summary.json").is_file()]
    summary = json.loads((run_dir / "summary.json").read_text())
    packages = {}
    for path in sorted((run_dir / "packages").rglob("*")):
        if path.is_file() and not path.is_symlink():
            packages[str(path.relative_to(run_dir))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return {
        "steps": [(s["label"], s["returncode"], s["files"], s["objects"]) for s in summary["steps"]],
        "imports": [(c["label"], c["ok"]) for c in summary["import_checks"]],
        "linkage": [(c["label"], c["errors"]) for c in summary["linkage_checks"]],
        "ratio": summary["ratio"]["value"],
        "packages": packages,
    }


def template_maker(
    cache: Path, minor: str, packages: tuple[str, ...], env: dict[str, str]
) -> subprocess.Popen:
    """Another process (a clone's run) making a venv template in ``cache``."""
    script = (
        f"import sys; sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'recipe')!r}]\n"
        "from pathlib import Path\nfrom feedstock_tools.proofs.rehearsal import prefixes\n"
        f"prefixes.venv_template(Path({str(cache)!r}), {minor!r}, Path({str(cache.parent / 'other.log')!r}), "
        f"{packages!r})\n"
    )
    return subprocess.Popen([sys.executable, "-c", script], env=env)


def kill_a_maker(cache: Path, minor: str) -> None:
    """A template maker SIGKILLed while uv runs: its orphan keeps running, its staging stays."""
    maker = template_maker(cache, minor, ("six", "packaging"), dict(os.environ))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and maker.poll() is None:
        if any("group" in lock.read_text() for lock in (cache / cache_store.LOCKS).glob("venv-*")):
            break
        time.sleep(0.05)
    maker.send_signal(signal.SIGKILL)
    maker.wait()


def spoil(cache: Path, config: Path, work: Path) -> list[str]:
    """The ways named in the module's docstring; returns what was done, a line each."""
    done = []
    (cache / "libmagma" / "lib").mkdir(parents=True, exist_ok=True)
    atomic_file.write_bytes(cache / "libmagma" / "lib" / "libmagma.so", b"")
    (cache / "venv-3.12-5-0123456789" / "bin").mkdir(parents=True, exist_ok=True)
    done.append("older commit: libmagma/lib/libmagma.so empty, venv-3.12-5-0123456789/ (no manifest)")
    # a template a step links (one made from a base), not a base (only copied when a template is made)
    venvs = sorted(
        p
        for p in cache.glob("venv-*")
        if (m := cache_store.Manifest.read(p)) is not None and m.key.inputs["base"]
    )
    target = next(p for p in venvs[0].rglob("*.pth"))
    prefix = work / "linked-prefix"
    prefixes.link_tree(venvs[0], prefix)
    with (prefix / target.relative_to(venvs[0])).open("a") as handle:
        handle.write("import os  # appended by a build step\n")
    done.append(f"a build step appended to {target.relative_to(cache)} through a hard link")
    (build_env,) = cache.glob("build-env-*")
    atomic_file.write_text(build_env / "bin" / "junk", "junk\n")
    done.append(f"a junk file in {build_env.name}/bin")
    (magma,) = [p for p in cache.glob("libmagma-*") if p.is_dir()]
    atomic_file.write_bytes(magma / "lib" / "libmagma.so", b"")
    done.append(f"{magma.name}/lib/libmagma.so emptied")
    minor = venvs[0].name.split("-")[1]
    kill_a_maker(cache, minor)
    done.append(f"a Python {minor} template maker SIGKILLed while uv ran")
    rehearsal = harness.Rehearsal(config, work_root=work / "plan")
    step = next(step for step in rehearsal.steps if "python" in step.host_names())
    # the host list of the rehearsal's first step under another shell's settings (UV_RESOLUTION=lowest would
    # build PyYAML 3.x from source, which fails with CPython 3.10's headers: measured)
    other_shell = {**os.environ, "UV_PRERELEASE": "allow"}
    if template_maker(cache, step.python, rehearsal.host_pip_requirements(step), other_shell).wait() != 0:
        raise SystemExit("could not make a template with UV_PRERELEASE=allow")
    done.append(f"Python {step.python}'s host template made with UV_PRERELEASE=allow (another clone's shell)")
    return done


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("config", help="a .ci_support configuration's name or a glob matching one")
    parser.add_argument("--work", type=Path, required=True, help="a scratch directory (emptied first)")
    args = parser.parse_args()
    from feedstock_tools.proofs.rehearsal import resolve_config

    config_path = resolve_config(args.config).path
    config = config_path.stem
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("UV_RESOLUTION", "UV_PRERELEASE")}
    stale, empty, work = args.work / "stale-cache", args.work / "empty-cache", args.work / "rehearsal"
    print(f"{config}: warming a cache, spoiling it, then the rehearsal on it and on an empty one")
    rehearse(config, stale, work, args.work / "warm.log", env)
    for line in spoil(stale, config_path, args.work):
        print(f"  spoiled: {line}")
    statuses = {"stale": rehearse(config, stale, work, args.work / "stale.log", env)}
    results = {"stale": outcome(work)}
    statuses["empty"] = rehearse(config, empty, work, args.work / "empty.log", env)
    results["empty"] = outcome(work)
    said = [line.strip() for line in (args.work / "stale.log").read_text().splitlines() if "cache:" in line]
    print("  the stale run said of the cache:", *said, sep="\n    ")
    same = {key: results["stale"][key] == results["empty"][key] for key in results["empty"]}
    packages = results["empty"]["packages"]
    differing = [p for p, d in packages.items() if results["stale"]["packages"].get(p) != d]  # type: ignore[union-attr]
    print(f"  exit status: stale {statuses['stale']}, empty {statuses['empty']}")
    print(f"  the same on both: {', '.join(k for k, v in same.items() if v) or 'nothing'}")
    print(f"  package files: {len(packages)}, differing {len(differing)}{': ' if differing else ''}"
          + ", ".join(differing[:5]))  # fmt: skip
    return 0 if all(same.values()) and statuses == {"stale": 0, "empty": 0} else 1


if __name__ == "__main__":
    raise SystemExit(main())
