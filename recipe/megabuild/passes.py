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
same directory (docs/reference/megabuild.md), and the outputs' order is conda-build's choice.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

from megabuild import (
    activation,
    compiler_cache,
    environment,
    ninja_graph,
    pep517,
    python_products,
    report,
    windows,
)
from megabuild.atomic_file import write_text
from megabuild.child_process import run_child
from megabuild.cmake_cache import CacheChange, CMakeCache
from megabuild.conda_env import CondaBuild
from megabuild.cross import use_build_machine_protoc
from megabuild.errors import MegabuildError
from megabuild.host_prefix import (
    check_no_foreign_python_files,
    check_output_python,
    check_pass1_added_none,
    python_tree_files,
)
from megabuild.interrupt import checkpoint
from megabuild.log import say, step, warn
from megabuild.ninja_log import (
    LogEntry,
    PassWork,
    check_ninja_writes_known_log,
    ran_between,
    read_log,
    target_of_linked,
    target_of_object,
)
from megabuild.package_files import LIBTORCH, LIBTORCH_CUDA_LINALG, PYTORCH, TOP_LEVEL
from megabuild.python_target import (
    PythonFacts,
    check_guarded_options,
    check_retarget_kept,
    guarded_values,
    probe,
    python_linked_targets,
    retarget,
)
from megabuild.staging import (
    PreparedStage,
    UpstreamTrees,
    files_by_package,
    prepare_stage,
    require_extension_module,
)
from megabuild.windows_python import retarget_windows

STATE_FILE = "pass1.json"
SAVED_CACHE = "CMakeCache.pass1.txt"
SAVED_LINALG = "linalg-nomagma"  # an install-tree-shaped directory: lib/libtorch_cuda_linalg.so
RETARGETED = "retargeted-python.json"  # the Python the last cache edit named (written before the edit)


T = TypeVar("T")


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
    # what to undo when the pass ends (the assembly of a package that was not moved in)
    cleanup: ExitStack
    # the package a pass assembled beside PREFIX: run() writes the report, then moves it in
    pending_stage: PreparedStage | None = None
    # the shape of the source tree (megabuild/pep517.py): setup.py (SETUP_PY below), or scikit-build-core
    # (skbuild.KIND); set by run()
    kind: SourceTreeKind | None = None
    # pass 1: the files below the host prefix's Python directories before it ran (host_prefix.py)
    host_python_files: set[str] | None = None
    # the job's compiler cache (None on Windows): its stats log tells compiled from served objects
    cache: compiler_cache.CompilerCache | None = None

    @property
    def cache_path(self) -> Path:
        return self.build.build_dir / "CMakeCache.txt"

    @property
    def install_tree(self) -> Path:
        """Pass 1's install tree: CMake's install prefix <src>/torch (setup.py), or torch/ of pass 1's
        unpacked wheel (scikit-build-core)."""
        return (self.kind or SETUP_PY).install_tree(self.build)

    def trees(self, install: Path | None = None, **python_trees: Path) -> UpstreamTrees:
        """The upstream trees to stage from, named the way the target platform names libraries."""
        return UpstreamTrees(install=install, shlib_ext=self.build.shlib_ext, **python_trees)


@dataclass(frozen=True)
class SourceTreeKind:
    """What a kind of source tree (megabuild/pep517.py) does its own way: where pass 1's install tree is, how
    the MAGMA pass installs torch_cuda_linalg, and the passes it replaces. The entry point (__main__.py)
    hands the kinds to run(), so this module never imports the scikit-build-core one, which builds on it."""

    name: pep517.SourceKind
    install_tree: Callable[[CondaBuild], Path]
    install_linalg: Callable[[PassContext], Path]
    passes: Mapping[str, Callable[[PassContext], report.PassRecord]]


def _setup_py_install_linalg(ctx: PassContext) -> Path:
    _run_command(ctx, "installing into <src>/torch", ["cmake", "--install", str(ctx.build.build_dir)])
    return ctx.install_tree


# setup.py trees (2.13): CMake installs into <src>/torch, every pass is this module's own
SETUP_PY = SourceTreeKind(
    pep517.SETUPTOOLS, lambda build: build.src_dir / "torch", _setup_py_install_linalg, {}
)


# --------------------------------------------------------------------------------------------------------
# dispatch


def run(
    build: CondaBuild,
    caller_env: Mapping[str, str],
    options: Options,
    kinds: Sequence[SourceTreeKind] = (SETUP_PY,),
) -> list[report.PassRecord]:
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
    _check_work_dir(build)
    source = pep517.source_kind(build.src_dir)
    kind = next((k for k in kinds if k.name == source), None)
    if kind is None:
        raise MegabuildError(f"no passes for a {source} source tree: run the driver as python -m megabuild")
    chosen = kind.passes.get(build.pkg_name, chosen)
    cache = compiler_cache.locate(build, caller_env)
    env, settings = environment.upstream_environment(build, caller_env, options.verbose, cache)
    say(f"PKG_NAME={build.pkg_name} SRC_DIR={build.src_dir} PREFIX={build.prefix} source tree: {source}")
    for setting in settings:
        shown = "(removed)" if setting.value is None else setting.value
        say(f"  env {setting.name}={shown}  # {setting.why}")
    protobuf = use_build_machine_protoc(build)
    if protobuf is not None:
        say(f"cross-compiling: protobuf::protoc is {build.build_prefix}/bin/protoc (edited {protobuf})")
    # Everything that can be checked is checked before the first edit or compile (MAX_JOBS above, in
    # upstream_environment), so a pass that stops leaves a build directory the same command can run again on.
    fresh = build.pkg_name == TOP_LEVEL
    if not fresh:
        report.load(build.build_dir)  # a corrupt report is an error now, not after the build
        check_no_foreign_python_files(build)
        check_pass1_blas(load_pass1_state(build), env)
    if cache is not None:
        env["CCACHE_STATSLOG"] = str(compiler_cache.start_pass(cache))
        say(f"compiler cache {cache.directory} (ccache {cache.version}, {cache.program})")
    with ExitStack() as cleanup:
        context = PassContext(build, env, options, cleanup, kind=kind, cache=cache)
        if fresh:
            context.host_python_files = python_tree_files(build)
        record = _count_cache_hits(context, chosen(context))
        # The report first (atomic), the package last: a report that cannot be written stages nothing.
        records = report.append(build.build_dir, record, fresh=fresh)
        if context.pending_stage is not None:
            context.pending_stage.commit()
            say(
                f"staged {record.staged_files} file(s) and link(s) for {context.pending_stage.staged.package}"
            )
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
    # hours of compiling must not end in a log this driver cannot read: ask the ninja that will run first
    check_ninja_writes_known_log(ctx.env)
    before = _log_snapshot(ctx)
    _run_command(ctx, "pass 1 configure (libtorch-split)", [str(python), "setup.py", "build", "--cmake-only"])
    _settle_graph(ctx)
    _run_command(ctx, "pass 1 (libtorch-split)", [str(python), "setup.py", "build"])
    cache = CMakeCache.load(ctx.cache_path)
    problems = _pass1_cache_problems(cache, build)
    if problems:
        raise PassFailed(
            f"pass 1 configured {'; '.join(problems)}: check the host requirements of libtorch-split"
        )
    _check_settled(ctx)
    with step("saving pass 1's results for the outputs"):
        _save_pass1_state(ctx, cache, probe(python))
    # read only after the state is saved: a log problem found now cannot cost the compile
    work = _work_since(ctx, before)
    return _record(name="1 libtorch-split", package=TOP_LEVEL, started=started, work=work, expected=None)


def _settle_graph(ctx: PassContext) -> None:
    """Before anything is compiled, reconfigure until CMake writes the same command lines twice.

    Chosen over writing the first reconfigure's rewrite into the cache ourselves: which entries a
    reconfigure changes is upstream's (or a distribution patch's) CMake logic, known only by running it;
    Debian's 2.6.0 turns a library path into ``-lfmt`` (megabuild/ninja_graph.py), 2.13.0 may have
    others. A reconfigure costs seconds to a minute; the relink of libtorch_cpu it saves in every later
    pass costs minutes each."""
    settled = _graph_step(
        "settling the build graph (reconfigure until the command lines stop changing)",
        lambda: ninja_graph.settle(ctx.build.build_dir, ctx.env),
    )
    if settled.rewritten:
        say(
            f"the first reconfigure rewrote {len(settled.rewritten)} command line(s) (first "
            f"{settled.rewritten[0]}); settled after {settled.reconfigures} reconfigure(s), before compiling"
        )


def _check_settled(ctx: PassContext) -> None:
    """After the build: reconfigure (what every later pass's cache edit triggers) and build again; what
    that compiles or links, a later pass would have redone. Done here once, and a warning, or (--strict)
    a failed pass: the settle missed a rewrite."""
    build_dir = ctx.build.build_dir
    build_again = ["cmake", "--build", str(build_dir), "-j", ctx.env["MAX_JOBS"]]
    stale = _graph_step(
        "checking that a reconfigure leaves nothing to rebuild",
        lambda: ninja_graph.rebuilt_after_reconfigure(
            build_dir, ctx.env, lambda: _run_command(ctx, "building again", build_again)
        ),
    )
    if stale:
        message = (
            f"pass 1 did not settle the build graph: after a reconfigure ninja rebuilt {len(stale)} "
            f"object(s)/linked file(s), first {stale[0]}, which every later pass would have redone "
            "(`ninja -C build -n -d explain` after `cmake build` says why)"
        )
        if ctx.options.strict:
            raise PassFailed(message)
        warn(message)


def _pass1_cache_problems(cache: CMakeCache, build: CondaBuild) -> list[str]:
    expected = {"BUILD_PYTHON": "ON", "USE_NUMPY": "ON", "USE_CUDA": "ON" if build.cuda_version else "OFF"}
    if build.cuda_version:
        lazy = windows.lazy_cuda_linalg(build.target_platform)
        expected |= {"BUILD_LAZY_CUDA_LINALG": "ON" if lazy else "OFF"}
        expected |= {"USE_MAGMA": environment.pass1_magma(build)}
    # an option CMake forced off (cmake_dependent_option) may have no cache entry at all
    return [
        f"{key}={cache.get(key)!r} (expected {value})"
        for key, value in expected.items()
        if (_bool(cache.get(key)) or "OFF") != value
    ]


def check_pass1_blas(state: Mapping[str, object], env: Mapping[str, str]) -> None:
    """A later output packages pass 1's libraries: pass 1 must have built its BLAS. conda-build and
    rattler-build run one top-level build per BLAS (docs/reference/megabuild.md), but a recipe whose top level
    stopped using blas_impl would get one pass 1 for both, and staging would package its BLAS silently."""
    built, wanted = state.get("blas"), env.get("BLAS")
    if built != wanted:
        raise MegabuildError(
            f"pass 1 of this work directory built BLAS={built}, this output's is BLAS={wanted}: its package "
            "would hold the other BLAS's libraries; keep blas_impl in the top-level build's text so that "
            "every BLAS gets a top-level build of its own (recipe/meta.yaml)"
        )


def _count_cache_hits(ctx: PassContext, record: report.PassRecord) -> report.PassRecord:
    """The record's objects split into those compiled and those the compiler cache served, by the stats log
    of this pass. Read after the pass (its results are saved): a log problem costs the count, not the
    build, and leaves every object counted as compiled."""
    if ctx.cache is None or not record.objects_compiled:
        return record
    try:
        logged = compiler_cache.read_stats_log(ctx.cache.stats_log)
        sources = compiler_cache.compile_sources(ctx.build.build_dir, ctx.env)
    except (OSError, MegabuildError) as exc:
        warn(f"the compiler cache's stats log could not be read ({exc}): every object counted as compiled")
        return record
    hits = compiler_cache.served_from_cache(record.objects_compiled, logged, sources)
    served = set(hits)
    compiled = [o for o in record.objects_compiled if o not in served]
    say(f"compiler cache: {len(compiled)} object(s) compiled, {len(hits)} served from the cache")
    record.objects_compiled = compiled
    record.objects_from_cache = hits
    record.objects_by_target = {
        target: len(objs) for target, objs in PassWork(compiled, [], []).objects_by_target().items()
    }
    return record


def _save_pass1_state(ctx: PassContext, cache: CMakeCache, python: PythonFacts) -> None:
    """Everything later outputs need, written to a temporary directory and renamed into place."""
    state_dir = ctx.build.state_dir
    added = sorted(python_tree_files(ctx.build) - (ctx.host_python_files or set()))
    check_pass1_added_none(ctx.build, added)
    scratch = Path(tempfile.mkdtemp(prefix=".megabuild-state-", dir=state_dir.parent))
    try:
        shutil.copy2(ctx.cache_path, scratch / SAVED_CACHE)
        grouped = files_by_package(ctx.trees(ctx.install_tree))
        manifest = {p.path: _sha256(ctx.install_tree / p.path) for p in grouped[LIBTORCH]}
        for placement in grouped[LIBTORCH_CUDA_LINALG]:
            target = scratch / SAVED_LINALG / placement.path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ctx.install_tree / placement.path, target, follow_symlinks=False)
        state = {
            "guarded_options": guarded_values(cache),
            # digests, not values: the environment may hold secrets, and pass1.json is a build artifact
            "reconfigure_inputs": _digests(environment.reconfigure_inputs(ctx.env)),
            "python": python.short,
            "libtorch_manifest": manifest,
            # the BLAS it configured: every later output checks it against its own (check_pass1_blas)
            "blas": ctx.env.get("BLAS"),
        }
        (scratch / STATE_FILE).write_text(json.dumps(state, indent=1, sort_keys=True) + "\n")
        # the Python-linked products in the build directory are pass 1's Python's (python_products.py)
        python_products.record_in_place(scratch, products_key(python))
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
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(state, dict) or not {"guarded_options", "reconfigure_inputs", "blas"} <= set(state):
            raise ValueError("not the state pass 1 writes")
    except (ValueError, UnicodeDecodeError) as exc:
        raise MegabuildError(
            f"{path} is unreadable ({exc}): rebuild from pass 1 (PKG_NAME=libtorch-split)"
        ) from None
    return state


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
    staged = _stage(ctx, LIBTORCH, ctx.trees(ctx.install_tree))
    if ctx.build.cuda_version and ctx.pending_stage is not None:
        # CF_TORCH_CUDA_ARCH_LIST for downstream builds (megabuild/activation.py): written into the assembled
        # package, so it moves into PREFIX with libtorch's files, all or nothing
        scripts = activation.write_activation_scripts(
            ctx.pending_stage.scratch, ctx.env["TORCH_CUDA_ARCH_LIST"], windows=ctx.build.windows
        )
        ctx.pending_stage.staged.files.extend(scripts)
        staged += len(scripts)
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
    if not windows.lazy_cuda_linalg(build.target_platform):
        raise MegabuildError(
            f"libtorch-cuda-linalg does not exist on {build.target_platform}: 2.13.0 builds the CUDA linear "
            "algebra into torch_cuda there (BUILD_LAZY_CUDA_LINALG needs Linux); skip the output on this "
            "platform in recipe/meta.yaml"
        )
    variant = build.variant.get("magma_variant")
    state = load_pass1_state(build)
    started = time.monotonic()
    if variant == "nomagma":
        staged = _stage(ctx, LIBTORCH_CUDA_LINALG, ctx.trees(build.state_dir / SAVED_LINALG))
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
    _log_snapshot(ctx)  # an unreadable log stops the pass before any change
    target = probe(python)
    cache = CMakeCache.load(ctx.cache_path)
    changes = _retarget(ctx, cache, target)
    changes += [c for c in [cache.set("USE_MAGMA", "ON")] if c is not None]
    _check_reconfigure_inputs(ctx, state)
    _write_cache(ctx, cache, changes, target)
    # the install below installs every target: the Python-linked ones must be those of the cache's Python
    switch_python_products(ctx, target)
    before = _log_snapshot(ctx)
    # Only the linalg target: were this Python's products not kept (an interrupted move), rebuilding
    # torch_python here would be work no package uses.
    work = _run_build(
        ctx,
        before,
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
    python_products.record_in_place(build.state_dir, products_key(target))
    installed = (ctx.kind or SETUP_PY).install_linalg(ctx)
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
    staged = _stage(ctx, LIBTORCH_CUDA_LINALG, ctx.trees(installed))
    return _record(
        name=name, package=LIBTORCH_CUDA_LINALG, started=started, work=work, expected=["torch_cuda_linalg"],
        unexpected=unexpected, changes=changes, staged=staged,
    )  # fmt: skip


def pass_pytorch(ctx: PassContext) -> report.PassRecord:
    build = ctx.build
    state = load_pass1_state(build)
    python = _require_python(build, PYTORCH)
    if build.sp_dir is None:
        raise MegabuildError("SP_DIR is not set: pytorch needs python in its host requirements")
    started = time.monotonic()
    _log_snapshot(ctx)  # an unreadable log stops the pass before any change
    target = probe(python)
    check_output_python(build, target)
    cache = CMakeCache.load(ctx.cache_path)
    _check_magma_present(cache)
    changes = _retarget(ctx, cache, target)
    _check_reconfigure_inputs(ctx, state)
    _write_cache(ctx, cache, changes, target)
    switch = switch_python_products(ctx, target)
    before = _log_snapshot(ctx)
    work = _run_build(
        ctx, before, f"pytorch build for Python {target.short}", [str(python), "setup.py", "build"]
    )
    python_products.record_in_place(build.state_dir, products_key(target))
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
    require_extension_module(setuptools_tree, target.ext_suffix, target.short, ctx.install_tree)
    trees = ctx.trees(ctx.install_tree, setuptools=setuptools_tree, metadata=metadata)
    name = f"4 pytorch (py{target.short})"
    expected = [] if switch.compiles_nothing else list(python_linked_targets(build.target_platform))
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


def _check_work_dir(build: CondaBuild) -> None:
    """SRC_DIR is where every command runs: its absence would read as a missing program."""
    if not build.src_dir.is_dir():
        raise MegabuildError(
            f"SRC_DIR={build.src_dir} is not a directory: run the build through conda-build (or the "
            "rehearsal harness), which unpacks the source there"
        )


def _digests(values: Mapping[str, str]) -> dict[str, str]:
    return {
        name: hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        for name, value in values.items()
    }


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


def _write_cache(
    ctx: PassContext, cache: CMakeCache, changes: list[CacheChange], target: PythonFacts
) -> None:
    """Record which Python the edited cache names, then write it: CMake re-detects Python (dropping the
    entries the old one is read from) only during the build, so a pass stopped before that must still know
    what the cache spells, or every re-run would have to start from pass 1 (hours)."""
    rendered = cache.render().encode("utf-8", "surrogateescape")
    _write_json(
        ctx.build.state_dir / RETARGETED,
        {"python": asdict(target), "cache_sha256": hashlib.sha256(rendered).hexdigest()},
    )
    say(f"CMakeCache.txt: {len(changes)} change(s)")
    for change in changes:
        say(f"  {change.describe()}")
    cache.write()
    checkpoint("cache-written")


def _retarget(ctx: PassContext, cache: CMakeCache, target: PythonFacts) -> list[CacheChange]:
    """The cache edit to ``target`` (typed per entry on Windows, strict with --strict)."""
    build, old = ctx.build, _retargeted_from(ctx, cache)
    if build.windows:
        return retarget_windows(cache, target, build.prefix, old, strict=ctx.options.strict)
    return retarget(cache, target, old)


def _retargeted_from(ctx: PassContext, cache: CMakeCache) -> PythonFacts | None:
    """The Python an interrupted retarget left the cache spelling, when CMake has not re-detected it yet
    (None: the cache's own FindPython entries tell)."""
    path = ctx.build.state_dir / RETARGETED
    if cache.get("_Python_INTERPRETER_PROPERTIES") or not path.exists():
        return None
    written = json.loads(path.read_text(encoding="utf-8"))
    current = hashlib.sha256(cache.render().encode("utf-8", "surrogateescape")).hexdigest()
    if written["cache_sha256"] != current:
        return None  # changed since our edit by someone else than CMake: facts_from_cache says what is wrong
    data = written["python"]
    data["version"] = tuple(data["version"])
    say(f"the cache still names Python {'.'.join(map(str, data['version']))} from an interrupted pass")
    return PythonFacts(**data)


def products_key(python: PythonFacts) -> str:
    return python_products.key(python.soabi, python.nodot)


def switch_python_products(ctx: PassContext, target: PythonFacts) -> python_products.Switch:
    """Before a pytorch pass builds: this Python's Python-linked products in place where an earlier pass
    built them (python_products.py); the pass then expects to compile nothing."""
    build = ctx.build
    with step(f"the Python-linked products of Python {target.short}"):
        switch = python_products.switch_to(
            build.build_dir,
            build.state_dir,
            products_key(target),
            python_linked_targets(build.target_platform),
        )
    say(
        f"Python-linked products of Python {target.short}: {switch.state}"
        + ("; nothing to compile" if switch.compiles_nothing else "")
    )
    return switch


def _write_json(path: Path, data: object) -> None:
    write_text(path, json.dumps(data, indent=1, sort_keys=True))


def _check_reconfigure_inputs(ctx: PassContext, state: dict) -> None:
    """The reconfigure that our cache edit triggers must see pass 1's environment."""
    now = _digests(environment.reconfigure_inputs(ctx.env))
    before: dict[str, str] = state["reconfigure_inputs"]
    differing = sorted(k for k in set(now) | set(before) if now.get(k) != before.get(k))
    if differing:
        key = differing[0]
        how = "is unset here" if key not in now else "was unset in pass 1" if key not in before else "differs"
        raise MegabuildError(
            f"environment variable {key} {how} from pass 1 ({len(differing)} differ: "
            f"{', '.join(differing[:5])}): CMake's reconfigure would read it; give every output the build "
            "requirements and variables of libtorch-split"
        )


def _check_kept(cache: CMakeCache, changes: list[CacheChange]) -> None:
    lost = cache.not_kept(changes)
    if lost:
        raise PassFailed(
            f"{cache.path}: CMake did not keep {'; '.join(lost)}: the reconfigure overrode our edit "
            "(see docs/reference/megabuild.md, Retargeting)"
        )


def _check_guarded(cache: CMakeCache, state: dict) -> None:
    problems = check_guarded_options(cache, state["guarded_options"])
    if problems:
        raise PassFailed(f"{cache.path}: {'; '.join(problems)}: never let these change between passes")


def _run_command(
    ctx: PassContext, what: str, command: list[str], env: Mapping[str, str] | None = None
) -> None:
    with step(what):
        try:
            returncode = run_child(
                command,
                cwd=ctx.build.src_dir,
                env=ctx.env if env is None else env,
                on_start=lambda process: say(f"  (process group {process.pid})"),
            )
        except OSError as exc:
            raise PassFailed(
                f"{what} failed: cannot run {command[0]} ({exc.strerror or exc}): add it to the build "
                "requirements"
            ) from None
        if returncode != 0:
            raise PassFailed(
                # one line: a `python -c` script's own lines (scikit-build-core's build_wheel call) joined
                f"{what} failed: `{' '.join(command[:4]).replace(chr(10), '; ')}` exited with status "
                f"{returncode}: the cause "
                "is in the build log above; nothing of this pass was staged"
            )


def _log_snapshot(ctx: PassContext) -> dict[str, LogEntry]:
    """.ninja_log before a pass edits anything: an unreadable log stops the pass before any change."""
    return read_log(ctx.build.build_dir / ".ninja_log")


def _work_since(ctx: PassContext, before: dict[str, LogEntry]) -> PassWork:
    return PassWork.from_entries(ran_between(before, read_log(ctx.build.build_dir / ".ninja_log")))


def _run_build(ctx: PassContext, before: dict[str, LogEntry], what: str, command: list[str]) -> PassWork:
    _repair_generated_files(ctx)
    _reconfigure_if_stale(ctx)
    _run_command(ctx, what, command)
    return _work_since(ctx, before)


def _reconfigure_if_stale(ctx: PassContext) -> None:
    """The reconfigure ninja would run for an edited cache, run by the driver instead, so that sources
    CMake rewrites with the same bytes keep their time stamps (ninja_graph.reconfigure says why)."""
    build_dir = ctx.build.build_dir
    manifest = build_dir / "build.ninja"
    if manifest.exists() and manifest.stat().st_mtime_ns >= ctx.cache_path.stat().st_mtime_ns:
        return
    _graph_step("reconfiguring for the edited cache", lambda: ninja_graph.reconfigure(build_dir, ctx.env))


def _graph_step(what: str, action: Callable[[], T]) -> T:
    """A question to ninja or a reconfigure, as a logged step; its failure fails the pass."""
    with step(what):
        try:
            return action()
        except ninja_graph.GraphError as exc:
            raise PassFailed(str(exc)) from None


def _repair_generated_files(ctx: PassContext) -> None:
    """A reconfigure cut short by a full disk can leave build.ninja or CMakeFiles/rules.ninja empty, and
    ninja then fails on loading them before it could re-run CMake: regenerate them from the cache."""
    build_dir = ctx.build.build_dir
    generated = [build_dir / "build.ninja", build_dir / "CMakeFiles" / "rules.ninja"]
    broken = [path for path in generated if not path.is_file() or path.stat().st_size == 0]
    if broken:
        say(f"{broken[0]} is missing or empty (a reconfigure was cut short): regenerating")
        _run_command(ctx, "regenerating the build files", ["cmake", str(build_dir)])


def _stage(ctx: PassContext, package: str, trees: UpstreamTrees) -> int:
    """Assemble ``package`` beside PREFIX; run() moves it in after writing the report."""
    with step(f"assembling {package} for {ctx.build.prefix}"):
        prepared = ctx.cleanup.enter_context(
            prepare_stage(package, trees, ctx.build.prefix, ctx.build.sp_dir)
        )
    ctx.pending_stage = prepared
    return len(prepared.staged.files) + len(prepared.staged.links)


def _check_work(ctx: PassContext, name: str, work: PassWork, expected: list[str]) -> list[str]:
    """Objects compiled or files linked outside the pass's expected targets: a warning, or (--strict) a
    failed pass (a relink of libtorch_cpu compiles nothing and costs minutes).

    Runs before staging, so a strict failure stages nothing."""
    allowed = set(expected)
    unexpected = [o for o in work.objects if target_of_object(o) not in allowed]
    unexpected += [o for o in work.linked if target_of_linked(o) not in allowed]
    if unexpected:
        message = (
            f"{name} compiled or linked {len(unexpected)} file(s) outside "
            f"{', '.join(expected) or 'nothing'}, first {unexpected[0]}: an upstream cause of needless "
            "rebuilds (docs/reference/megabuild.md)"
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
