"""The megabuild passes, one per conda-build package name (``PKG_NAME``).

* ``libtorch-split`` (the top-level build, pass 1): configure and build everything once with
  ``${PYTHON} setup.py build``, MAGMA off; save what later outputs need in ``build/megabuild/``.
* ``libtorch``: stage the C++ libraries, headers and CMake files (checked unchanged since pass 1).
* ``libtorch-cuda-linalg``: ``magma_variant=nomagma`` stages the library pass 1 saved; ``magma`` switches
  ``USE_MAGMA`` on in CMakeCache.txt, rebuilds (only ``torch_cuda_linalg`` may compile) and stages.
* ``pytorch``: retarget the cache to this output's ``${PYTHON}``, build (only the Python-linked targets may
  compile: ``torch_python``, ``_C``, ``nnapi_backend`` off Darwin), write the dist-info and stage the Python
  package.

Every pass after the first depends only on pass 1's results, never on another output's: conda-build's
documentation promises each output script a fresh copy of the work directory while its code runs them in the
same directory (docs/megabuild.md), and the outputs' order is conda-build's choice.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from megabuild import activation, environment, report
from megabuild.cmake_cache import CacheChange, CMakeCache
from megabuild.conda_env import CondaBuild
from megabuild.errors import MegabuildError
from megabuild.log import say, step, warn
from megabuild.ninja_log import PassWork, ran_between, read_log, target_of_object
from megabuild.package_files import LIBTORCH, LIBTORCH_CUDA_LINALG, PYTORCH
from megabuild.python_target import (
    PythonFacts,
    check_guarded_options,
    check_retarget_kept,
    guarded_values,
    probe,
    python_linked_targets,
    retarget,
)
from megabuild.staging import UpstreamTrees, files_by_package, stage_package

TOP_LEVEL = "libtorch-split"
STATE_FILE = "pass1.json"
SAVED_CACHE = "CMakeCache.pass1.txt"
SAVED_LINALG = "linalg-nomagma"  # an install-tree-shaped directory: lib/libtorch_cuda_linalg.so


class PassFailed(MegabuildError):
    """A build command of a pass failed; nothing of the pass was staged."""


@dataclass
class Options:
    verbose: bool = False
    strict: bool = False  # unexpected recompiles are errors, not warnings


@dataclass
class PassContext:
    build: CondaBuild
    env: dict[str, str]  # the upstream build's environment
    options: Options

    @property
    def cache_path(self) -> Path:
        return self.build.build_dir / "CMakeCache.txt"

    @property
    def install_tree(self) -> Path:
        return self.build.src_dir / "torch"


# --------------------------------------------------------------------------------------------------------
# dispatch


def run(build: CondaBuild, caller_env: Mapping[str, str], options: Options) -> list[report.PassRecord]:
    passes: dict[str, Callable[[PassContext], report.PassRecord]] = {
        TOP_LEVEL: pass_configure_and_build,
        LIBTORCH: pass_stage_libtorch,
        LIBTORCH_CUDA_LINALG: pass_cuda_linalg,
        PYTORCH: pass_pytorch,
    }
    chosen = passes.get(build.pkg_name)
    if chosen is None:
        raise MegabuildError(
            f"unknown PKG_NAME {build.pkg_name!r}: the driver builds {', '.join(passes)}; give this output "
            "no script, or add its pass to recipe/megabuild/passes.py"
        )
    env, settings = environment.upstream_environment(build, caller_env, options.verbose)
    say(f"PKG_NAME={build.pkg_name} SRC_DIR={build.src_dir} PREFIX={build.prefix}")
    for setting in settings:
        shown = "(removed)" if setting.value is None else setting.value
        say(f"  env {setting.name}={shown}  # {setting.why}")
    context = PassContext(build, env, options)
    record = chosen(context)
    records = report.append(build.build_dir, record, fresh=build.pkg_name == TOP_LEVEL)
    say(f"per-pass work so far ({build.build_dir / report.REPORT_NAME}):")
    for line in report.table(records).splitlines():
        say(f"  {line}")
    return records


# --------------------------------------------------------------------------------------------------------
# pass 1


def pass_configure_and_build(ctx: PassContext) -> report.PassRecord:
    build = ctx.build
    python = _require_python(build, "the top-level build (libtorch-split)")
    started = time.monotonic()
    work = _run_build(ctx, "pass 1 (libtorch-split)", [str(python), "setup.py", "build"])
    cache = CMakeCache.load(ctx.cache_path)
    problems = _pass1_cache_problems(cache, build)
    if problems:
        raise PassFailed(
            f"pass 1 configured {'; '.join(problems)}: check the host requirements of libtorch-split"
        )
    with step("saving pass 1's results for the outputs"):
        _save_pass1_state(ctx, cache, probe(python))
    return _record(name="1 libtorch-split", package=TOP_LEVEL, started=started, work=work, expected=None)


def _pass1_cache_problems(cache: CMakeCache, build: CondaBuild) -> list[str]:
    expected = {"BUILD_PYTHON": "ON", "USE_NUMPY": "ON", "USE_CUDA": "ON" if build.cuda_version else "OFF"}
    if build.cuda_version:
        expected |= {"BUILD_LAZY_CUDA_LINALG": "ON", "USE_MAGMA": "OFF"}
    return [
        f"{key}={cache.get(key)!r} (expected {value})"
        for key, value in expected.items()
        if _bool(cache.get(key)) != value
    ]


def _save_pass1_state(ctx: PassContext, cache: CMakeCache, python: PythonFacts) -> None:
    """Everything later outputs need, written to a temporary directory and renamed into place."""
    state_dir = ctx.build.state_dir
    scratch = Path(tempfile.mkdtemp(prefix=".megabuild-state-", dir=state_dir.parent))
    try:
        shutil.copy2(ctx.cache_path, scratch / SAVED_CACHE)
        grouped = files_by_package(UpstreamTrees(install=ctx.install_tree))
        manifest = {p.path: _sha256(ctx.install_tree / p.path) for p in grouped[LIBTORCH]}
        for placement in grouped[LIBTORCH_CUDA_LINALG]:
            target = scratch / SAVED_LINALG / placement.path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ctx.install_tree / placement.path, target, follow_symlinks=False)
        state = {
            "guarded_options": guarded_values(cache),
            "reconfigure_inputs": environment.reconfigure_inputs(ctx.env),
            "python": python.short,
            "libtorch_manifest": manifest,
        }
        (scratch / STATE_FILE).write_text(json.dumps(state, indent=1, sort_keys=True) + "\n")
        if state_dir.exists():
            shutil.rmtree(state_dir)
        os.replace(scratch, state_dir)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    say(
        f"saved {SAVED_CACHE}, {len(manifest)} libtorch file hashes and the non-MAGMA linalg library "
        f"in {state_dir}"
    )


def load_pass1_state(build: CondaBuild) -> dict:
    path = build.state_dir / STATE_FILE
    if not path.exists() or not (build.state_dir / SAVED_CACHE).exists():
        raise MegabuildError(
            f"no saved state of pass 1 in {build.state_dir}: output {build.pkg_name} reuses the work "
            "directory of the top-level build libtorch-split; build the whole recipe, not this output alone"
        )
    return json.loads(path.read_text())


# --------------------------------------------------------------------------------------------------------
# staging passes


def pass_stage_libtorch(ctx: PassContext) -> report.PassRecord:
    state = load_pass1_state(ctx.build)
    started = time.monotonic()
    with step("checking that libtorch's files are pass 1's"):
        changed = [
            path
            for path, digest in state["libtorch_manifest"].items()
            if _sha256(ctx.install_tree / path) != digest
        ]
    if changed:
        raise MegabuildError(
            f"{len(changed)} libtorch file(s) changed since pass 1, first {ctx.install_tree / changed[0]}: "
            "a later pass rebuilt it (see build/megabuild-report.json); fix that pass before packaging"
        )
    # CUDA: CF_TORCH_CUDA_ARCH_LIST for downstream builds (megabuild/activation.py); undone if staging fails
    scripts = (
        activation.write_activation_scripts(ctx.build.prefix, ctx.env["TORCH_CUDA_ARCH_LIST"])
        if ctx.build.cuda_version
        else []
    )
    try:
        staged = _stage(ctx, LIBTORCH, UpstreamTrees(install=ctx.install_tree)) + len(scripts)
    except BaseException:
        activation.remove(ctx.build.prefix, scripts)
        raise
    return _record(
        name="2 libtorch", package=LIBTORCH, started=started, work=PassWork([], [], []), expected=[],
        staged=staged,
    )  # fmt: skip


def pass_cuda_linalg(ctx: PassContext) -> report.PassRecord:
    build = ctx.build
    if build.cuda_version is None:
        raise MegabuildError(
            "libtorch-cuda-linalg is built for CUDA only (cuda_compiler_version=None): skip it for CPU"
        )
    variant = build.variant.get("magma_variant")
    state = load_pass1_state(build)
    started = time.monotonic()
    if variant == "nomagma":
        staged = _stage(ctx, LIBTORCH_CUDA_LINALG, UpstreamTrees(install=build.state_dir / SAVED_LINALG))
        return _record(
            name="3 libtorch-cuda-linalg (nomagma)", package=LIBTORCH_CUDA_LINALG, started=started,
            work=PassWork([], [], []), expected=[], staged=staged,
        )  # fmt: skip
    if variant != "magma":
        raise MegabuildError(
            f"magma_variant={variant!r}: libtorch-cuda-linalg needs magma_variant nomagma or magma "
            "(recipe/conda_build_config.yaml)"
        )
    python = _require_python(build, "libtorch-cuda-linalg (its rebuild re-runs CMake's code generators)")
    cache = CMakeCache.load(ctx.cache_path)
    changes = retarget(cache, probe(python))
    changes += [c for c in [cache.set("USE_MAGMA", "ON")] if c is not None]
    _check_reconfigure_inputs(ctx, state)
    _write_cache(cache, changes)
    # Only the linalg target: the retarget above may have moved the cache to another Python than the last
    # pytorch pass built torch_python for; rebuilding torch_python here would be work no package uses.
    work = _run_build(
        ctx,
        "MAGMA rebuild of torch_cuda_linalg",
        [
            "cmake",
            "--build",
            str(build.build_dir),
            "--target",
            "torch_cuda_linalg",
            "-j",
            ctx.env["MAX_JOBS"],
        ],
    )
    _run_command(ctx, "installing into <src>/torch", ["cmake", "--install", str(build.build_dir)])
    after = CMakeCache.load(ctx.cache_path)
    _check_kept(after, changes)
    if _bool(after.get("USE_MAGMA")) != "ON":
        raise PassFailed(
            "CMake switched USE_MAGMA back off (MAGMA not found under MAGMA_HOME="
            f"{ctx.env.get('MAGMA_HOME')}): add libmagma-devel to the host of libtorch-cuda-linalg (magma)"
        )
    _check_guarded(after, state)
    name = "3 libtorch-cuda-linalg (magma)"
    unexpected = _check_work(ctx, name, work, ["torch_cuda_linalg"])
    staged = _stage(ctx, LIBTORCH_CUDA_LINALG, UpstreamTrees(install=ctx.install_tree))
    return _record(
        name=name, package=LIBTORCH_CUDA_LINALG, started=started, work=work, expected=["torch_cuda_linalg"],
        unexpected=unexpected, changes=changes, staged=staged,
    )  # fmt: skip


def pass_pytorch(ctx: PassContext) -> report.PassRecord:
    build = ctx.build
    state = load_pass1_state(build)
    python = _require_python(build, "pytorch")
    if build.sp_dir is None:
        raise MegabuildError("SP_DIR is not set: pytorch needs python in its host requirements")
    started = time.monotonic()
    target = probe(python)
    cache = CMakeCache.load(ctx.cache_path)
    _check_magma_present(cache)
    changes = retarget(cache, target)
    _check_reconfigure_inputs(ctx, state)
    _write_cache(cache, changes)
    work = _run_build(ctx, f"pytorch build for Python {target.short}", [str(python), "setup.py", "build"])
    after = CMakeCache.load(ctx.cache_path)
    check_retarget_kept(after, target, state["guarded_options"])
    _check_kept(after, changes)
    metadata = build.state_dir / f"dist-info-{target.nodot}"
    shutil.rmtree(metadata, ignore_errors=True)
    metadata.mkdir(parents=True)
    _run_command(
        ctx,
        "writing torch's dist-info",
        [str(python), "setup.py", "dist_info", "--output-dir", str(metadata)],
    )
    for dist_info in metadata.glob("*.dist-info"):
        # conda owns the files: pip must not uninstall or overwrite them
        (dist_info / "INSTALLER").write_text("conda\n")
    setuptools_tree = build.build_dir / target.setuptools_lib_dir
    if not setuptools_tree.is_dir():
        raise PassFailed(f"setup.py build left no {setuptools_tree}: check setuptools in the host of pytorch")
    trees = UpstreamTrees(install=ctx.install_tree, setuptools=setuptools_tree, metadata=metadata)
    name = f"4 pytorch (py{target.short})"
    expected = list(python_linked_targets(build.target_platform))
    unexpected = _check_work(ctx, name, work, expected)
    staged = _stage(ctx, PYTORCH, trees)
    return _record(
        name=name, package=PYTORCH, started=started, work=work, expected=expected,
        unexpected=unexpected, changes=changes, staged=staged,
    )  # fmt: skip


# --------------------------------------------------------------------------------------------------------
# helpers


def _require_python(build: CondaBuild, who: str) -> Path:
    if build.python is None or not build.python.exists():
        raise MegabuildError(
            f"no Python at PYTHON={build.python or '(unset)'}: {who} needs python in its host requirements"
        )
    if build.python.is_dir() or not os.access(build.python, os.X_OK):
        raise MegabuildError(
            f"PYTHON={build.python} is not an executable file: {who} needs python in its host requirements"
        )
    return build.python


def _check_magma_present(cache: CMakeCache) -> None:
    """After the MAGMA pass the shared cache links torch_cuda_linalg to libmagma; every later build needs it.

    Switching USE_MAGMA back off would recompile the linalg sources in every later pass instead."""
    if _bool(cache.get("USE_MAGMA")) != "ON":
        return
    missing = [
        path
        for key in ("MAGMA_LIBRARIES", "MAGMA_INCLUDE_DIR")
        for path in (cache.get(key) or "").split(";")
        if path and not Path(path).exists()
    ]
    if missing:
        raise MegabuildError(
            f"the build cache uses MAGMA (the magma pass of libtorch-cuda-linalg ran first) but {missing[0]} "
            "is missing: add libmagma-devel to this output's host requirements (build-time only, "
            "ignore_run_exports_from it)"
        )


def _write_cache(cache: CMakeCache, changes: list[CacheChange]) -> None:
    say(f"CMakeCache.txt: {len(changes)} change(s)")
    for change in changes:
        say(f"  {change.describe()}")
    cache.write()


def _check_reconfigure_inputs(ctx: PassContext, state: dict) -> None:
    """The reconfigure that our cache edit triggers must see pass 1's environment."""
    now = environment.reconfigure_inputs(ctx.env)
    before: dict[str, str] = state["reconfigure_inputs"]
    differing = sorted(k for k in set(now) | set(before) if now.get(k) != before.get(k))
    if differing:
        key = differing[0]
        raise MegabuildError(
            f"environment variable {key} is {now.get(key)!r} here but was {before.get(key)!r} in pass 1 "
            f"({len(differing)} differ): CMake's reconfigure would read it; give every output the build "
            "requirements and variables of libtorch-split"
        )


def _check_kept(cache: CMakeCache, changes: list[CacheChange]) -> None:
    lost = cache.not_kept(changes)
    if lost:
        raise PassFailed(
            f"{cache.path}: CMake did not keep {'; '.join(lost)}: the reconfigure overrode our edit "
            "(see docs/megabuild.md, Retargeting)"
        )


def _check_guarded(cache: CMakeCache, state: dict) -> None:
    problems = check_guarded_options(cache, state["guarded_options"])
    if problems:
        raise PassFailed(f"{cache.path}: {'; '.join(problems)}: never let these change between passes")


def _run_command(ctx: PassContext, what: str, command: list[str]) -> None:
    with step(what):
        try:
            subprocess.run(command, cwd=ctx.build.src_dir, env=ctx.env, check=True)
        except OSError as exc:
            raise PassFailed(
                f"{what} failed: cannot run {command[0]} ({exc.strerror or exc}): add it to the build "
                "requirements"
            ) from None
        except subprocess.CalledProcessError as exc:
            raise PassFailed(
                f"{what} failed: `{' '.join(command[:4])}` exited with status {exc.returncode}: the cause "
                "is in the build log above; nothing of this pass was staged"
            ) from None


def _run_build(ctx: PassContext, what: str, command: list[str]) -> PassWork:
    log_path = ctx.build.build_dir / ".ninja_log"
    before = read_log(log_path)
    _run_command(ctx, what, command)
    return PassWork.from_entries(ran_between(before, read_log(log_path)))


def _stage(ctx: PassContext, package: str, trees: UpstreamTrees) -> int:
    with step(f"staging {package} into {ctx.build.prefix}"):
        staged = stage_package(package, trees, ctx.build.prefix, ctx.build.sp_dir)
    say(f"staged {len(staged.files)} file(s) and {len(staged.links)} link(s) for {package}")
    return len(staged.files) + len(staged.links)


def _check_work(ctx: PassContext, name: str, work: PassWork, expected: list[str]) -> list[str]:
    """Objects compiled outside the pass's expected targets: a warning, or (--strict) a failed pass.

    Runs before staging, so a strict failure stages nothing."""
    unexpected = [o for o in work.objects if target_of_object(o) not in set(expected)]
    if unexpected:
        message = (
            f"{name} compiled {len(unexpected)} object(s) outside {', '.join(expected) or 'nothing'}, "
            f"first {unexpected[0]}: an upstream cause of needless recompiles (docs/megabuild.md)"
        )
        if ctx.options.strict:
            raise PassFailed(message)
        warn(message)
    return unexpected


def _record(
    *,
    name: str,
    package: str,
    started: float,
    work: PassWork,
    expected: list[str] | None,
    unexpected: Sequence[str] = (),
    changes: list[CacheChange] | None = None,
    staged: int = 0,
) -> report.PassRecord:
    return report.PassRecord(
        pass_name=name,
        package=package,
        seconds=round(time.monotonic() - started, 2),
        targets_rebuilt=work.linked,
        objects_compiled=work.objects,
        objects_by_target={target: len(objs) for target, objs in work.objects_by_target().items()},
        expected_targets=expected,
        unexpected_objects=list(unexpected),
        cache_changes=[change.describe() for change in changes or []],
        staged_files=staged,
    )


def _sha256(path: Path) -> str:
    if path.is_symlink():
        return "symlink:" + os.readlink(path)
    if not path.is_file():
        return "missing"
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _bool(value: str | None) -> str | None:
    if value is None:
        return None
    return "ON" if value.upper() in {"1", "ON", "YES", "TRUE", "Y"} else "OFF"
