"""A local conda channel, made on this machine, from which rattler-build builds recipe-v1/recipe.yaml offline.

Every package is a real ``.conda`` file written by conda's own packaging library (``conda-package-handling``)
and indexed by rattler (``rattler.index.index_fs``); its contents are this machine's tools, so the build
runs the recipe's real scripts against the upstream stand-in (tests/upstream_standin), not PyTorch:

* ``python`` (one per pyenv CPython 3.X): a *thin* package in the layout of a venv: ``bin/python3.X`` is a
  link to pyenv's interpreter and ``pyvenv.cfg`` names its home, so ``sys.prefix`` is the conda prefix and
  ``site-packages`` the prefix's own, while the standard library and headers stay in pyenv's tree (a copy
  would add about 300 MB per Python for nothing the stand-in needs). It depends on and run-exports
  ``python_abi 3.X.* *_cp3XY`` as conda-forge's python does (the run-export pytorch-cpu-feedstock#518
  saw leaking from a staging output);
* the Python packages the stand-in's build imports (``prefixes.PYPI_NAMES``: numpy, pip, setuptools, ...),
  repackaged per Python from the wheels ``pip download`` fetches (PyPI or pip's cache), with the ``.pyc``
  files of their modules compiled by that Python, as conda-forge's packages ship them (conda compiles those
  of noarch packages at install): without them the first build that imports numpy writes
  ``lib/python3.X/**/__pycache__`` into the host prefix, files of no package, which conda-build copies into
  every later output's host prefix (its ``SP_DIR`` then named pass 1's Python for every ``pytorch``) and
  rattler-build packaged into ``libtorch`` (229 files, measured);
* the compiler packages ``compiler('c')``/``compiler('cxx')`` resolve to (``gcc_linux-64``, ``gxx_linux-64``):
  an activation script exporting what conda-forge's activation exports (the rehearsal's
  ``activation.compiler_activation``), pointing at Debian's gcc/g++; they run-export ``libgcc``/``libstdcxx``,
  which carry links to this machine's ``libgcc_s.so.1``/``libstdc++.so.6``/``libgomp.so.1`` so that
  rattler-build's linkage check finds the libraries the stand-in's binaries load in a package, as it would
  find conda-forge's;
* ``cmake``, ``ninja`` and ``ccache``: scripts that run Debian's programs (not links: conda installs the
  target of an absolute link as a copy, conda/gateways/disk/create.py ``copy``, and a copied ``cmake``
  finds no ``share/cmake-3.25`` beside itself: "CMake Error: Could not find CMAKE_ROOT", measured with conda
  26.7.1);
* ``libmagma-devel``/``libmagma`` and ``mkl-devel``/``mkl``: the stand-in's tiny libmagma (CUDA
  configurations) and MKL (MKL builds), each a run-time package and a -devel one run-exporting it;
* every other requirement the rendered recipe names: a package with metadata only.

Versions: a tool package carries the version the recipe asks for, not the tool's (Debian's CMake 3.25
wraps as whatever ``cmake >=3.27`` accepts); the real tool's version is in the package's summary. Each
package's version is the first of its candidates (the variant's pin, then every version the specs name)
that every spec of the rendered recipe accepts, so the list is generated, never written by hand.

The channel is an entry of the per-user cache (common/cache_store.py): made once per plan and machine (its
key names the directory), under a lock, in a staging directory renamed into place when complete, and checked
against its manifest when reused; so is each Python's set of wheel packages.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from feedstock_tools.common import cache_store, full_device, path_safety
from feedstock_tools.common.errors import ToolError
from feedstock_tools.proofs.rehearsal import activation, prefixes
from megabuild import atomic_file

# Bumped when what goes into a package changes, so stale channels are not reused.
CHANNEL_FORMAT = "5"
SUBDIR = "linux-64"
# Packages with files; every other needed name becomes a metadata-only package.
TOOL_PROGRAMS = {"cmake": "cmake", "ninja": "ninja", "ccache": "ccache"}
# Debian's compiler run-time libraries, in the packages conda-forge ships them in (its gcc/gxx run-export
# libgcc and libstdcxx; libgomp comes with _openmp_mutex on linux-64: ctng-compilers-feedstock b9e501a).
# glibc's libraries, in the stdlib('c') package (sysroot_linux-64): rattler-build's linkage check allows a
# library as "system" when a file of that name is in the build environment's sysroot_<platform> package
# (rattler-build source, post_process/checks.rs add_linux_system_libs; evidence rank 2, read through the
# code search, version not pinned there). The sysroot links to this machine's glibc.
SYSROOT_LIBRARIES = (
    "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libmvec.so.1",
    "libresolv.so.2", "ld-linux-x86-64.so.2",
)  # fmt: skip
RUNTIME_LIBRARIES = {
    "libgcc": ("libgcc_s.so.1",),
    "libstdcxx": ("libstdc++.so.6",),
    "_openmp_mutex": ("libgomp.so.1",),
}
COMPILER_RUN_EXPORTS = {"c": ["libgcc"], "cxx": ["libstdcxx", "libgcc"]}
_VERSION_WORD = re.compile(r"\d+(?:\.\d+)*")


@dataclass(frozen=True)
class ChannelPlan:
    """What the channel must hold: every needed package name with the specs the rendered recipe gives it,
    the compiler package names, the variant's pins and the Pythons (``3.X`` with their build-string glob)."""

    needs: Mapping[str, tuple[str, ...]]
    compilers: Mapping[str, str]  # "c"/"cxx" -> package name, e.g. "gcc_linux-64"
    stdlib: str | None  # stdlib('c')'s package, e.g. "sysroot_linux-64"
    pins: Mapping[str, str]  # package name -> the variant's value for it
    pythons: Mapping[str, str]  # "3.12" -> "*_cpython" (the variant's build-string glob)
    standin: Path

    @property
    def pip_requirements(self) -> tuple[str, ...]:
        """The Python packages' pip requirements (every package of prefixes.PYPI_NAMES the recipe needs)."""
        wanted = [n for n in self.needs if n in prefixes.PYPI_NAMES]
        return prefixes.pip_requirements([s for n in wanted for s in self.needs[n]]) or tuple(
            sorted({prefixes.PYPI_NAMES[n] for n in wanted})
        )

    def key(self) -> cache_store.EntryKey:
        """Everything the channel's content follows from: the plan, and the machine's parts it packages
        (each Python's wheels entry, which keys its interpreter; the compilers, tools and system libraries;
        the stand-in's libmagma and MKL entries)."""
        inputs = {
            "format": CHANNEL_FORMAT,
            "needs": {k: sorted(v) for k, v in sorted(self.needs.items())},
            "compilers": dict(sorted(self.compilers.items())),
            "stdlib": self.stdlib,
            "pins": dict(sorted(self.pins.items())),
            "pythons": dict(sorted(self.pythons.items())),
            "wheels": [wheels_key(minor, self.pip_requirements).name for minor in sorted(self.pythons)],
            "machine": machine_identity(self.compilers.values(), self.needs),
            **{
                library.names[0]: prefixes.library_key(self.standin, library).name
                for library in prefixes.STANDIN_LIBRARIES
                if library.names[1] in self.needs
            },
        }
        return cache_store.EntryKey("channel", "", inputs)


# ---- versions ----------------------------------------------------------------------------------------


def _spec_parts(spec: str) -> tuple[str, str | None, str | None]:
    words = spec.split()
    return words[0], (words[1] if len(words) > 1 else None), (words[2] if len(words) > 2 else None)


def choose_version(name: str, specs: Iterable[str], pin: str | None) -> str:
    """The first candidate version every spec accepts: the variant's pin, the versions the specs name
    (and each with ``.0`` appended, for ``>x`` bounds), then ``0``."""
    from rattler import Version, VersionSpec

    specs = list(specs)
    constraints = [VersionSpec(v, strict=False) for _, v, _ in map(_spec_parts, specs) if v and v != "*"]
    candidates: list[str] = []
    texts = ([pin] if pin else []) + [" ".join(spec.split()[1:]) for spec in specs]  # never the name's digits
    for text in texts:
        for word in _VERSION_WORD.findall(text):
            candidates += [word, word + ".1", word + ".0.1"]
    candidates.append("0")
    for candidate in candidates:
        if all(constraint.matches(Version(candidate)) for constraint in constraints):
            return candidate
    raise ToolError(
        f"local channel: no version of {name} satisfies {', '.join(specs)} (step: choosing versions); "
        "the recipe's specs for it contradict each other: fix them in recipe-v1/recipe.yaml"
    )


def build_strings(specs: Iterable[str]) -> list[str]:
    """One build string per distinct build-string glob of the specs ("*_mkl" -> "h0_mkl"), at least one."""
    globs = sorted({b for _, _, b in map(_spec_parts, specs) if b and b != "*"})
    return [g.replace("*", "h0") for g in globs] or ["h0"]


# ---- writing packages --------------------------------------------------------------------------------


@dataclass
class PackageDraft:
    name: str
    version: str
    build: str
    depends: list[str] = field(default_factory=list)
    constrains: list[str] = field(default_factory=list)
    run_exports: dict[str, list[str]] = field(default_factory=dict)
    summary: str = "metadata only (pytorch-feedstock's local channel)"
    files: dict[str, bytes | Path] = field(default_factory=dict)  # relative path -> contents | link target


def write_package(draft: PackageDraft, out_dir: Path) -> Path:
    """``<out_dir>/<name>-<version>-<build>.conda`` through conda-package-handling."""
    from conda_package_handling import api

    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        root = Path(tmp)
        paths = []
        for rel, content in sorted(draft.files.items()):
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Path):
                os.symlink(content, target)
                paths.append({"_path": rel, "path_type": "softlink"})
            else:
                executable = content.startswith((b"#!", b"\x7fELF"))
                atomic_file.write_bytes(target, content, mode=0o755 if executable else None)
                paths.append(
                    {
                        "_path": rel,
                        "path_type": "hardlink",
                        "sha256": hashlib.sha256(content).hexdigest(),
                        "size_in_bytes": len(content),
                    }
                )
        info = root / "info"
        info.mkdir()
        index = {
            "name": draft.name,
            "version": draft.version,
            "build": draft.build,
            "build_number": 0,
            "depends": draft.depends,
            "constrains": draft.constrains,
            "subdir": SUBDIR,
            "arch": "x86_64",
            "platform": "linux",
            "license": "local",
            "timestamp": int(time.time() * 1000),
        }
        atomic_file.write_text(info / "index.json", json.dumps(index, indent=1))
        paths_json = json.dumps({"paths": paths, "paths_version": 1}, indent=1)
        atomic_file.write_text(info / "paths.json", paths_json)
        atomic_file.write_text(info / "files", "".join(p["_path"] + "\n" for p in paths))
        atomic_file.write_text(info / "about.json", json.dumps({"summary": draft.summary}))
        if draft.run_exports:
            atomic_file.write_text(info / "run_exports.json", json.dumps(draft.run_exports))
        names = [p["_path"] for p in paths] + [f"info/{f.name}" for f in info.iterdir()]
        stem = f"{draft.name}-{draft.version}-{draft.build}"
        # zstd level 3: the channel is local; conda-package-handling 2.6.0's default, 19, is far slower
        api.create(str(root), names, f"{stem}.conda", out_folder=str(out_dir), compression_level=3)
    return out_dir / f"{stem}.conda"


# ---- the packages ------------------------------------------------------------------------------------


def python_packages(minor: str, build_glob: str) -> list[PackageDraft]:
    interpreter = prefixes.find_interpreter(minor)
    if interpreter is None:
        raise ToolError(
            f"local channel: no CPython {minor} on this machine (step: python {minor}); "
            f"install it with 'pyenv install {minor}'"
        )
    real = interpreter.resolve()
    full = subprocess.run(
        [str(real), "-c", "import platform; print(platform.python_version())"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    abi_build = "0_cp" + minor.replace(".", "")
    abi = f"python_abi {minor}.* *_cp{minor.replace('.', '')}"
    files: dict[str, bytes | Path] = {
        f"bin/python{minor}": real,
        "bin/python3": Path(f"python{minor}"),
        "bin/python": Path(f"python{minor}"),
        "pyvenv.cfg": (
            f"home = {real.parent}\ninclude-system-site-packages = false\nversion = {full}\n"
        ).encode(),
        f"lib/python{minor}/site-packages/README.local-channel": b"site-packages of this prefix\n",
    }
    return [
        PackageDraft(
            "python",
            full,
            build_glob.replace("*", "h0"),
            depends=[abi],
            run_exports={"weak": [abi]},
            summary=f"pyenv's CPython {full} at {real} in a venv layout",
            files=files,
        ),
        PackageDraft("python_abi", minor, abi_build, summary="the Python ABI marker"),
    ]


def wheels_key(minor: str, pip_requirements: Sequence[str]) -> cache_store.EntryKey:
    """What one Python's wheel packages follow from: its interpreter, the requirements, pip's settings."""
    interpreter = prefixes.find_interpreter(minor)
    if interpreter is None:
        raise ToolError(
            f"local channel: no CPython {minor} on this machine (step: python {minor}); "
            f"install it with 'pyenv install {minor}'"
        )
    inputs = {
        "format": CHANNEL_FORMAT,
        **prefixes.interpreter_identity(interpreter),
        "requirements": sorted(pip_requirements),
        "settings": prefixes.installer_settings(),
    }
    return cache_store.EntryKey("wheels", minor, inputs)


def wheel_packages(
    minor: str,
    pip_requirements: Sequence[str],
    store: Path,
    log: Path,
    *,
    wait: bool = True,
    say: Callable[[str], None] = lambda _line: None,
) -> list[Path] | None:
    """Each wheel pip downloads for these requirements (with their dependencies), as a ``.conda`` package of
    this Python: the wheel's files under lib/python3.X/site-packages, its console scripts in bin/.

    An entry of the cache per Python and requirement list (``packages/*.conda``, with the wheels they were
    made from): the CPU and CUDA channels ask for the same packages, which the second channel would make
    again (pip's resolution, compiling every module; docs/records/2026-11-28-ci-time.md). Without
    ``wait``, None
    when another process is making this Python's packages now."""
    interpreter = prefixes.find_interpreter(minor)
    assert interpreter is not None  # wheels_key found it

    def make(making: cache_store.Making) -> None:
        wheels = _download(minor, interpreter, pip_requirements, making, log)
        (making.staging / "packages").mkdir()
        for wheel in wheels:
            _package_wheel(wheel, minor, interpreter, making, log)

    entry = cache_store.obtain(store, wheels_key(minor, pip_requirements), make, say, wait=wait)
    return None if entry is None else sorted((entry / "packages").glob("*.conda"))


def _download(
    minor: str, interpreter: Path, pip_requirements: Sequence[str], making: cache_store.Making, log: Path
) -> list[Path]:
    """pip download's wheels for the requirements, with their dependencies: every wheel in the entry's
    fresh ``wheels/`` is one of this resolution."""
    target = making.staging / "wheels"
    try:
        download = [interpreter, "-m", "pip", "download", "--only-binary=:all:", "--dest", target]
        making.run([*download, *pip_requirements], log)
    except subprocess.CalledProcessError as exc:
        if full_device.log_says_full(log):
            raise ToolError(
                full_device.full_log_line(f"local channel: pip download for Python {minor}", log, target)
            ) from exc
        raise ToolError(
            f"local channel: pip could not download {' '.join(pip_requirements)} for Python {minor} "
            f"(step: wheels, exit {exc.returncode}); PyPI or pip's cache must have them: details in {log}"
        ) from exc
    return sorted(target.glob("*.whl"))


def _package_wheel(wheel: Path, minor: str, interpreter: Path, making: cache_store.Making, log: Path) -> Path:
    """The wheel's ``.conda`` package for this Python, into the entry's ``packages/``."""
    try:
        draft = _wheel_package(wheel, minor)
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise ToolError(
            f"local channel: {wheel.name} will not repackage ({exc}) (step: wheel for Python {minor}); "
            f"pip gave a broken wheel: remove it from pip's find-links or cache ('pip cache remove "
            f"{wheel.name.split('-')[0]}') and run again"
        ) from exc
    draft.files.update(bytecode(draft.files, interpreter, making, log))
    return write_package(draft, making.staging / "packages")


def bytecode(
    files: Mapping[str, bytes | Path], interpreter: Path, making: cache_store.Making, log: Path
) -> dict[str, bytes]:
    """The ``__pycache__/*.pyc`` of every module in ``files``, compiled by ``interpreter`` (the package's own
    Python). Checked-hash pycs (PEP 552): valid whatever modification times an installer gives the sources,
    so no Python run in a prefix rewrites them (conda-forge's are timestamp-based, which conda keeps valid by
    installing the archive's times; no installer's times are relied on here). A module the interpreter
    cannot compile (code for another Python version) gets none, as with pip."""
    sources = {rel: data for rel, data in files.items() if rel.endswith(".py") and isinstance(data, bytes)}
    if not sources:
        return {}
    with tempfile.TemporaryDirectory(prefix="pyc-", dir=making.staging) as tmp:
        root = Path(tmp)
        for rel, data in sources.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            atomic_file.write_bytes(root / rel, data)
        # exit status 1 when a module does not compile for this Python: those are left without a pyc
        with contextlib.suppress(subprocess.CalledProcessError):
            compiling = [interpreter, "-m", "compileall", "-q", "--invalidation-mode", "checked-hash"]
            making.run([*compiling, "-s", tmp, tmp], log)
        return {
            str(path.relative_to(root)): path.read_bytes()
            for path in root.rglob("*.pyc")
            if path.parent.name == "__pycache__"
        }


def _wheel_package(wheel: Path, minor: str) -> PackageDraft:
    dist, version = wheel.name.split("-")[:2]
    conda_name = {v.lower(): k for k, v in prefixes.PYPI_NAMES.items()}.get(dist.lower(), dist.lower())
    site = f"lib/python{minor}/site-packages/"
    files: dict[str, bytes | Path] = {}
    scripts: list[tuple[str, str]] = []
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            if member.is_dir():
                continue
            # normalised and kept inside the package as pip keeps it inside the environment
            name = path_safety.archive_member(member.filename, wheel.name)
            data_dir = f"{dist}-{version}.data/"
            if name.startswith(data_dir):
                kind, _, rest = name[len(data_dir) :].partition("/")
                if kind in ("purelib", "platlib"):
                    files[site + rest] = archive.read(member)
                elif kind == "scripts":
                    files["bin/" + rest] = archive.read(member)
                continue
            files[site + name] = archive.read(member)
            if name.endswith(".dist-info/entry_points.txt"):
                scripts = _console_scripts(archive.read(member).decode(), wheel.name)
    for script, module, attr in scripts:
        code = f"import sys; from {module} import {attr.split('.')[0]}; sys.exit({attr}())"
        files["bin/" + script] = (
            "#!/bin/sh\n# console script of the local channel's wheel package\n"
            f'exec "$(dirname "$0")/python" -c {shlex.quote(code)} "$@"\n'
        ).encode()
    minor_tag = minor.replace(".", "")
    return PackageDraft(
        conda_name,
        version,
        f"py{minor_tag}_0",
        depends=[f"python {minor}.*"],
        summary=f"{wheel.name} repackaged",
        files=files,
    )


def _console_scripts(text: str, wheel: str) -> list[tuple[str, str, str]]:
    """(name, module, attr) of each console script ``entry_points.txt`` of ``wheel`` declares, each checked
    as pip checks it before it writes a script (path_safety.entry_point)."""
    scripts, section = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "console_scripts" and "=" in line:
            name, _, target = line.partition("=")
            scripts.append(path_safety.entry_point(name.strip(), target.strip(), wheel))
    return scripts


def compiler_package(lang: str, name: str, version: str) -> PackageDraft:
    """conda-forge's activation for this language, as the rehearsal plays it, with this machine's gcc."""
    variables = activation.compiler_activation(
        prefix=Path("${PREFIX}"),
        build_prefix=Path("${BUILD_PREFIX}"),
        src_dir=Path("${SRC_DIR}"),
        pkg_name="${PKG_NAME:-}",
        pkg_version="${PKG_VERSION:-}",
        target_platform=SUBDIR,
        build_platform=SUBDIR,
    )
    own = {"cxx": {"CXX", "CXXFLAGS", "DEBUG_CXXFLAGS"}}.get(lang)
    chosen = {
        k: v
        for k, v in variables.items()
        if (k in own if own else k not in {"CXX", "CXXFLAGS", "DEBUG_CXXFLAGS"})
    }
    script = "".join(f'export {key}="{value}"\n' for key, value in sorted(chosen.items()))
    tool = variables["CXX" if lang == "cxx" else "CC"]
    real = subprocess.run(
        [tool, "-dumpfullversion"], check=True, capture_output=True, text=True
    ).stdout.strip()
    return PackageDraft(
        name,
        version,
        "h0",
        run_exports={"strong": list(COMPILER_RUN_EXPORTS[lang])},
        summary=f"activation of this machine's {Path(tool).name} {real} (conda-forge's variables)",
        files={f"etc/conda/activate.d/activate-{name}.sh": script.encode()},
    )


def _system_library(library: str, step: str) -> Path:
    found = subprocess.run(
        ["gcc", f"-print-file-name={library}"], check=True, capture_output=True, text=True
    ).stdout.strip()
    if not os.path.isabs(found):
        raise ToolError(
            f"local channel: gcc does not know {library} (step: {step}); install gcc and libc6-dev"
        )
    return Path(os.path.realpath(found))


def runtime_package(name: str, version: str) -> PackageDraft:
    # copies, not links: rattler-build's linkage check resolves a link and calls a target outside the
    # prefix overlinking ("Overlinking against: /usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30", measured)
    files: dict[str, bytes | Path] = {
        f"lib/{lib}": _system_library(lib, name).read_bytes() for lib in RUNTIME_LIBRARIES[name]
    }
    # conda-forge's libgcc depends on _openmp_mutex (ctng-compilers-feedstock b9e501a)
    depends = ["_openmp_mutex"] if name == "libgcc" else []
    return PackageDraft(
        name,
        version,
        "h0",
        depends=depends,
        summary="this machine's " + ", ".join(RUNTIME_LIBRARIES[name]),
        files=files,
    )


def sysroot_package(name: str, version: str) -> PackageDraft:
    files: dict[str, bytes | Path] = {
        f"x86_64-conda-linux-gnu/sysroot/lib64/{lib}": _system_library(lib, name) for lib in SYSROOT_LIBRARIES
    }
    return PackageDraft(name, version, "h0", summary="links to this machine's glibc", files=files)


def tool_package(name: str, version: str) -> PackageDraft:
    """A script running this machine's program (see the module's docstring for why not a link)."""
    program = shutil.which(TOOL_PROGRAMS[name])
    if program is None:
        raise ToolError(f"local channel: {TOOL_PROGRAMS[name]} is not on PATH (step: {name}); install it")
    real = os.path.realpath(program)
    first = subprocess.run([real, "--version"], check=True, capture_output=True, text=True).stdout
    script = f'#!/bin/sh\n# {name} of the local channel\nexec {shlex.quote(real)} "$@"\n'
    return PackageDraft(
        name,
        version,
        "h0",
        summary=f"this machine's {real} ({first.splitlines()[0] if first else '?'})",
        files={f"bin/{TOOL_PROGRAMS[name]}": script.encode()},
    )


def library_packages(
    standin: Path, library: prefixes.StandinLibrary, cache_dir: Path, log: Path, versions: Mapping[str, str]
) -> list[PackageDraft]:
    """The stand-in's tiny library as conda-forge's pair of packages: the run-time one (``libmagma``,
    ``mkl``: the versioned shared library) and the -devel one (headers and the unversioned name to link,
    run-exporting the run-time one). A link of the install tree is packaged as a copy of its target (the
    soname stays the versioned name)."""
    install = prefixes.library_install(standin, library, cache_dir, log)
    runtime_files: dict[str, bytes | Path] = {}
    devel_files: dict[str, bytes | Path] = {}
    for path in sorted(install.rglob("*")):
        if not path.is_file():
            continue
        relative = str(path.relative_to(install))
        versioned = relative.startswith("lib/") and not path.is_symlink()
        (runtime_files if versioned else devel_files)[relative] = path.resolve().read_bytes()
    runtime, devel = library.names
    version = versions.get(runtime, versions.get(devel, "0"))
    return [
        PackageDraft(runtime, version, "h0", summary=f"the stand-in's tiny {runtime}", files=runtime_files),
        PackageDraft(
            devel,
            versions.get(devel, version),
            "h0",
            depends=[f"{runtime} =={version}"],
            run_exports={"weak": [f"{runtime} >={version}"]},
            summary=f"the stand-in's {runtime} headers",
            files=devel_files,
        ),
    ]


# ---- the channel -------------------------------------------------------------------------------------


def make_channel(
    plan: ChannelPlan, cache_dir: Path, log: Path, progress: Callable[[str], None] = lambda line: None
) -> Path:
    """The channel for this plan, an entry of the cache (``<cache_dir>/channel-<hash>``, its ``linux-64/``
    holding the packages and ``repodata.json``); ``progress`` hears of each step while one is made."""
    key = plan.key()

    def make(making: cache_store.Making) -> None:
        progress(f"      making {making.final.name} (log: {log})")
        _fill_channel(plan, making.staging, cache_dir, log, progress)

    channel = cache_store.obtain(cache_dir, key, make, progress)
    assert channel is not None  # waited for
    return channel


def _fill_channel(
    plan: ChannelPlan, channel: Path, cache_dir: Path, log: Path, progress: Callable[[str], None]
) -> None:
    from rattler.index import index_fs

    out = channel / SUBDIR
    out.mkdir(parents=True)
    (channel / "noarch").mkdir()
    versions = {name: choose_version(name, specs, plan.pins.get(name)) for name, specs in plan.needs.items()}
    drafts, made, done = _python_packages(plan, cache_dir, log, progress)
    for lang, name in plan.compilers.items():
        drafts.append(compiler_package(lang, name, versions.get(name, "0")))
        done.add(name)
    if plan.stdlib:
        drafts.append(sysroot_package(plan.stdlib, versions.get(plan.stdlib, "0")))
        done.add(plan.stdlib)
    for name in RUNTIME_LIBRARIES:
        drafts.append(runtime_package(name, versions.get(name, "0")))
        done.add(name)
    for name in TOOL_PROGRAMS:
        if name in plan.needs:
            drafts.append(tool_package(name, versions[name]))
            done.add(name)
    for library in prefixes.STANDIN_LIBRARIES:
        if library.names[1] in plan.needs:
            drafts += library_packages(plan.standin, library, cache_dir, log, versions)
            done |= set(library.names)
    for name, specs in sorted(plan.needs.items()):
        if name in done or name.startswith("__"):
            continue
        for build in build_strings(specs):
            drafts.append(PackageDraft(name, versions[name], build))
    progress(f"      writing {len(drafts)} packages, copying the {len(made)} of the wheels")
    _write_all(drafts, made, out, cache_dir)
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False))


def machine_identity(compilers: Iterable[str], needs: Mapping[str, object]) -> dict[str, object]:
    """The programs and libraries of this machine a channel packages or points at, as a key input: the
    compilers, CMake and Ninja (real path and version), and the real path, size and mtime of each system
    library (a Debian upgrade of libstdc++ is another channel)."""
    programs = ["gcc", "g++", *(TOOL_PROGRAMS[name] for name in TOOL_PROGRAMS if name in needs)]
    libraries = {}
    for library in (*SYSROOT_LIBRARIES, *(lib for libs in RUNTIME_LIBRARIES.values() for lib in libs)):
        real = _system_library(library, "key")
        info = real.stat()
        libraries[library] = [str(real), info.st_size, info.st_mtime_ns]
    return {
        "programs": {program: prefixes.tool_identity(program) for program in programs},
        "libraries": libraries,
        "compiler_packages": sorted(compilers),
    }


def _python_packages(
    plan: ChannelPlan, store: Path, log: Path, progress: Callable[[str], None]
) -> tuple[list[PackageDraft], list[Path], set[str]]:
    """Each Python's packages: its interpreter's (drafts), its wheels' (made once for every channel), and the
    names they provide."""
    drafts: list[PackageDraft] = []
    made: list[Path] = []
    done: set[str] = {"python", "python_abi"}
    pending = sorted(plan.pythons)
    while pending:
        # first a Python whose packages no other process is making now, else wait for the first: two test
        # workers making the CPU and the CUDA channel at once each make one Python's, where one waited for
        # the other to make them all (docs/records/2026-11-28-ci-time.md)
        for minor in pending:
            wheels = wheel_packages(minor, plan.pip_requirements, store, log, wait=False, say=progress)
            if wheels is not None:
                break
        else:
            minor = pending[0]
            wheels = wheel_packages(minor, plan.pip_requirements, store, log, say=progress)
        assert wheels is not None  # waited for
        pending.remove(minor)
        progress(f"      Python {minor}: its interpreter, and its wheels' packages with their .pyc files")
        drafts += python_packages(minor, plan.pythons[minor])
        made += wheels
        done |= {wheel.name.rsplit("-", 2)[0] for wheel in wheels}
    return drafts, made, done


def _write_all(drafts: Sequence[PackageDraft], made: Sequence[Path], out: Path, cache_dir: Path) -> None:
    """The packages into the channel's subdir: the drafts written, the wheels' (made once) copied."""
    for package in made:
        shutil.copy(package, out / package.name)
    for draft in drafts:
        try:
            write_package(draft, out)
        except (OSError, ValueError) as exc:
            raise ToolError(
                f"local channel: could not write {draft.name} {draft.version} ({exc}) (step: packaging); "
                f"check the disk under {cache_dir}"
            ) from exc


def channel_size(channel: Path) -> int:
    return sum(p.stat().st_size for p in channel.rglob("*.conda"))


def describe(drafts: Iterable[PackageDraft]) -> str:  # pragma: no cover - debugging aid
    buffer = io.StringIO()
    for d in drafts:
        buffer.write(f"{d.name} {d.version} {d.build} {shlex.join(d.depends)}\n")
    return buffer.getvalue()
