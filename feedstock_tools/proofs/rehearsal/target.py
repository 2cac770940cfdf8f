"""Rehearsing another platform's configuration here (linux-64): what is simulated, and on what evidence.

The stand-in is always compiled by this machine's gcc into ELF files. What a configuration of another
target changes for the *recipe and driver* is simulated around that:

* **Build machine and cross-compilation.** ``build_platform`` is the machine this project's CI builds the
  target on, read from conda-forge.yml's ``build_platform`` (osx-64 on osx-arm64, linux-aarch64 on linux-64;
  the others natively), and a cross target gets ``CONDA_BUILD_CROSS_COMPILATION=1`` and, in ``CMAKE_ARGS``,
  the ``-DCMAKE_SYSTEM_NAME``/``-DCMAKE_SYSTEM_PROCESSOR`` with which conda-forge's compiler activations
  make CMake cross-compile (ctng-compiler-activation-feedstock 52080ff recipe/activate-gcc.sh, clang-
  compiler-activation-feedstock 9fc6346 recipe/activate-clang.sh). macOS targets keep CMake's Linux platform
  here (its Darwin one needs Apple's linker), so ``CMAKE_SYSTEM_NAME`` is ``Linux`` with the target's
  processor.
* **Library naming.** ``SHLIB_EXT`` is ``.dylib`` for osx (conda-build's ``get_shlib_ext``), and a CMake
  rules override (``CMAKE_USER_MAKE_RULES_OVERRIDE``, loaded after the platform files) gives shared
  libraries Darwin's ``.dylib`` suffix; their SONAME is the file name, the ELF counterpart of the
  ``@rpath/<name>`` install name CMake gives a macOS library.
* **The target's Python.** A target interpreter is this machine's CPython reporting the target's sysconfig
  (``SOABI``, ``EXT_SUFFIX``, ``sysconfig.get_platform()``) through ``_PYTHON_SYSCONFIGDATA_NAME`` and
  ``_PYTHON_HOST_PLATFORM``, the variables CPython's sysconfig reads for cross builds and crossenv (hence
  cross-python) relies on, and importing extension modules named with the target's suffix.
* **cross-python.** On a cross build the host prefix's ``bin/python`` is a target binary the build machine
  cannot execute (here: a stub with the target's executable header, so running it fails with "Exec format
  error"); an output with ``cross-python_<target>`` in its build requirements gets what cross-python's
  activation makes (cross-python-feedstock f5c9947 recipe/activate-cross-python.sh): a build-machine
  interpreter in ``$BUILD_PREFIX/venv`` that reports the target's sysconfig, and ``$PREFIX/bin/python``
  replaced by a shim that runs it.
* **CMake's empty SOABI.** CMake >= 4.1 does not run the interpreter for ``Python_SOABI`` when
  cross-compiling without an emulator (policy CMP0190, quoted by pytorch-cpu-feedstock 74dd3d46 patch 0022);
  the stand-in models that, and the recipe's patch 0012 behaviour that fills it from the interpreter.

* **Windows (win-64).** No Windows CPython can run here (Wine runs PE programs, but there is no Windows
  Python to give it), so the target is simulated like macOS: this machine's gcc, with a CMake rules
  override that names libraries as MSVC does (``c10.dll``, no ``lib`` prefix; Python modules ``.pyd``),
  unsets ``LINUX`` (2.13.0 builds the lazy linalg library only there) and sets ``STANDIN_WINDOWS``, with
  which the stand-in installs DLLs to ``bin/`` (the recipe's patch 0020) and writes an import library
  ``<name>.lib`` (an ar archive, the format of MSVC's import libraries) beside each; the target's Python
  reports ``win-amd64``, ``cp3XY-win_amd64`` and ``.cp3XY-win_amd64.pyd`` and sits at ``%PREFIX%\\python.exe``
  as conda's does, with ``libs/python3XY.lib``. conda-build's Windows variables (``LIBRARY_PREFIX``, ...)
  are exported, and the harness runs the command ``recipe/bld.bat`` runs (bld.bat itself runs under Wine's
  cmd in tests/megabuild/test_megabuild_windows_driver.py).

What cannot be shown here is listed in docs/reference/rehearsal.md ("Limits").
"""

from __future__ import annotations

import shlex
import subprocess
import sysconfig
from dataclasses import dataclass, replace
from pathlib import Path

from megabuild import atomic_file

NATIVE = "linux-64"


@dataclass(frozen=True)
class Target:
    subdir: str  # conda's name: osx-arm64
    build_subdir: str  # the CI machine that builds it; in TARGETS the target itself, target_for fills it in
    machine: str  # CMAKE_SYSTEM_PROCESSOR / uname -m of the target
    triplet: str  # conda's HOST triplet (the compilers' prefix)
    shlib_ext: str  # conda-build's SHLIB_EXT
    soabi_tail: str  # SOABI after "cpython-3XY-"
    platform: str  # sysconfig.get_platform() of conda-forge's Python there
    # an executable header the build machine refuses ("Exec format error"): ELF e_machine or Mach-O cputype.
    # Rosetta 2 would run osx-64's on Apple silicon, but a build must not depend on it: cross-python puts
    # its own interpreter in its place whenever it is in the build requirements (activate-cross-python.sh)
    foreign_header: bytes

    @property
    def cross(self) -> bool:
        return self.subdir != self.build_subdir

    @property
    def macos(self) -> bool:
        return self.subdir.startswith("osx")

    @property
    def windows(self) -> bool:
        return self.subdir.startswith("win")

    def soabi(self, nodot: str) -> str:
        """CPython's SOABI: cpython-312-x86_64-linux-gnu; on Windows cp312-win_amd64."""
        return f"cp{nodot}-{self.soabi_tail}" if self.windows else f"cpython-{nodot}-{self.soabi_tail}"

    def ext_suffix(self, nodot: str) -> str:
        return f".{self.soabi(nodot)}{'.pyd' if self.windows else '.so'}"


def _elf_header(e_machine: int) -> bytes:
    """A 64-bit little-endian ELF executable header for another architecture (EM_AARCH64 = 183)."""
    ident = b"\x7fELF\x02\x01\x01" + bytes(9)
    return ident + (2).to_bytes(2, "little") + e_machine.to_bytes(2, "little") + bytes(44)


def _macho_header(cputype: int) -> bytes:
    """A 64-bit Mach-O executable header (MH_MAGIC_64, CPU_TYPE_X86_64 or CPU_TYPE_ARM64)."""
    return (0xFEEDFACF).to_bytes(4, "little") + cputype.to_bytes(4, "little") + bytes(24)


# SOABI tails and platforms: CPython's darwin builds name extensions ".cpython-3XY-darwin.so"; Linux ones
# ".cpython-3XY-<multiarch>.so". The macOS platform strings carry the Python build's deployment target.
TARGETS = {
    "linux-64": Target("linux-64", "linux-64", "x86_64", "x86_64-conda-linux-gnu", ".so",
                       "x86_64-linux-gnu", "linux-x86_64", b""),
    "linux-aarch64": Target("linux-aarch64", "linux-aarch64", "aarch64", "aarch64-conda-linux-gnu", ".so",
                            "aarch64-linux-gnu", "linux-aarch64", _elf_header(183)),
    "osx-64": Target("osx-64", "osx-64", "x86_64", "x86_64-apple-darwin13.4.0", ".dylib",
                     "darwin", "macosx-10.13-x86_64", _macho_header(0x01000007)),
    "osx-arm64": Target("osx-arm64", "osx-arm64", "arm64", "arm64-apple-darwin20.0.0", ".dylib",
                        "darwin", "macosx-11.0-arm64", _macho_header(0x0100000C)),
    # win-64: CPython's EXT_SUFFIX .cp312-win_amd64.pyd, sysconfig.get_platform() win-amd64 (the 2.13.0
    # win_amd64 wheel's torch/_C.cp312-win_amd64.pyd); "MZ" starts every PE file
    "win-64": Target("win-64", "win-64", "AMD64", "x86_64-w64-mingw32", ".dll", "win_amd64", "win-amd64",
                     b"MZ"),
}  # fmt: skip


def target_for(subdir: str, feedstock_root: Path) -> Target:
    """``subdir`` as built by CI: on the machine conda-forge.yml's ``build_platform`` names for it."""
    from feedstock_tools.ci.forge_config import read_forge_settings
    from feedstock_tools.common.errors import ToolError
    from feedstock_tools.common.feedstock import Feedstock

    if subdir not in TARGETS:
        raise ToolError(
            f"target_platform {subdir} cannot be rehearsed (known: {', '.join(TARGETS)}): add it to "
            "TARGETS in feedstock_tools/proofs/rehearsal/target.py"
        )
    build_platform = read_forge_settings(Feedstock(feedstock_root).forge_yml).build_platform
    build_subdir = build_platform.get(subdir.replace("-", "_"), subdir).replace("_", "-")
    if build_subdir not in TARGETS:
        raise ToolError(
            f"conda-forge.yml builds {subdir} on {build_subdir}, which the rehearsal does not know "
            f"(known: {', '.join(TARGETS)}); fix build_platform there"
        )
    return replace(TARGETS[subdir], build_subdir=build_subdir)


WINDOWS_NAMING = """\
# rehearsal (simulated win-64 target, feedstock_tools/proofs/rehearsal/target.py): CMake's Linux platform
# with MSVC's names (c10.dll, no lib prefix; Python modules .pyd as FindPython gives them on WIN32),
# without LINUX (2.13.0's BUILD_LAZY_CUDA_LINALG depends on it), and STANDIN_WINDOWS for the stand-in's
# Windows install layout (DLLs in bin/, import libraries in lib/).
set(CMAKE_SHARED_LIBRARY_PREFIX "")
set(CMAKE_SHARED_LIBRARY_SUFFIX ".dll")
set(CMAKE_SHARED_MODULE_PREFIX "")
set(CMAKE_SHARED_MODULE_SUFFIX ".pyd")
unset(LINUX)
set(STANDIN_WINDOWS 1)
"""

DARWIN_NAMING = """\
# rehearsal (simulated macOS target, feedstock_tools/proofs/rehearsal/target.py): CMake's Linux platform with
# Darwin's shared-library suffix (modules keep ".so" as on Darwin) and APPLE, which CMake sets on Darwin
# and the project's CMake code branches on (2.13.0 builds nnapi_backend only where it is not set).
set(CMAKE_SHARED_LIBRARY_SUFFIX ".dylib")
set(APPLE 1)
"""

_SYSCONFIGDATA = """\
# rehearsal: the sysconfig of CPython {version} on {subdir}, simulated from this machine's ({host}).
import importlib

build_time_vars = dict(importlib.import_module({host!r}).build_time_vars)
build_time_vars.update({updates!r})
"""

_STARTUP = """\
# rehearsal: this interpreter plays CPython on {subdir} (feedstock_tools/proofs/rehearsal/target.py).
import importlib.machinery as _machinery
import os as _os
import sys as _sys

_os.environ["_PYTHON_SYSCONFIGDATA_NAME"] = {sysconfigdata!r}
_os.environ["_PYTHON_HOST_PLATFORM"] = {platform!r}
if {macos!r}:
    import platform as _platform

    _platform.system = lambda: "Darwin"  # what torch/__init__.py asks to name libtorch_global_deps
    # a macOS CPython's mac_ver() names the running macOS (packaging's tags, hence scikit-build-core's wheel
    # tag, read it); here the deployment target of the platform string stands in for it
    _platform.mac_ver = lambda *_args: ({platform!r}.split("-")[1], ("", "", ""), {platform!r}.split("-")[2])
if {suffix!r} not in _machinery.EXTENSION_SUFFIXES:
    _machinery.EXTENSION_SUFFIXES.insert(0, {suffix!r})
    _loaders = [
        (_machinery.ExtensionFileLoader, _machinery.EXTENSION_SUFFIXES),
        (_machinery.SourceFileLoader, _machinery.SOURCE_SUFFIXES),
        (_machinery.SourcelessFileLoader, _machinery.BYTECODE_SUFFIXES),
    ]
    _sys.path_hooks[:] = [
        _machinery.FileFinder.path_hook(*_loaders) if "FileFinder" in repr(hook) else hook
        for hook in _sys.path_hooks
    ]
    _sys.path_importer_cache.clear()
"""


def make_target_interpreter(venv: Path, minor: str, target: Target) -> None:
    """Make the venv's interpreter report ``target``'s sysconfig and import its extension modules."""
    nodot = minor.replace(".", "")
    site = venv / "lib" / f"python{minor}" / "site-packages"
    host = _host_sysconfigdata_name()
    name = f"_sysconfigdata_rehearsal_{target.subdir.replace('-', '_')}"
    updates = {
        "SOABI": target.soabi(nodot),
        "EXT_SUFFIX": target.ext_suffix(nodot),
        "MULTIARCH": target.soabi_tail,
        "HOST_GNU_TYPE": target.triplet,
        "MACHDEP": "darwin" if target.macos else "win32" if target.windows else "linux",
    }
    atomic_file.write_text(
        site / f"{name}.py",
        _SYSCONFIGDATA.format(version=minor, subdir=target.subdir, host=host, updates=updates),
    )
    atomic_file.write_text(
        site / "_rehearsal_target.py",
        _STARTUP.format(
            subdir=target.subdir,
            sysconfigdata=name,
            platform=target.platform,
            suffix=target.ext_suffix(nodot),
            macos=target.macos,
        ),
    )
    atomic_file.write_text(site / "_rehearsal_target.pth", "import _rehearsal_target\n")
    # compiled now, so the bytecode is part of the prefix before a build script runs, never a new file
    # that conda-build would package
    # (compileall writes them even where PYTHONDONTWRITEBYTECODE is set; build scripts do not inherit it)
    sources = [str(site / f"{name}.py"), str(site / "_rehearsal_target.py")]
    subprocess.run([str(venv / "bin" / "python"), "-m", "compileall", "-q", *sources], check=True)


def _host_sysconfigdata_name() -> str:
    # the same for every CPython build of this machine (checked for 3.10-3.13)
    return sysconfig._get_sysconfigdata_name()


def replace_interpreter(prefix: Path, minor: str, content: bytes | str) -> None:
    """Replace ``bin/python``, ``python3``, ``python3.X`` of a prefix by one file (foreign binary or shim)."""
    for name in ("python", "python3", f"python{minor}"):
        path = prefix / "bin" / name
        if path.is_symlink() or path.exists():
            path.unlink()
        if isinstance(content, bytes):
            atomic_file.write_bytes(path, content, mode=0o755)
        else:
            atomic_file.write_text(path, content, mode=0o755)


def cross_python_shim(build_venv: Path) -> str:
    """cross-python's ``$PREFIX/bin/python``: runs the build-machine interpreter of ``$BUILD_PREFIX/venv``."""
    interpreter = shlex.quote(str(build_venv / "bin" / "python"))
    return f'#!/bin/sh\n# rehearsal: cross-python\'s shim\nexec {interpreter} "$@"\n'


_COMPILER = """\
#!/bin/bash
# rehearsal: this machine's {real} playing conda-forge's {name} (feedstock_tools/proofs/rehearsal/target.py).
# Flags only Apple's toolchain knows are dropped; -dead_strip_dylibs, whose real harm (MKL's dylibs
# dropped, an import failure on osx-64) cannot show here, is refused: the driver must have removed it.
args=()
for arg in "$@"; do
  case "$arg" in
    *dead_strip_dylibs*) echo "rehearsal: $arg reached {name}: the driver must strip it" >&2; exit 1 ;;
    {dropped}) ;;
    *) args+=("$arg") ;;
  esac
done
exec {real} "${{args[@]}}"
"""


def write_darwin_toolchain(build_prefix: Path, target: Target, dropped_flags: tuple[str, ...]) -> Path:
    """``<triplet>-clang``/``-clang++`` stand-ins in ``build_prefix/bin`` and the CMake rules override that
    names shared libraries ``.dylib``; returns the override's path."""
    import shutil

    patterns = "|".join(f"{flag}*" if flag.endswith("=") else flag for flag in dropped_flags)
    for name, real in ((f"{target.triplet}-clang", "gcc"), (f"{target.triplet}-clang++", "g++")):
        path = build_prefix / "bin" / name
        compiler = _COMPILER.format(real=shlex.quote(shutil.which(real) or real), name=name, dropped=patterns)
        atomic_file.write_text(path, compiler, mode=0o755)
    override = build_prefix / "share" / "rehearsal" / "darwin-naming.cmake"
    override.parent.mkdir(parents=True, exist_ok=True)
    atomic_file.write_text(override, DARWIN_NAMING)
    return override


_PYTHON_CONFIG = """\
#!/bin/sh
# rehearsal: the target Python package's python{minor}-config
# (feedstock_tools/proofs/rehearsal/target.py): this machine's CPython's, with the target's extension suffix.
if [ "$1" = "--extension-suffix" ]; then echo "{suffix}"; exit 0; fi
exec {real} "$@"
"""


def write_python_config(prefix: Path, minor: str, target: Target, interpreter: Path) -> None:
    """``bin/python3.X-config`` of the host prefix, which CPython installs and conda's python package
    ships: CMake's FindPython finds the Development component through it, below Python_ROOT_DIR, when
    it is cross-compiling (CMake's FindPython/Support.cmake: ``NOT Interpreter_FOUND OR CMAKE_CROSSCOMPILING``
    selects the config tool)."""
    real = interpreter.parent / f"python{minor}-config"
    path = prefix / "bin" / f"python{minor}-config"
    config = _PYTHON_CONFIG.format(
        minor=minor, suffix=target.ext_suffix(minor.replace(".", "")), real=shlex.quote(str(real))
    )
    atomic_file.write_text(path, config, mode=0o755)


def write_windows_naming(build_prefix: Path) -> Path:
    """The CMake rules override of a simulated win-64 target (:data:`WINDOWS_NAMING`); returns its path."""
    override = build_prefix / "share" / "rehearsal" / "windows-naming.cmake"
    override.parent.mkdir(parents=True, exist_ok=True)
    atomic_file.write_text(override, WINDOWS_NAMING)
    return override


# An empty ar archive: MSVC's import libraries (python312.lib among them) are ar archives too.
EMPTY_IMPORT_LIBRARY = b"!<arch>\n"


def make_windows_python_layout(prefix: Path, minor: str) -> None:
    """conda's Windows python in ``prefix``: the interpreter at ``python.exe`` (here a script running the
    venv's bin/python, which is what sys.executable then reports: a symlink would lose the venv) and
    ``libs/python3XY.lib``, which FindPython links on Windows and the driver's retarget requires."""
    exe = prefix / "python.exe"
    script = "#!/bin/sh\n# rehearsal: conda's %PREFIX%\\python.exe on win-64\n"
    atomic_file.write_text(exe, script + 'exec "$(dirname "$0")/bin/python" "$@"\n', mode=0o755)
    (prefix / "libs").mkdir(exist_ok=True)
    atomic_file.write_bytes(prefix / "libs" / f"python{minor.replace('.', '')}.lib", EMPTY_IMPORT_LIBRARY)
