"""Host and build prefixes the way conda-build lays them out, made from local interpreters.

conda-build gives every output a fresh host prefix at the same ``PREFIX`` path. Here a prefix is a
venv of the output's CPython (pyenv's interpreters on this machine) holding the Python packages of the
output's rendered host list (:func:`pip_requirements`) from PyPI, and nothing else: a package the recipe
forgets is missing here too, so the build fails as the real one would. The venvs are made once per
interpreter, package list and installer settings as templates, entries of the per-user cache
(common/cache_store.py), and hard-linked into ``PREFIX`` for every step, so reruns cost milliseconds.

Hard links share inodes: a step that appends to a host file writes into the template. Copying a 3,500-file
template instead costs ten times the CPU of linking it, which a rehearsal pays for every step
(docs/records/2026-12-07-cache-store.md); so the template is checked against its manifest before every use
(by stat) and after a step that changed host files, and one found changed is made again, never linked.

Sibling packages the host requires (``libtorch`` in ``pytorch``'s host) are installed from the rehearsal's
own packages, and the stand-in's tiny libraries play conda-forge's ``libmagma``/``libmagma-devel`` and
``mkl``/``mkl-devel`` (:data:`STANDIN_LIBRARIES`).
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from feedstock_tools.common import cache_store, full_device
from feedstock_tools.common.errors import ToolError
from megabuild import atomic_file, staging

# conda-forge package name -> PyPI distribution, for the host requirements that are Python packages. The
# others (C++ libraries, compilers' run-times, pybind11-abi, ...) have nothing for the stand-in to use and
# are not provided; libtorch, libtorch-cuda-linalg, libmagma(-devel) and mkl(-devel) come from the harness.
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
# The packages whose install and byte-compiling are most of a template's time (numpy, setuptools;
# docs/records/2026-11-28-ci-time.md): a template of a host list asking for them is made from a shared one
# of only them.
SHARED_BASE = frozenset({"numpy", "setuptools"})
# Bumped when the template recipe changes: a key input, so stale templates are not reused.
TEMPLATE_FORMAT = "6"
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


def interpreter_identity(interpreter: Path) -> dict[str, str]:
    """What an entry made with ``interpreter`` depends on: its real path and its full version (a pyenv patch
    upgrade, 3.12.7 -> 3.12.8, leaves the old one's venvs pointing at nothing or at an older release)."""
    real = interpreter.resolve()
    info = real.stat()
    stamp = (str(real), info.st_mtime_ns, info.st_size)
    if stamp not in _IDENTITIES:
        version = subprocess.run(
            [str(real), "-c", "import platform; print(platform.python_version())"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        _IDENTITIES[stamp] = {"interpreter": str(real), "version": version}
    return _IDENTITIES[stamp]


_IDENTITIES: dict[tuple[str, int, int], dict[str, str]] = {}
# uv's and pip's settings that change what they install (index, resolution, pre-releases, constraints); the
# others (where they cache, how they print, time-outs) do not. Cleared settings would ignore a mirror a clone
# needs; keyed, one shell's UV_RESOLUTION=lowest makes entries of its own instead of settling everyone's.
_INSTALLER_PREFIXES = ("UV_", "PIP_")
_INSTALLER_NEUTRAL = frozenset({
    "UV_CACHE_DIR", "UV_NO_CACHE", "UV_NO_PROGRESS", "UV_QUIET", "UV_VERBOSE", "UV_HTTP_TIMEOUT",
    "UV_CONCURRENT_DOWNLOADS", "UV_CONCURRENT_INSTALLS", "UV_CONCURRENT_BUILDS", "UV_LINK_MODE",
    "PIP_CACHE_DIR", "PIP_NO_CACHE_DIR", "PIP_DISABLE_PIP_VERSION_CHECK", "PIP_PROGRESS_BAR", "PIP_QUIET",
    "PIP_VERBOSE", "PIP_DEFAULT_TIMEOUT", "PIP_TIMEOUT", "PIP_NO_INPUT", "PIP_ROOT_USER_ACTION",
    "PIP_NO_COLOR", "PIP_RETRIES",
})  # fmt: skip


def installer_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """uv's and pip's settings from the environment, and the content of pip's configuration files (uv runs
    with ``--no-config``), that decide which packages an entry gets."""
    environ = os.environ if environ is None else environ
    settings = {
        name: value
        for name, value in environ.items()
        if name.startswith(_INSTALLER_PREFIXES) and name not in _INSTALLER_NEUTRAL
    }
    for config in _pip_config_files(environ):
        if config.is_file():
            settings[f"file {config}"] = hashlib.sha256(config.read_bytes()).hexdigest()
    return settings


def _pip_config_files(environ: Mapping[str, str]) -> list[Path]:
    """Where pip reads its configuration (pip 26 src/pip/_internal/configuration.py
    ``get_configuration_files``: the site files in /etc/xdg/pip and /etc, the user's, $PIP_CONFIG_FILE)."""
    config_dirs = environ.get("XDG_CONFIG_DIRS") or "/etc/xdg"
    config_home = Path(environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    files = [Path(d) / "pip" / "pip.conf" for d in config_dirs.split(os.pathsep) if d]
    files += [Path("/etc/pip.conf"), Path.home() / ".pip" / "pip.conf", config_home / "pip" / "pip.conf"]
    if environ.get("PIP_CONFIG_FILE"):
        files.append(Path(environ["PIP_CONFIG_FILE"]))
    return files


def venv_template(
    cache_dir: Path,
    minor: str,
    log: Path,
    packages: Sequence[str] = DEFAULT_PIP_PACKAGES,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """A venv of CPython ``minor`` with pip, ``packages`` (pip requirements) and their dependencies: an entry
    of the cache (common/cache_store.py) made once per interpreter, package list and installer settings,
    and checked when reused. ``progress`` hears of a wait for another run's lock and of the making (uv from
    PyPI: seconds, most of them downloads on a machine's first run).

    A template holding numpy or setuptools is a copy of one holding only those (and pip) with the rest
    installed on top (:func:`base_packages`): byte-compiling them is most of a template's time."""
    say = progress or cache_store.to_stderr  # a template made again is never silent
    base_list = base_packages(packages)
    base_key = None if base_list is None else template_key(minor, base_list)
    key = template_key(minor, packages, base_key)

    def make(making: cache_store.Making) -> None:
        # the base is an entry of its own, under its own lock (taken after this one's, never before)
        base = None if base_list is None else venv_template(cache_dir, minor, log, base_list, progress)
        say(f"      making {making.final.name} once (uv from PyPI; log {log}) ...")
        started = time.monotonic()
        _make_venv_template(making, minor, log, tuple(packages), base)
        say(f"      made {making.final.name} in {time.monotonic() - started:.0f} s")

    made = cache_store.obtain(cache_dir, key, make, say)
    assert made is not None  # waited for
    return made


def template_key(
    minor: str, packages: Sequence[str], base: cache_store.EntryKey | None = None
) -> cache_store.EntryKey:
    """What decides the template of CPython ``minor`` with ``packages`` (copied from template ``base``)."""
    interpreter = find_interpreter(minor)
    if interpreter is None:
        raise ToolError(f"no CPython {minor} on this machine; install it with 'pyenv install {minor}'")
    inputs = {
        "format": TEMPLATE_FORMAT,
        **interpreter_identity(interpreter),
        "packages": sorted(packages),
        "base": base.name if base is not None else None,
        "uv": _uv_version(),
        "settings": installer_settings(),
    }
    return cache_store.EntryKey("venv", minor, inputs)


def template_dir(cache_dir: Path, minor: str, packages: Sequence[str]) -> Path:
    """Where the template of CPython ``minor`` with ``packages`` is (or will be) in ``cache_dir``."""
    base_list = base_packages(packages)
    base = None if base_list is None else template_key(minor, base_list)
    return cache_dir / template_key(minor, packages, base).name


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


def _uv_version() -> str:
    try:
        return metadata.version("uv")
    except metadata.PackageNotFoundError:
        uv_binary()  # its one-line error
        raise


def _make_venv_template(
    making: cache_store.Making, minor: str, log: Path, packages: tuple[str, ...], base: Path | None = None
) -> None:
    """uv rather than venv and pip: about a tenth of the CPU for a first run's templates
    (docs/records/2026-11-28-ci-time.md). Every template holds pip, as
    conda's host prefixes do: conda adds pip to python's dependencies (conda 26.7.1
    conda/base/context.py:221, ``add_pip_as_python_dependency`` defaults to True). Nothing else: no
    setuptools a host list lacks."""
    interpreter = find_interpreter(minor)
    assert interpreter is not None  # template_key found it
    uv = uv_binary()
    venv = making.staging
    # copies, not links into uv's cache: a template's files are linked into PREFIX; bytecode compiled once
    # here, as pip does, so that no step's imports write __pycache__ files of no package into PREFIX;
    # --no-config: no uv.toml or pyproject.toml of the checkout or the user decides a shared entry
    install = [uv, "pip", "install", "--no-config", "--quiet", "--link-mode", "copy", "--compile-bytecode",
               "--python", str(venv / "bin" / "python"), "pip", *packages]  # fmt: skip
    if base is None:
        making.staging.rmdir()  # uv venv makes it
        commands = [[uv, "venv", "--no-config", "--quiet", "--python", str(interpreter), str(venv)], install]
    else:
        making.staging.rmdir()
        copy_venv(base, venv)
        commands = [install]  # what the base holds already is kept: its bytecode is not compiled again
    for command in commands:
        try:
            making.run(command, log)
        except subprocess.CalledProcessError as exc:
            what = f"making the Python {minor} venv template (uv {command[1]})"
            if full_device.log_says_full(log):
                raise ToolError(full_device.full_log_line(what, log, making.final.parent)) from exc
            raise ToolError(
                f"could not make the Python {minor} venv template (uv {command[1]} failed): PyPI must "
                f"be reachable for the first run; details in {log}"
            ) from exc
    relocate_venv(venv, making.final)


def copy_venv(source: Path, destination: Path) -> None:
    """A copy of the venv ``source`` that is a venv at ``destination`` (:func:`relocate_venv`)."""
    shutil.copytree(source, destination, symlinks=True)
    _rewrite_venv_paths(destination, source, destination)


def relocate_venv(venv: Path, new_place: Path) -> None:
    """The venv at ``venv`` rewritten to work once moved to ``new_place`` (it is made in a staging directory
    and renamed into place)."""
    _rewrite_venv_paths(venv, venv, new_place)


def _rewrite_venv_paths(venv: Path, old_place: Path, new_place: Path) -> None:
    """Its ``bin/python`` links to the base interpreter by absolute path and so still works; the scripts
    that name the old place (``activate``, pip's shebang) and ``pyvenv.cfg`` are rewritten."""
    old, new = os.fsencode(old_place), os.fsencode(new_place)
    for path in [venv / "pyvenv.cfg", *(venv / "bin").iterdir()]:
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if old in data:
            atomic_file.write_bytes(path, data.replace(old, new), mode=path.stat().st_mode)


def build_prefix_template(cache_dir: Path, log: Path) -> Path:
    """BUILD_PREFIX: ``bin/python`` is the interpreter running this tool (the driver is stdlib-only)."""
    # one per interpreter: the cache is shared by checkouts, whose tools may run from different venvs
    inputs = {"executable": sys.executable, "version": platform.python_version()}
    key = cache_store.EntryKey("build-env", f"{sys.version_info[0]}.{sys.version_info[1]}", inputs)

    def make(making: cache_store.Making) -> None:
        making.staging.rmdir()  # venv makes it
        making.run([sys.executable, "-m", "venv", "--without-pip", str(making.staging)], log)
        relocate_venv(making.staging, making.final)

    made = cache_store.obtain(cache_dir, key, make)
    assert made is not None
    return made


@dataclass(frozen=True)
class StandinLibrary:
    """A conda-forge package the stand-in's tiny library of ``third_party/<directory>`` plays: built once,
    installed into the host prefixes (and the import checks' prefixes) conda would give those packages."""

    directory: str  # below the stand-in's third_party/
    names: tuple[str, ...]  # the package names that bring it (the -devel one and its run-time one)


# MAGMA for the CUDA linalg library; MKL for a BLAS=MKL build (x86_64)
MAGMA = StandinLibrary("magma", ("libmagma", "libmagma-devel"))
MKL = StandinLibrary("mkl", ("mkl", "mkl-devel"))
STANDIN_LIBRARIES = (MAGMA, MKL)


def library_install(standin: Path, library: StandinLibrary, cache_dir: Path, log: Path) -> Path:
    """The stand-in's tiny library, built once per source, CMake and compiler: the files conda-forge's
    packages of ``library`` would bring."""
    sources = (standin / "third_party" / library.directory).absolute()

    def make(making: cache_store.Making) -> None:
        build = making.staging.with_name(f"{making.staging.name}.build")  # a leftover of the same entry
        shutil.rmtree(build, ignore_errors=True)
        try:
            for args in (
                ["cmake", "-S", str(sources), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"],
                ["cmake", "--build", str(build)],
                ["cmake", "--install", str(build), "--prefix", str(making.staging)],
            ):
                making.run(args, log)
        except subprocess.CalledProcessError as exc:
            raise ToolError(
                f"could not build the stand-in's {library.names[0]} ({args[1]} failed): details in {log}"
            ) from exc
        finally:
            shutil.rmtree(build, ignore_errors=True)

    made = cache_store.obtain(cache_dir, library_key(standin, library), make)
    assert made is not None
    return made


def library_key(standin: Path, library: StandinLibrary) -> cache_store.EntryKey:
    """What the stand-in's library follows from: its sources, CMake and the C++ compiler."""
    inputs = {
        "sources": cache_store.tree_digest(standin / "third_party" / library.directory),
        "cmake": tool_identity("cmake"),
        "cxx": tool_identity(os.environ.get("CXX") or "c++"),
    }
    return cache_store.EntryKey(library.names[0], "", inputs)


def magma_install(standin: Path, cache_dir: Path, log: Path) -> Path:
    """The stand-in's tiny libmagma (conda-forge's libmagma/libmagma-devel)."""
    return library_install(standin, MAGMA, cache_dir, log)


def magma_key(standin: Path) -> cache_store.EntryKey:
    return library_key(standin, MAGMA)


def tool_identity(program: str) -> dict[str, str]:
    """A tool an entry is made with, as a key input: its real path and the first line of its --version."""
    found = shutil.which(program)
    if found is None:
        raise ToolError(f"{program} is not on PATH: install it (run-tests.py lists the Debian packages)")
    real = Path(found).resolve()
    info = real.stat()
    stamp = (str(real), info.st_mtime_ns, info.st_size)
    if stamp not in _IDENTITIES:
        said = subprocess.run([str(real), "--version"], check=True, capture_output=True, text=True).stdout
        _IDENTITIES[stamp] = {"path": str(real), "version": (said.splitlines() or ["?"])[0]}
    return _IDENTITIES[stamp]


def prefix_files(prefix: Path) -> set[str]:
    """Files and symlinks under ``prefix``, as '/'-separated relative paths (what conda-build compares);
    listed by the driver's own walk, so the harness and the staging see the same entries."""
    return set(staging.relative_entries(prefix, prefix))


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
