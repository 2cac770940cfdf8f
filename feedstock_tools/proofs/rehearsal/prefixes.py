"""Host and build prefixes the way conda-build lays them out, made from local interpreters.

conda-build gives every output a fresh host prefix at the same ``PREFIX`` path. Here a prefix is a
venv of the output's CPython (pyenv's interpreters on this machine) holding the Python packages of the
output's rendered host list (:func:`pip_requirements`) from PyPI, and nothing else: a package the recipe
forgets is missing here too, so the build fails as the real one would. The venvs are made once per
interpreter and package list as templates under the cache directory and hard-linked into ``PREFIX`` for
every step, so reruns cost milliseconds. Sibling packages the host
requires (``libtorch`` in ``pytorch``'s host) are installed from the rehearsal's own packages, and the
stand-in's tiny libmagma plays conda-forge's ``libmagma``/``libmagma-devel``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from feedstock_tools.common import full_device
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.recipe_imports import import_megabuild

_staging = import_megabuild("staging")
_atomic_file = import_megabuild("atomic_file")

# conda-forge package name -> PyPI distribution, for the host requirements that are Python packages. The
# others (C++ libraries, compilers' run-times, pybind11-abi, ...) have nothing for the stand-in to use and
# are not provided; libtorch, libtorch-cuda-linalg and libmagma(-devel) come from the harness.
PYPI_NAMES = {
    "numpy": "numpy",
    "packaging": "packaging",
    "pip": "pip",
    "pyyaml": "PyYAML",
    "requests": "requests",
    "scikit-build-core": "scikit-build-core",
    "setuptools": "setuptools",
    "six": "six",
    "typing_extensions": "typing_extensions",
    "wheel": "wheel",
}
# The venv the tests' host_pythons fixture uses: what the stand-in's setup.py needs besides Python.
DEFAULT_PIP_PACKAGES = ("numpy", "packaging", "setuptools>=77.0.3,<82")
# The packages whose install and byte-compiling are most of a template's time (numpy, setuptools: 6 s of
# CPU a Python): a template of a host list asking for them is made from a shared one of only them.
SHARED_BASE = frozenset({"numpy", "setuptools"})
# Bumped when the template recipe changes, so stale caches are not reused.
TEMPLATE_FORMAT = "5"
_CONDA_VERSION = re.compile(r"^[<>=!~]*[0-9][0-9A-Za-z.*]*$")


def pip_requirements(host: Sequence[str]) -> tuple[str, ...]:
    """pip requirements for the Python packages among conda host specs ("setuptools >=77.0.3,<82" ->
    "setuptools>=77.0.3,<82"), sorted; a conda version "1.2.*" becomes "==1.2.*", a bare "1.2" "==1.2.*"."""
    wanted: dict[str, list[str]] = {}
    for spec in host:
        words = spec.split()
        if not words or words[0] not in PYPI_NAMES:
            continue
        constraints = wanted.setdefault(PYPI_NAMES[words[0]], [])
        if len(words) > 1:
            for part in words[1].split(","):
                if not _CONDA_VERSION.match(part):
                    raise ToolError(f"cannot turn the host requirement {spec!r} into a pip requirement")
                exact = "==" + (part if "*" in part else part + ".*")
                constraints.append(exact if part[0].isdigit() else part)
    return tuple(sorted(name + ",".join(parts) for name, parts in wanted.items()))


def pip_project(spec: str) -> str:
    """The project a pip requirement names, normalised ("typing_extensions>=4" -> "typing-extensions")."""
    return re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0].lower().replace("_", "-")


def pyenv_versions_dir() -> Path | None:
    root = os.environ.get("PYENV_ROOT")
    if not root and shutil.which("pyenv"):
        root = subprocess.run(["pyenv", "root"], check=True, capture_output=True, text=True).stdout.strip()
    return Path(root) / "versions" if root else None


def find_interpreter(minor: str) -> Path | None:
    """The newest local CPython `minor` ("3.12"): pyenv's `versions/3.12.*`, else `python3.12` on PATH."""
    versions = pyenv_versions_dir()
    if versions and versions.is_dir():
        candidates = [
            path
            for path in versions.iterdir()
            if path.name.startswith(minor + ".") and path.name[len(minor) + 1 :].isdigit()
        ]
        candidates.sort(key=lambda path: int(path.name.split(".")[2]))
        for path in reversed(candidates):
            if (path / "bin" / "python3").exists():
                return path / "bin" / "python3"
    found = shutil.which(f"python{minor}")
    return Path(found) if found else None


class BackgroundRemover:
    """Removes trees in a background thread: a prefix has thousands of files and unlinking them takes
    about a second here, which would otherwise add up over the steps. ``discard`` renames at once."""

    def __init__(self, trash: Path) -> None:
        self.trash = trash
        self._count = 0
        self._threads: list[threading.Thread] = []

    def discard(self, path: Path) -> None:
        if not path.exists() and not path.is_symlink():
            return
        self.trash.mkdir(parents=True, exist_ok=True)
        self._count += 1
        target = self.trash / f"{os.getpid()}-{self._count}"
        path.rename(target)
        thread = threading.Thread(target=shutil.rmtree, args=(target,), kwargs={"ignore_errors": True})
        thread.start()
        self._threads.append(thread)

    def wait(self) -> None:
        for thread in self._threads:
            thread.join()
        self._threads.clear()


def link_tree(source: Path, destination: Path) -> None:
    """Copy a tree with hard links (symlinks stay symlinks); falls back to copies across file systems."""

    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, destination, symlinks=True, copy_function=link_or_copy)


@contextmanager
def cache_lock(
    cache_dir: Path, item: str, on_wait: Callable[[str], None] | None = None, wait: bool = True
) -> Iterator[bool]:
    """Serialises the writers of one cache item (a template, a channel): two test sessions, test workers or
    rehearsals may start at once on one machine, and each may make a different item meanwhile (on a new
    machine one lock for the whole cache left a worker idle for a minute, measured). ``on_wait`` hears once
    when another holds the lock (it may be making a template for minutes). Yields whether the lock is held:
    always, unless ``wait`` is false and another holds it (the caller may do another item first)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    lock = cache_dir / f".{item}.lock"
    with lock.open("a") as handle:  # a lock: nothing is written to it
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                yield False
                return
            if on_wait is not None:
                on_wait(f"      waiting for another run that holds {lock} ...")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def venv_template(
    cache_dir: Path,
    minor: str,
    log: Path,
    packages: Sequence[str] = DEFAULT_PIP_PACKAGES,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """A venv of CPython ``minor`` with pip, ``packages`` (pip requirements) and their dependencies, made once
    per interpreter and package list and reused. ``progress`` hears of a wait for another run's lock and of
    the making (uv from PyPI: seconds, most of them downloads on a machine's first run).

    A template holding numpy or setuptools is a copy of one holding only those (and pip) with the rest
    installed on top (:func:`base_packages`): byte-compiling them is most of a template's time."""
    template = template_dir(cache_dir, minor, packages)
    if (template / ".complete").exists():
        return template
    base_list = base_packages(packages)
    # made before this template's lock is taken (a lock of its own, but one lock held at a time is simpler)
    base = None if base_list is None else venv_template(cache_dir, minor, log, base_list, progress)
    say = progress or (lambda _line: None)
    with cache_lock(cache_dir, template.name, on_wait=say):
        if not (template / ".complete").exists():
            say(f"      making it once (uv from PyPI; log {log}) ...")
            started = time.monotonic()
            _make_venv_template(template, minor, log, tuple(packages), base)
            say(f"      made {template.name} in {time.monotonic() - started:.0f} s")
    return template


def template_dir(cache_dir: Path, minor: str, packages: Sequence[str]) -> Path:
    """Where the template of CPython ``minor`` with ``packages`` is (or will be) in ``cache_dir``."""
    # the interpreter is part of the key: a pyenv upgrade (3.12.7 -> 3.12.8) leaves the old venvs' python
    # links pointing at nothing
    key_text = "\n".join([str(find_interpreter(minor)), *sorted(packages)])
    key = hashlib.sha256(key_text.encode()).hexdigest()[:10]
    return cache_dir / f"venv-{minor}-{TEMPLATE_FORMAT}-{key}"


def base_packages(packages: Sequence[str]) -> tuple[str, ...] | None:
    """The package list of the template that the one of ``packages`` is copied from: its own requirements
    of :data:`SHARED_BASE`'s packages, so every host list asking the same of them shares one; None when it
    asks for none of them, or for nothing else."""
    base = tuple(spec for spec in packages if pip_project(spec) in SHARED_BASE)
    return base if base and len(base) < len(packages) else None


def uv_binary() -> str:
    """The ``uv`` executable of requirements-dev.txt's ``uv`` package, which makes the venv templates."""
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):  # no package, or a package without its binary
        raise ToolError(
            f"uv is not installed for {sys.executable}: the rehearsal makes its venvs with it; "
            "install it with 'python -m pip install -r requirements-dev.txt'"
        ) from None


def _make_venv_template(
    template: Path, minor: str, log: Path, packages: tuple[str, ...], base: Path | None = None
) -> None:
    """uv rather than venv and pip: the sixteen templates of a first run took 150 s of CPU with venv's
    ensurepip and pip, 13 s with uv, whose byte-compiling then took 110 s more, and 44 s with the shared bases
    (measured; docs/records/2026-11-28-ci-time.md). Every template holds pip, as conda's host prefixes do:
    conda adds pip to python's dependencies (conda 26.7.1 conda/base/context.py:221,
    ``add_pip_as_python_dependency`` defaults to True). Nothing else: no setuptools a host list lacks."""
    interpreter = find_interpreter(minor)
    if interpreter is None:
        raise ToolError(f"no CPython {minor} on this machine; install it with 'pyenv install {minor}'")
    uv = uv_binary()
    shutil.rmtree(template, ignore_errors=True)
    # copies, not links into uv's cache: steps hard-link a template's files into PREFIX, and a build that
    # wrote into one must not reach the cache; bytecode compiled once here, as pip did, so that no step's
    # imports write __pycache__ files of no package into PREFIX
    install = [uv, "pip", "install", "--quiet", "--link-mode", "copy", "--compile-bytecode",
               "--python", str(template / "bin" / "python"), "pip", *packages]  # fmt: skip
    if base is None:
        commands = [[uv, "venv", "--quiet", "--python", str(interpreter), str(template)], install]
    else:
        copy_venv(base, template)
        commands = [install]  # what the base holds already is kept: its bytecode is not compiled again
    with log.open("a") as out:
        for command in commands:
            try:
                subprocess.run(command, check=True, stdout=out, stderr=out)
            except subprocess.CalledProcessError as exc:
                what = f"making the Python {minor} venv template (uv {command[1]})"
                if full_device.log_says_full(log):
                    raise ToolError(full_device.full_log_line(what, log, template.parent)) from exc
                raise ToolError(
                    f"could not make the Python {minor} venv template (uv {command[1]} failed): PyPI must "
                    f"be reachable for the first run; details in {log}"
                ) from exc
    _atomic_file.write_text(template / ".complete", "ok\n")


def copy_venv(source: Path, destination: Path) -> None:
    """A copy of the venv ``source`` that is a venv at ``destination``: its ``bin/python`` links to the base
    interpreter by absolute path and so still works; the scripts that name ``source`` (``activate``, pip's
    shebang) are rewritten to name ``destination``."""
    shutil.copytree(source, destination, symlinks=True, ignore=shutil.ignore_patterns(".complete"))
    old, new = os.fsencode(source), os.fsencode(destination)
    for path in [destination / "pyvenv.cfg", *(destination / "bin").iterdir()]:
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if old in data:
            _atomic_file.write_bytes(path, data.replace(old, new), mode=path.stat().st_mode)


def build_prefix_template(cache_dir: Path) -> Path:
    """BUILD_PREFIX: ``bin/python`` is the interpreter running this tool (the driver is stdlib-only)."""
    # one per interpreter: the cache is shared by checkouts, whose tools may run from different venvs
    key = hashlib.sha256(os.fsencode(sys.executable)).hexdigest()[:10]
    template = cache_dir / f"build-env-{sys.version_info[0]}.{sys.version_info[1]}-{key}"
    with cache_lock(cache_dir, template.name):
        if not (template / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(template)], check=True)
    return template


def magma_install(standin: Path, cache_dir: Path, log: Path) -> Path:
    """The stand-in's tiny libmagma, built once: the files conda-forge's libmagma(-devel) would bring."""
    prefix = cache_dir / "libmagma"
    if (prefix / "lib" / "libmagma.so").exists():
        return prefix
    with cache_lock(cache_dir, prefix.name):
        if not (prefix / "lib" / "libmagma.so").exists():
            _build_magma(standin, cache_dir, prefix, log)
    return prefix


def _build_magma(standin: Path, cache_dir: Path, prefix: Path, log: Path) -> None:
    build = cache_dir / "libmagma-build"
    shutil.rmtree(build, ignore_errors=True)
    with log.open("a") as out:
        for args in (
            ["cmake", "-S", str(standin / "third_party" / "magma"), "-B", str(build), "-G", "Ninja",
             f"-DCMAKE_INSTALL_PREFIX={prefix}", "-DCMAKE_BUILD_TYPE=Release"],
            ["cmake", "--build", str(build)],
            ["cmake", "--install", str(build)],
        ):  # fmt: skip
            subprocess.run(args, check=True, stdout=out, stderr=out)


def prefix_files(prefix: Path) -> set[str]:
    """Files and symlinks under ``prefix``, as '/'-separated relative paths (what conda-build compares);
    listed by the driver's own walk, so the harness and the staging see the same entries."""
    return set(_staging.relative_entries(prefix, prefix))


def file_states(prefix: Path, files: set[str]) -> dict[str, tuple[int, int]]:
    """(size, mtime_ns) of each file, to notice a build script that changes what the host installed."""
    states: dict[str, tuple[int, int]] = {}
    for rel in files:
        info = (prefix / rel).lstat()
        states[rel] = (info.st_size, info.st_mtime_ns)
    return states


def install_files(source_root: Path, files: list[str], destination: Path) -> None:
    """Copy ``files`` (relative paths) from ``source_root`` into ``destination``; symlinks stay symlinks."""
    for rel in files:
        src = source_root / rel
        dst = destination / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if dst.is_symlink() or dst.exists():
            if dst.is_dir() and not dst.is_symlink():
                shutil.rmtree(dst)
            else:
                dst.unlink()
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)
