"""The passes for a scikit-build-core source tree (PyTorch 2.14 and later: no setup.py).

scikit-build-core keeps a build directory only while it finds its own installation at the path it recorded
there: ``build/.skbuild-info.json`` holds ``skbuild_path`` and a different one clears ``CMakeCache.txt`` and
``CMakeFiles/`` ("New isolated environment ... clearing cache", its ``cmake.py``; measured with 1.1.1 and
1.1.2, docs/records/2026-11-26-skbuild-build-dir.md). In conda-build every output's scikit-build-core lives
under ``lib/python3.X/site-packages`` of a prefix whose Python differs per ``pytorch`` output, so each would
rebuild everything. The driver therefore owns the location: pass 1 copies the host's scikit-build-core
package into ``build/megabuild-backend/`` and every pass runs the PEP 517 hook ``build_wheel`` from that
copy, under ``${PYTHON}`` (scikit-build-core reads the interpreter, its SOABI, numpy's include directory
and the wheel tag from the process it runs in), with ``build-dir`` set to ``build/``.

* pass 1: ``build_wheel`` configures and builds everything; the wheel, unpacked, is the install tree the
  ``libtorch`` and ``libtorch-cuda-linalg`` (nomagma) passes stage from; then the settle and its check;
* ``pytorch``: the typed retarget of the cache (python_target.py), then ``build_wheel`` on the same build
  directory; only the Python-linked targets may compile, and scikit-build-core may change only the cache
  entries it names the wheel's staging directory and the interpreter with (:data:`BACKEND_OWNED`);
* ``libtorch-cuda-linalg`` (magma): as for setup.py trees (CMake directly, only ``torch_cuda_linalg``),
  installed with ``cmake --install --prefix`` into a directory of its own (the cache's install prefix is
  scikit-build-core's temporary wheel directory, gone after its run).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import zipfile
from pathlib import Path

from megabuild import passes, pep517, windows
from megabuild.cmake_cache import CacheChange, CMakeCache
from megabuild.errors import MegabuildError
from megabuild.host_prefix import check_output_python
from megabuild.log import say, step, warn
from megabuild.package_files import PYTORCH
from megabuild.python_target import (
    check_retarget_kept,
    facts_from_cache,
    names_old_python,
    probe,
    python_linked_targets,
)
from megabuild.staging import require_extension_module

BACKEND_DIR = "megabuild-backend"  # below build/: the one scikit-build-core every pass runs
WHEELS_DIR = "megabuild-wheels"  # below build/: each pass's wheel, unpacked (platlib/ and metadata/)
PASS1_WHEEL = "pass1"
MAGMA_INSTALL = "megabuild-magma-install"  # below build/: the MAGMA pass's cmake --install prefix
# scikit-build-core's wheel.install-dir of PyTorch 2.15.0: its Caffe2Targets.cmake computes the install
# prefix four directories above torch/share/cmake/Caffe2/ and names ${_IMPORT_PREFIX}/lib/libc10.so, so
# CMake's install prefix is the wheel's torch/ (the 2.15.0 wheels, read here)
TORCH_DIR_IN_WHEEL = "torch"
# The cache entries scikit-build-core FORCE-sets on every run whose value legitimately differs between passes
# (measured, docs/records/2026-11-26-skbuild-build-dir.md): the staging directory of the wheel (a new
# temporary directory each run) and the install prefix below it, which only install rules read; and the
# interpreter hints, which only FindPython reads (the Python-linked targets are the only ones that see its
# results; the ninja log check proves it for every pass).
BACKEND_OWNED_PREFIXES = (
    "SKBUILD_",
    "Python_",
    "Python3_",
    "PYTHON_",
    "_Python",
    "FIND_PACKAGE_MESSAGE_DETAILS_Python",
)
BACKEND_OWNED = ("CMAKE_INSTALL_PREFIX",)
INIT_CACHE = "CMakeInit.txt"  # scikit-build-core's -C file in the build directory, rewritten every run
_INIT_ENTRY = re.compile(r"^set\((\S+) ", re.MULTILINE)
# the interpreter hints the typed retarget sets to the target's (python_target.retarget), kept for it
RETARGETED_HINTS = frozenset({"Python_EXECUTABLE", "Python_NumPy_INCLUDE_DIR"})
_BUILD_WHEEL = (
    "import json, sys\n"
    "from scikit_build_core.build import build_wheel\n"
    "print('megabuild-wheel:', build_wheel(sys.argv[1], json.loads(sys.argv[2])))\n"
)
_LOCATE = (
    "import json, os, scikit_build_core as s; print(json.dumps([os.path.dirname(s.__file__), s.__version__]))"
)


def install_tree(build_dir: Path) -> Path:
    """Pass 1's install tree: torch/ of its unpacked wheel (what libtorch and the nomagma linalg stage)."""
    return build_dir / WHEELS_DIR / PASS1_WHEEL / "platlib" / TORCH_DIR_IN_WHEEL


# --------------------------------------------------------------------------------------------------------
# pass 1


def pass_configure_and_build(ctx: passes.PassContext) -> passes.report.PassRecord:
    build = ctx.build
    python = passes._require_python(build, "the top-level build (libtorch-split)")
    started = time.monotonic()
    passes.check_ninja_writes_known_log(ctx.env)
    before = passes._log_snapshot(ctx)
    _copy_backend(ctx, python)
    _build_wheel(ctx, python, "pass 1 (libtorch-split): scikit-build-core build_wheel", PASS1_WHEEL)
    # The settle after the build, not before (scikit-build-core configures and builds in one run): what a
    # reconfigure rewrites is rebuilt here, in pass 1, so that no later pass has to
    passes._settle_graph(ctx)
    build_again = ["cmake", "--build", str(build.build_dir), "-j", ctx.env["MAX_JOBS"]]
    passes._run_command(ctx, "pass 1: building what the settle changed", build_again)
    cache = CMakeCache.load(ctx.cache_path)
    problems = passes._pass1_cache_problems(cache, build)
    if problems:
        raise passes.PassFailed(
            f"pass 1 configured {'; '.join(problems)}: check the host requirements of libtorch-split"
        )
    passes._check_settled(ctx)
    with step("saving pass 1's results for the outputs"):
        passes._save_pass1_state(ctx, cache, probe(python))
    work = passes._work_since(ctx, before)
    return passes._record(
        name="1 libtorch-split", package=passes.TOP_LEVEL, started=started, work=work, expected=None
    )


def _copy_backend(ctx: passes.PassContext, python: Path) -> None:
    """scikit-build-core of pass 1's host, copied to the one place every pass runs it from."""
    try:
        found = subprocess.run(
            [str(python), "-c", _LOCATE], capture_output=True, text=True, check=True, env=ctx.env
        )
    except subprocess.CalledProcessError as exc:
        last = (exc.stderr.strip().splitlines() or ["no output"])[-1]
        raise MegabuildError(
            f"{python} cannot import scikit_build_core ({last}): the source tree builds with "
            "scikit-build-core; add it to the host requirements of every output that builds"
        ) from None
    package, version = json.loads(found.stdout)
    destination = ctx.build.build_dir / BACKEND_DIR / "scikit_build_core"
    if destination.parent.exists():
        shutil.rmtree(destination.parent)
    destination.parent.mkdir(parents=True)
    shutil.copytree(package, destination, ignore=shutil.ignore_patterns("__pycache__"))
    say(f"scikit-build-core {version} from {package} copied to {destination} (used by every pass)")


# --------------------------------------------------------------------------------------------------------
# the pytorch pass


def pass_pytorch(ctx: passes.PassContext) -> passes.report.PassRecord:
    build = ctx.build
    state = passes.load_pass1_state(build)
    python = passes._require_python(build, passes.PYTORCH)
    if build.sp_dir is None:
        raise MegabuildError("SP_DIR is not set: pytorch needs python in its host requirements")
    started = time.monotonic()
    passes._log_snapshot(ctx)  # an unreadable log stops the pass before any change
    target = probe(python)
    check_output_python(build, target)
    cache = CMakeCache.load(ctx.cache_path)
    left = CMakeCache.load(
        ctx.cache_path
    )  # as the last pass left it: what scikit-build-core's run is held to
    old = passes._retargeted_from(ctx, cache) or facts_from_cache(cache)
    passes._check_magma_present(cache)
    dropped = _drop_backend_entries(ctx, cache)
    changes = passes._retarget(ctx, cache, target)
    passes._check_reconfigure_inputs(ctx, state)
    passes._write_cache(ctx, cache, dropped + changes, target)
    switch = passes.switch_python_products(ctx, target)
    before = passes._log_snapshot(ctx)
    # no reconfigure of the driver's own (passes._reconfigure_if_stale): scikit-build-core's configure comes
    # first in its run anyway
    name = f"4 pytorch (py{target.short})"
    wheel = _build_wheel(ctx, python, f"pytorch build for Python {target.short}", f"py{target.nodot}")
    passes.python_products.record_in_place(build.state_dir, passes.products_key(target))
    after = CMakeCache.load(ctx.cache_path)
    ours = {c.key for c in changes} | {c.key for c in dropped if c.old and names_old_python(c.old, old)}
    _check_backend_changes(ctx, name, left, after, ours)
    work = passes._work_since(ctx, before)
    check_retarget_kept(after, target, state["guarded_options"])
    passes._check_kept(after, changes)
    platlib, metadata = wheel / "platlib", wheel / "metadata"
    require_extension_module(platlib, target.ext_suffix, target.short, platlib / TORCH_DIR_IN_WHEEL)
    trees = ctx.trees(platlib / TORCH_DIR_IN_WHEEL, setuptools=platlib, metadata=metadata)
    expected = [] if switch.compiles_nothing else list(python_linked_targets(build.target_platform))
    unexpected = passes._check_work(ctx, name, work, expected)
    staged = passes._stage(ctx, PYTORCH, trees)
    return passes._record(
        name=name, package=PYTORCH, started=started, work=work, expected=expected,
        unexpected=unexpected, changes=dropped + changes, staged=staged,
    )  # fmt: skip


def _drop_backend_entries(ctx: passes.PassContext, cache: CMakeCache) -> list[CacheChange]:
    """Remove the entries scikit-build-core FORCE-sets from the interpreter it runs under on every run (the
    keys of its last ``build/CMakeInit.txt``: ``PYTHON_LIBRARY``, ``Python_ROOT_DIR``, ``SKBUILD_SOABI``,
    ``CMAKE_PREFIX_PATH`` with its site-packages, ...), but for the two the typed retarget sets itself: its
    next configure writes them for ``${PYTHON}`` before the project runs (``-C``), so retargeting them here
    would only guess at values it is about to write (the Windows retarget refuses entries it does not know,
    and a pyenv root's patch version is not in the cache)."""
    init = ctx.build.build_dir / INIT_CACHE
    if not init.is_file():
        raise MegabuildError(
            f"no {init}: pass 1 ran scikit-build-core, which writes it; rebuild from pass 1 (libtorch-split)"
        )
    keys = {match.group(1) for match in _INIT_ENTRY.finditer(init.read_text(encoding="utf-8"))}
    dropped: list[CacheChange] = []
    for key in sorted(keys - RETARGETED_HINTS):
        dropped += cache.remove(key)
    return dropped


def _check_backend_changes(
    ctx: passes.PassContext,
    name: str,
    before: CMakeCache,
    after: CMakeCache,
    retargeted: frozenset[str] | set[str] = frozenset(),
) -> None:
    """Cache entries changed from ``before`` (as the last pass left the cache) that neither scikit-build-core
    owns nor the retarget changed (``retargeted``): each could recompile or relink a non-Python target
    (CMAKE_BUILD_TYPE, a flag, a path a library is found by), so STRICT stops the pass."""
    # values only: an untyped -D turns an entry's type to UNINITIALIZED and keeps its value (measured with
    # CMake 3.25 when $CMAKE_ARGS reached a later run), and the build reads values only
    changed = [
        c
        for c in after.changes_from(before)
        if c.old != c.new and not _backend_owned(c.key) and c.key not in retargeted
    ]
    if not changed:
        return
    message = (
        f"{name}: scikit-build-core changed {len(changed)} cache entr{'y' if len(changed) == 1 else 'ies'} "
        f"outside the wheel directory and interpreter hints, first {changed[0].describe()}: pass it the same "
        "settings as pass 1 (docs/reference/megabuild-skbuild.md)"
    )
    if ctx.options.strict:
        raise passes.PassFailed(message)
    warn(message)


def _backend_owned(key: str) -> bool:
    return key in BACKEND_OWNED or key.startswith(BACKEND_OWNED_PREFIXES)


# --------------------------------------------------------------------------------------------------------
# the MAGMA pass's install


def install_linalg(ctx: passes.PassContext) -> Path:
    """``cmake --install`` of the MAGMA build into its own prefix (with --strip, as scikit-build-core's
    install of pass 1's library); returns the install tree to stage from."""
    prefix = ctx.build.build_dir / MAGMA_INSTALL
    shutil.rmtree(prefix, ignore_errors=True)
    command = ["cmake", "--install", str(ctx.build.build_dir), "--prefix", str(prefix), "--strip"]
    passes._run_command(ctx, "installing into its own prefix", command)
    return prefix


# --------------------------------------------------------------------------------------------------------
# running scikit-build-core


def config_settings(ctx: passes.PassContext) -> dict[str, object]:
    """The PEP 517 config settings of every pass: the same in all of them (a setting that changes between
    passes would change the cache, see _check_backend_changes)."""
    settings: dict[str, object] = {
        "build-dir": str(ctx.build.build_dir),
        # scikit-build-core owns the build type and drops -DCMAKE_BUILD_TYPE from $CMAKE_ARGS ("Unsupported
        # CMAKE_ARGS ignored", measured with 1.1.1): the driver's choice (DEBUG=1, REL_WITH_DEB_INFO=1) goes
        # here instead
        "cmake.build-type": _cmake_args_build_type(ctx.env.get("CMAKE_ARGS", ""), ctx.build.windows),
        # the driver's MAX_JOBS (ninja otherwise runs one job per core plus two)
        "build.tool-args": [f"-j{ctx.env['MAX_JOBS']}"],
        "logging.level": "INFO",
    }
    if ctx.options.verbose:
        settings["build.verbose"] = "true"
    return settings


def _cmake_args_build_type(cmake_args: str, on_windows: bool) -> str:
    """The build type environment.py writes into CMAKE_ARGS (the last one, as CMake reads them)."""
    found = [
        w.split("=", 1)[1]
        for w in windows.split_cmake_args(cmake_args, on_windows)
        if w.startswith(("-DCMAKE_BUILD_TYPE=", "-DCMAKE_BUILD_TYPE:STRING="))
    ]
    if not found:
        raise MegabuildError(
            "CMAKE_ARGS names no -DCMAKE_BUILD_TYPE: megabuild/environment.py always writes one"
        )
    return found[-1]


def _build_wheel(ctx: passes.PassContext, python: Path, what: str, label: str) -> Path:
    """Run build_wheel from the driver's copy of scikit-build-core; unpack the wheel into
    build/megabuild-wheels/<label>/{platlib,metadata} and return that directory."""
    build_dir = ctx.build.build_dir
    backend = build_dir / BACKEND_DIR
    if not (backend / "scikit_build_core").is_dir():
        raise MegabuildError(
            f"no scikit-build-core in {backend}: pass 1 (libtorch-split) copies it there; build the whole "
            "recipe, not this output alone"
        )
    wheel_dir = build_dir / WHEELS_DIR / label
    shutil.rmtree(wheel_dir, ignore_errors=True)
    dist = wheel_dir / "dist"
    dist.mkdir(parents=True)
    env = dict(ctx.env)
    if label != PASS1_WHEEL:
        # scikit-build-core appends $CMAKE_ARGS to every configure it runs; setup.py passed it to the first
        # configure only, and the driver's CMAKE_ARGS carry first-configure settings (environment.py:
        # USE_MAGMA=OFF would undo the MAGMA pass's edit, measured: USE_MAGMA ON -> OFF in the next pytorch
        # pass). Pass 1's -D values are in the cache; later runs get none, as with setup.py.
        env["CMAKE_ARGS"] = ""
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(backend), env.get("PYTHONPATH", "")) if p)
    command = [str(python), "-c", _BUILD_WHEEL, str(dist), json.dumps(config_settings(ctx))]
    passes._run_command(ctx, what, command, env)
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != 1:
        raise passes.PassFailed(f"{what} left {len(wheels)} wheels in {dist}, not one: see the log above")
    _unpack(wheels[0], wheel_dir)
    return wheel_dir


def _unpack(wheel: Path, into: Path) -> None:
    """The wheel's files under platlib/, its dist-info under metadata/ (the trees staging reads), with
    INSTALLER=conda (pip must not uninstall conda's files) and without RECORD (it lists the wheel's files
    and hashes; the package links torch/lib and friends to $PREFIX instead)."""
    platlib, metadata = into / "platlib", into / "metadata"
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            top = member.filename.split("/", 1)[0]
            root = metadata if top.endswith(".dist-info") else platlib
            path = root / member.filename
            if not path.resolve().is_relative_to(root.resolve()):
                raise MegabuildError(f"{wheel}: member {member.filename!r} points outside the wheel")
            if member.is_dir():
                path.mkdir(parents=True, exist_ok=True)
                continue
            archive.extract(member, root)
            mode = member.external_attr >> 16
            if mode & 0o111:
                path.chmod(path.stat().st_mode | 0o111)
    for dist_info in metadata.glob("*.dist-info"):
        (dist_info / "RECORD").unlink(missing_ok=True)
        (dist_info / "INSTALLER").write_text("conda\n")
    say(f"unpacked {wheel.name} into {into}")


# scikit-build-core trees (2.14+): pass 1 and the pytorch passes run its build_wheel; staging reads the wheel
KIND = passes.SourceTreeKind(
    pep517.SCIKIT_BUILD_CORE,
    lambda build: install_tree(build.build_dir),
    install_linalg,
    {passes.TOP_LEVEL: pass_configure_and_build, passes.PYTORCH: pass_pytorch},
)
