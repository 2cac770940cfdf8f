"""The harness: plays conda-build's part for one configuration and runs the recipe's real build.sh.

Each behaviour follows conda-build 26.7.1 (the file and lines are named where the harness plays it; the
real conda-build's run of this recipe is docs/reference/real-build.md, "The real conda-build"). For every step
(top-level ``libtorch-split``, then each output in conda-build's order, plan.conda_build_order) it
recreates the host prefix at the same ``PREFIX`` path and copies into it the files the top-level build
added to its own, exports the environment conda-build gives a build script, runs ``bash recipe/build.sh``
in ``SRC_DIR`` (the stand-in's copy, which persists across steps like conda-build's work directory), and
keeps the files the script added to ``PREFIX`` as the step's package under ``<work>/packages/<label>/``
(with ``info/files`` listing them, as in a conda package).
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from feedstock_tools.common import cache_store, full_device, interruption, user_cache
from feedstock_tools.common.configuration import Configuration, read_configuration, version_key
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.common.run_lock import RunLock
from feedstock_tools.conda.script_env import script_environment
from feedstock_tools.proofs.rehearsal import ninja_log, prefixes, relocation, standins
from feedstock_tools.proofs.rehearsal import target as targets
from feedstock_tools.proofs.rehearsal.activation import (
    DARWIN_ONLY_FLAGS,
    clang_activation,
    compiler_activation,
)
from feedstock_tools.proofs.rehearsal.plan import (
    PYTORCH,
    TOP_LEVEL_NAME,
    Step,
    conda_build_order,
    plan_steps,
    work_name,
)
from feedstock_tools.proofs.rehearsal.solver_pick import solver_pick
from megabuild import atomic_file, compiler_cache

DEFAULT_RECIPE_DIR = REPO_ROOT / "recipe"
DEFAULT_STANDIN = REPO_ROOT / "tests" / "upstream_standin"
DEFAULT_WORK_ROOT = REPO_ROOT / ".rehearsal"
# conda-build gives a build script a fresh environment: its own variables plus a few inherited ones
# (conda-build's docs, "Environment variables"), and what the recipe's build/script_env gives it.
INHERITED = ("HOME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR", "USER", "SHELL", "MAKEFLAGS",
             "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy")  # fmt: skip
# The build tools conda would install into BUILD_PREFIX; the rehearsal finds them on the caller's PATH.
BUILD_TOOLS = ("cmake", "ninja", "ccache", "gcc", "g++", "ar", "readelf", "patchelf")
SYSTEM_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")

Progress = Callable[[str], None]


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def reversed_variants(steps: list[Step]) -> list[Step]:
    """The same steps with the variants of every output name in reverse order, names keeping their place
    in their group, and the groups of a configuration of several BLAS in reverse order."""
    groups: list[list[Step]] = []
    for step in steps:
        if step.name == TOP_LEVEL_NAME or not groups:
            groups.append([])
        groups[-1].append(step)
    reordered_steps: list[Step] = []
    for group in reversed(groups):
        by_name: dict[str, list[Step]] = {}
        for step in group:
            by_name.setdefault(step.name, []).append(step)
        reordered = {name: list(reversed(variants)) for name, variants in by_name.items()}
        reordered_steps += [reordered[step.name].pop(0) for step in group]
    return reordered_steps


def tool_dirs() -> list[str]:
    """After the prefixes on PATH: the directories of the build tools, then the system directories."""
    found = (shutil.which(tool) for tool in BUILD_TOOLS)
    dirs = [str(Path(path).parent) for path in found if path]
    return list(dict.fromkeys([*dirs, *SYSTEM_DIRS]))


def local_subdir() -> str:
    """conda's name for this machine's platform (build_platform)."""
    system = {"Linux": "linux", "Darwin": "osx"}.get(platform.system(), platform.system().lower())
    machine = {"x86_64": "64", "AMD64": "64", "aarch64": "aarch64", "arm64": "arm64"}.get(platform.machine())
    return f"{system}-{machine or platform.machine()}"


def brought_libraries(step: Step) -> list[prefixes.StandinLibrary]:
    """The stand-in's libraries a package brings: one built against a -devel package gets its run-time
    library (run_exports: libmagma, mkl), or one asks for it at run time."""
    names = {*step.host_names(), *step.run_names()}
    return [library for library in prefixes.STANDIN_LIBRARIES if names & set(library.names)]


def _ignore_build_products(standin: Path) -> Callable[[str, list[str]], set[str]]:
    """copytree filter: leave out what an earlier build of the stand-in left in its own directory."""
    products = {
        standin: {"build"},
        standin / "torch": {"include", "share", "bin", "version.py"},
        # a configure writes it into the source tree (CMakeLists.txt, as upstream's ATen/Config.h)
        standin / "aten" / "src" / "ATen": {"Config.h"},
    }

    def ignore(directory: str, names: list[str]) -> set[str]:
        here = Path(directory)
        ignored = {name for name in names if name in products.get(here, set()) or name == "__pycache__"}
        if here == standin / "torch" / "lib":
            ignored |= {name for name in names if ".so" in name}
        return ignored

    return ignore


@dataclass
class StepResult:
    step: Step
    returncode: int
    seconds: float
    new_files: list[str]
    objects: list[str]
    log: Path
    package_dir: Path | None = None
    # Files of the host prefix (installed before the script ran) that the script changed: conda-build
    # packages new files only, so such changes are silently lost.
    modified_host_files: list[str] = field(default_factory=list)
    # user + system time of the script and everything it waited for: a figure the machine's load
    # does not inflate, unlike ``seconds``
    cpu_seconds: float = 0.0
    # build/megabuild-report.json as the driver left it after this step (None if it wrote none)
    driver_report: dict | None = None
    # how many of ``objects`` the compiler compiled (ccache's misses, from its stats log of the step); None
    # where the driver compiles without a cache (a Windows target): every object ninja ran was compiled
    compiled: int | None = None

    @property
    def compiles(self) -> int:
        """Real compiles of the step: the cache's misses, else every object ninja ran."""
        return len(self.objects) if self.compiled is None else self.compiled

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def last_line(self) -> str:
        lines = [line for line in self.log.read_text(errors="replace").splitlines() if line.strip()]
        return lines[-1] if lines else ""


@dataclass
class Rehearsal:
    """One configuration's rehearsal; ``run()`` does everything, tests may drive the steps one by one."""

    config_path: Path
    work_root: Path = DEFAULT_WORK_ROOT
    recipe_dir: Path = DEFAULT_RECIPE_DIR
    # a stand-in directory, or one of standins.STANDINS by name; None: the one the recipe's host requirements
    # call for (scikit-build-core among them: the 2.15-shaped stand-in, else the 2.13-shaped one)
    standin: Path | str | None = None
    progress: Progress = print
    verbose: bool = False
    # The order of one output's variants, which conda-build leaves to string hashing (plan.conda_build_order):
    # a permutation of this seed's, or None for the render's (ascending Python, magma first). The default puts
    # pass 1's Python after the others among the pytorch outputs (conda-build 26.7.1 with PYTHONHASHSEED 0
    # built 3.10 after 3.12 and 3.13).
    variant_seed: int | None = 0
    # Then reverse the variants of each output: the passes must not depend on the order conda-build picks.
    reverse_variants: bool = False
    # Give every output a fresh copy of the work directory as it was after the top-level build (what
    # conda-build's documentation describes) instead of the shared one (what its code does).
    fresh_work_dir: bool = False
    # venv templates and the built libmagma; kept between runs (default: the per-user rehearsal cache,
    # common/user_cache.py)
    cache_root: Path | None = None
    # only the pytorch outputs of these Pythons ("3.12"), or None: every Python of the configuration this
    # machine has. Two (pass 1's and another) show every kind of pass in a shorter rehearsal.
    pythons: frozenset[str] | None = None
    # the configuration at config_path when the caller has read it already (default: read here)
    configuration: Configuration | None = None
    steps: list[Step] = field(init=False)
    target: targets.Target = field(init=False)
    skipped: list[Step] = field(init=False, default_factory=list)  # no interpreter on this machine
    left_out: list[Step] = field(init=False, default_factory=list)  # a Python not among ``pythons``
    results: list[StepResult] = field(init=False, default_factory=list)
    # every .ninja_log entry of every snapshot so far (ninja_log.objects_between)
    ninja_entries_seen: set = field(init=False, default_factory=set)
    remover: prefixes.BackgroundRemover = field(init=False)
    # the cache entries whose files are hard-linked into this rehearsal's prefixes (prefixes.py: checked
    # after every step)
    linked_entries: set[Path] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        self.remover = prefixes.BackgroundRemover(self.work_root / ".trash")

        if not self.config_path.is_file():
            raise ToolError(f"no configuration file {self.config_path}; list them with 'rehearse --list'")
        if not (self.recipe_dir / "build.sh").is_file():
            raise ToolError(
                f"{self.recipe_dir}/build.sh is missing; the rehearsal runs the recipe's build.sh"
            )
        if self.configuration is None:
            self.configuration = read_configuration(self.config_path)
        steps = plan_steps(self.configuration, self.recipe_dir)
        self.standin = standins.resolve(self.standin, (n for s in steps for n in s.host_names()))
        if local_subdir() != targets.NATIVE:
            raise ToolError(
                f"the rehearsal simulates every target on {targets.NATIVE}; this machine is {local_subdir()}"
            )
        self.target = targets.target_for(self.configuration.target_platform, self.recipe_dir.parent)
        if self.pythons is not None:
            offered = {step.python for step in steps if step.name == PYTORCH}
            unknown = sorted(self.pythons - offered)
            if unknown:
                raise ToolError(
                    f"Python {', '.join(unknown)} has no pytorch output in {self.config_path.name} (it has "
                    f"{', '.join(sorted(offered, key=version_key))}): pick among those"
                )
            self.left_out = [s for s in steps if s.name == PYTORCH and s.python not in self.pythons]
            steps = [s for s in steps if s not in self.left_out]
        self.steps = conda_build_order(steps, self.variant_seed, cross=self.target.cross)
        if self.reverse_variants:
            self.steps = reversed_variants(self.steps)

    # ---- layout ------------------------------------------------------------------------------------------
    @cached_property
    def name(self) -> str:
        return work_name(self.configuration)  # read in __post_init__

    @property
    def dir(self) -> Path:
        return self.work_root / self.name

    @cached_property
    def lock(self) -> RunLock:
        return RunLock(self.work_root / f".{self.name}.lock", f"rehearsal work directory {self.dir}")

    @property
    def src_dir(self) -> Path:
        return self.dir / "work"

    @property
    def prefix(self) -> Path:
        return self.dir / "h_env"

    @property
    def build_prefix(self) -> Path:
        return self.dir / "build_env"

    @property
    def packages_dir(self) -> Path:
        return self.dir / "packages"

    @property
    def logs_dir(self) -> Path:
        return self.dir / "logs"

    @property
    def cache_dir(self) -> Path:
        return self.cache_root if self.cache_root is not None else user_cache.rehearsal_cache()

    @property
    def setup_log(self) -> Path:
        return self.logs_dir / "00-setup.log"

    @property
    def pass1_python(self) -> str:
        return self.steps[0].python

    @cached_property
    def standin_tree(self) -> standins.Standin:
        assert isinstance(self.standin, Path)
        return standins.Standin.load(self.standin)

    def host_pip_requirements(self, step: Step) -> tuple[str, ...]:
        """The step's host Python packages, plus what the stand-in's build backend needs that the recipe's
        host list does not name (scikit-build-core for the 2.15-shaped stand-in under a 2.13 recipe)."""
        return standins.with_backend_requirements(prefixes.pip_requirements(step.host), self.standin_tree)

    # ---- preparation -------------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Fresh work directory: the stand-in as SRC_DIR, BUILD_PREFIX, venv templates for every Python.

        Locks the work directory first (held until the process ends): a second rehearsal of the same
        configuration in the same --work-dir would delete this one's tree mid-build."""
        self.lock.acquire()
        self.remover.discard(self.dir)
        self.logs_dir.mkdir(parents=True)
        self.packages_dir.mkdir()
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.standin_tree.copy_to(self.src_dir, ignore=_ignore_build_products(self.standin_tree.sources))
        self.link_entry(prefixes.build_prefix_template(self.cache_dir, self.setup_log), self.build_prefix)
        if self.target.macos:
            targets.write_darwin_toolchain(self.build_prefix, self.target, DARWIN_ONLY_FLAGS)
        if self.target.windows:
            targets.write_windows_naming(self.build_prefix)
        available: list[Step] = []
        for step in self.steps:
            if prefixes.find_interpreter(step.python) is None:
                if step.name == TOP_LEVEL_NAME:
                    raise ToolError(f"pass 1 needs CPython {step.python} (python_min); install it with pyenv")
                self.skipped.append(step)
                continue
            available.append(step)
        self.steps = available
        for minor, packages in sorted(
            {(s.python, self.host_pip_requirements(s)) for s in self.steps if "python" in s.host_names()}
        ):
            self.progress(f"   host Python {minor}: venv template with {', '.join(packages) or 'pip only'}")
            prefixes.venv_template(self.cache_dir, minor, self.setup_log, packages, self.progress)
        for library in prefixes.STANDIN_LIBRARIES:
            if any(set(step.host_names()) & set(library.names) for step in self.steps):
                prefixes.library_install(self.standin_tree.sources, library, self.cache_dir, self.setup_log)

    # ---- one step ----------------------------------------------------------------------------------------
    def environment(self, step: Step) -> dict[str, str]:
        """What conda-build exports to a build script (conda_build/environ.py 350-385 ``get_dict``, the
        functions it calls cited per line below), with the compiler packages' activation."""
        env = {key: os.environ[key] for key in INHERITED if key in os.environ}
        env.update(script_environment(step.script_env, os.environ))
        # the compiler cache where conda-build's job keeps it without the variable (beside the work
        # directory, in this rehearsal's directory): a caller's cache would mix other runs into its counts
        env.pop(compiler_cache.LOCATION_VARIABLE, None)
        build_subdir = self.target.build_subdir
        target_subdir = self.target.subdir
        py = step.python
        stdlib = self.stdlib_dir(py)
        env.update(
            {
                # conda_build_vars, environ.py 388-419
                "CONDA_BUILD": "1",
                "PREFIX": str(self.prefix),
                "BUILD_PREFIX": str(self.build_prefix),
                "SRC_DIR": str(self.src_dir),
                "SUBDIR": target_subdir,
                "ARCH": target_subdir.split("-")[1],
                "build_platform": build_subdir,
                # meta_vars, environ.py 595-604 (the build string and hash of a finalized output)
                "PKG_NAME": step.name,
                "PKG_VERSION": step.version,
                "PKG_BUILDNUM": str(step.build_number),
                "PKG_BUILD_STRING": step.build_string or "placeholder",
                "PKG_HASH": "h0rehearsal",
                "RECIPE_DIR": str(self.recipe_dir),
                # python_vars, environ.py 422-451: PY_VER is the variant's Python (get_py_ver, 95-99), SP_DIR
                # and STDLIB_DIR the first lib/python?.* of the host prefix (utils.py 995-1010), PYTHON the
                # host prefix's, set because python is a build requirement of every scripted output
                "PYTHON": str(self.prefix / "bin" / "python"),
                "PY_VER": py,
                "CONDA_PY": py.replace(".", ""),
                "PY3K": "1",
                "SP_DIR": str(stdlib / "site-packages"),
                "STDLIB_DIR": str(stdlib),
                # os_vars, environ.py 792-813 (CPU_COUNT: 608-621), unix_vars 697-701
                "CPU_COUNT": str(os.cpu_count() or 1),
                "SHLIB_EXT": self.target.shlib_ext,
                "CMAKE_GENERATOR": "Unix Makefiles",
                "target_platform": target_subdir,
                "PATH": os.pathsep.join(
                    [str(self.prefix / "bin"), str(self.build_prefix / "bin"), *tool_dirs()]
                ),
            }
        )
        if step.name != TOP_LEVEL_NAME:
            # an output's script (build.py 1774-1778): TOP_PKG_NAME and TOP_PKG_VERSION are taken from the
            # output's own environment, so they name the output itself, not the top-level recipe (measured:
            # TOP_PKG_NAME=libtorch); the top-level build has neither (build.py 2364-2366)
            env |= {"TOP_PKG_NAME": step.name, "TOP_PKG_VERSION": step.version}
        # every variant key, as get_dict exports them (environ.py 381-384)
        for key, value in step.variant.items():
            if isinstance(value, str):
                env[key] = value
        if self.target.cross:
            # the compiler activations' flag (ctng 52080ff, clang 9fc6346 activate-*.sh)
            env["CONDA_BUILD_CROSS_COMPILATION"] = "1"
        common = {
            "prefix": self.prefix,
            "build_prefix": self.build_prefix,
            "src_dir": self.src_dir,
            "pkg_name": step.name,
            "pkg_version": step.version,
            "target_platform": target_subdir,
            "build_platform": build_subdir,
        }
        if self.target.macos:
            env.update(
                clang_activation(
                    **common,
                    deployment_target=step.variant.get("MACOSX_DEPLOYMENT_TARGET", "12.0"),
                    triplet=self.target.triplet,
                    build_triplet=targets.TARGETS[build_subdir].triplet,
                    rules_override=self.build_prefix / "share" / "rehearsal" / "darwin-naming.cmake",
                )
            )
        else:
            env.update(compiler_activation(**common))
        if self.target.windows:
            env.update(self.windows_variables(env.get("CMAKE_ARGS", "")))
        return env

    def stdlib_dir(self, python: str) -> Path:
        """conda-build's STDLIB_DIR (SP_DIR is its site-packages): the first non-link ``lib/python?.*`` of
        the host prefix, sorted, whatever the output's Python, else ``lib/python<PY_VER>``
        (conda_build/utils.py 995-1006 ``get_stdlib_dir``). conda-build's Windows ``Lib`` is not played: the
        simulated win-64 host Python is a venv of this machine's (target.py), whose site-packages is there."""
        found = sorted(p for p in self.prefix.glob("lib/python?.*") if not p.is_symlink())
        return found[0] if found else self.prefix / "lib" / f"python{python}"

    def windows_variables(self, cmake_args: str) -> dict[str, str]:
        """What conda-build adds on Windows (environ.py windows_vars, python_vars; windows.py writes
        CMAKE_GENERATOR), and the naming override of the simulated target (target.py)."""
        library = self.prefix / "Library"
        override = self.build_prefix / "share" / "rehearsal" / "windows-naming.cmake"
        return {
            "LIBRARY_PREFIX": str(library),
            "LIBRARY_BIN": str(library / "bin"),
            "LIBRARY_INC": str(library / "include"),
            "LIBRARY_LIB": str(library / "lib"),
            "SCRIPTS": str(self.prefix / "Scripts"),
            "PYTHON": str(self.prefix / "python.exe"),
            "CMAKE_GENERATOR": "Visual Studio 17 2022",
            "CMAKE_ARGS": f"{cmake_args} -DCMAKE_USER_MAKE_RULES_OVERRIDE={override}".strip(),
        }

    def provision_host(self, step: Step) -> None:
        """Recreate PREFIX with what the step's host requirements would install."""
        self.remover.discard(self.prefix)
        names = step.host_names()
        if "python" in names:
            template = prefixes.venv_template(
                self.cache_dir, step.python, self.setup_log, self.host_pip_requirements(step)
            )
            self.link_entry(template, self.prefix)
            self.target_python(step, template)
        else:
            self.prefix.mkdir(parents=True)
        (self.prefix / "conda-meta").mkdir(exist_ok=True)
        libraries = [library for library in prefixes.STANDIN_LIBRARIES if set(names) & set(library.names)]
        built = {result.step.name for result in self.packaged()}
        for installed in self.solver_installs([spec for spec in step.host if spec.split()[0] in built]):
            self.install_package(installed, self.prefix)
            libraries += brought_libraries(installed.step)
        for library in dict.fromkeys(libraries):
            self.install_library(library, self.prefix)
        self.write_package_record(step)
        if step.name != TOP_LEVEL_NAME:
            self.restore_pass1_host_files()

    def link_entry(self, entry: Path, destination: Path) -> None:
        """``destination`` made of hard links to the cache entry ``entry`` (prefixes.py says why links)."""
        prefixes.link_tree(entry, destination)
        self.linked_entries.add(entry)

    def check_linked_entries(self, step: Step) -> None:
        """After a step that changed host files: one written in place was written into the cache entry it is
        linked to, which is then removed at once (its next use would find it changed and make it again
        anyway); the changed files are the step's problem line (report.py)."""
        for entry in sorted(self.linked_entries):
            problem = cache_store.check(entry, digests=False)
            if problem is not None and problem != "absent":
                cache_store.remove_entry(entry.parent, entry)
                self.progress(f"      cache: {step.label} changed {entry.name} ({problem}): removed it")

    def write_package_record(self, step: Step) -> None:
        """What an installer leaves in ``conda-meta/``: a record listing the files it installed (conda's and
        rattler's records have ``files``; the driver judges the host prefix by them, host_prefix.py). One
        record for everything the step's host requirements brought."""
        installed = sorted(f for f in prefixes.prefix_files(self.prefix) if not f.startswith("conda-meta/"))
        record = {"name": f"rehearsal-host-of-{step.label}", "version": "0", "build": "0", "files": installed}
        atomic_file.write_text(
            self.prefix / "conda-meta" / f"{record['name']}-0-0.json", json.dumps(record) + "\n"
        )

    def restore_pass1_host_files(self) -> None:
        """conda-build backs up the files the top-level build added to the host prefix (build.py 2640-2648)
        and copies them into every output's host prefix after creating it (build.py 2788-2796); they are
        there before the output's script runs, so they are not the output's files (build.py 1774,
        ``initial_files``)."""
        top = next((r for r in reversed(self.results) if r.step.name == TOP_LEVEL_NAME), None)
        if top is None or not top.new_files:
            return
        prefixes.install_files(self.pass1_host_backup, top.new_files, self.prefix)

    @property
    def pass1_host_backup(self) -> Path:
        return self.dir / "pass1-host-files"

    def target_python(self, step: Step, template: Path) -> None:
        """The host prefix's Python as the target's (target.py): on a cross build a binary this machine
        cannot run, replaced by cross-python's shim when the step's build requirements have cross-python."""
        if self.target.subdir == targets.NATIVE:
            return
        targets.make_target_interpreter(self.prefix, step.python, self.target)
        if self.target.windows:
            targets.make_windows_python_layout(self.prefix, step.python)
        if not self.target.cross:
            return
        targets.replace_interpreter(self.prefix, step.python, self.target.foreign_header)
        interpreter = prefixes.find_interpreter(step.python)
        assert interpreter is not None  # prepare() skipped the steps without one
        targets.write_python_config(self.prefix, step.python, self.target, interpreter)
        if f"cross-python_{self.target.subdir}" in step.build_names():
            build_venv = self.build_prefix / "venv"
            self.remover.discard(build_venv)
            self.link_entry(template, build_venv)
            targets.make_target_interpreter(build_venv, step.python, self.target)
            targets.replace_interpreter(self.prefix, step.python, targets.cross_python_shim(build_venv))

    def packaged(self) -> list[StepResult]:
        return [r for r in self.results if r.ok and r.package_dir is not None]

    def solver_installs(self, specs: list[str]) -> list[StepResult]:
        """The rehearsed packages conda's solver installs for ``specs`` (with their sibling dependencies)."""
        scratch = self.dir / "solver-channel"
        return solver_pick(self.packaged(), specs, self.target.subdir, self.steps[0].variant, scratch)

    def install_package(self, result: StepResult, destination: Path) -> None:
        assert result.package_dir is not None
        prefixes.install_files(result.package_dir, result.new_files, destination)

    def install_library(self, library: prefixes.StandinLibrary, destination: Path) -> None:
        built = prefixes.library_install(self.standin_tree.sources, library, self.cache_dir, self.setup_log)
        files = sorted(prefixes.prefix_files(built))
        if not self.target.windows:
            prefixes.install_files(built, files, destination)
            return
        # conda's Windows libraries: below %LIBRARY_PREFIX%, the library where the linker finds it (lib/, the
        # import library's place) and where the loader does (bin/, the DLL's)
        root = destination / "Library"
        prefixes.install_files(built, files, root)
        prefixes.install_files(built / "lib", [f.removeprefix("lib/") for f in files if f.startswith("lib/")],
                               root / "bin")  # fmt: skip

    def run_step(self, step: Step) -> StepResult:
        index = len(self.results)
        log = self.logs_dir / f"{index + 1:02d}-{step.label}.log"
        if not step.has_script:
            atomic_file.write_text(log, f"{step.label}: no script (metapackage): an empty package\n")
            result = StepResult(step, 0, 0.0, [], [], log, self._write_package(step, []))
            self.results.append(result)
            return result
        if step.name == TOP_LEVEL_NAME and self.results:
            self.fresh_source()
        if self.fresh_work_dir and step.name != TOP_LEVEL_NAME:
            self.restore_work_dir()
        self.provision_host(step)
        before = prefixes.prefix_files(self.prefix)
        states = prefixes.file_states(self.prefix, before)
        ninja_log_path = self.src_dir / "build" / ".ninja_log"
        log_before = ninja_log.snapshot(ninja_log_path)
        started = time.monotonic()
        cpu_before = _children_cpu_seconds()
        returncode = self._run_build_script(step, log)
        seconds = time.monotonic() - started
        cpu_seconds = _children_cpu_seconds() - cpu_before
        new_files = sorted(prefixes.prefix_files(self.prefix) - before)
        log_after = ninja_log.snapshot(ninja_log_path)
        objects = ninja_log.objects_between(log_before, log_after, self.ninja_entries_seen)
        self.ninja_entries_seen.update([*log_before.values(), *log_after.values()])
        still_there = {
            rel for rel in before if (self.prefix / rel).exists() or (self.prefix / rel).is_symlink()
        }
        modified = sorted(
            rel
            for rel, state in prefixes.file_states(self.prefix, still_there).items()
            if state != states[rel]
        )
        modified += sorted(before - still_there)
        if modified:
            self.check_linked_entries(step)
        result = StepResult(
            step,
            returncode,
            seconds,
            new_files,
            objects,
            log,
            modified_host_files=modified,
            cpu_seconds=cpu_seconds,
            compiled=self.compiled_by_cache(objects) if returncode == 0 else None,
        )
        result.driver_report = _read_json(self.src_dir / "build" / "megabuild-report.json")
        if result.ok and step.name == TOP_LEVEL_NAME:
            self.remover.discard(self.pass1_host_backup)
            prefixes.install_files(self.prefix, new_files, self.pass1_host_backup)
            if self.fresh_work_dir:
                self.stash_work_dir()
        if result.ok and step.name != TOP_LEVEL_NAME:
            relocation.relocate(self.prefix, new_files)
            result.package_dir = self._write_package(step, new_files)
        self.results.append(result)
        return result

    @property
    def work_stash(self) -> Path:
        return self.dir / "work-after-pass1"

    def stash_work_dir(self) -> None:
        """Keep the work directory as the top-level build left it (real copies: builds rewrite files)."""
        self.remover.discard(self.work_stash)
        shutil.copytree(self.src_dir, self.work_stash, symlinks=True)

    def fresh_source(self) -> None:
        """The next top-level build (another BLAS of the job) in a fresh work directory at the same path:
        conda-build 26.7.1 renames ``work`` to ``work_moved_*`` and unpacks the source again there,
        rattler-build 0.73.0 starts every staging in a fresh one (both measured); the compiler cache beside
        it stays."""
        self.remover.discard(self.src_dir)
        self.standin_tree.copy_to(self.src_dir, ignore=_ignore_build_products(self.standin_tree.sources))

    @property
    def compiler_cache_root(self) -> Path:
        """Where the driver keeps this rehearsal's compiler cache (``$SRC_DIR/..``, as under conda-build)."""
        return self.dir / compiler_cache.FALLBACK_NAME

    def compiled_by_cache(self, objects: list[str]) -> int | None:
        """How many of a step's ``objects`` (what ninja ran) ccache compiled rather than served, by the stats
        log ccache wrote for the step's pass (the compiles of CMake's own probes, not ninja's, are not
        counted); None where the driver keeps no cache (a Windows target)."""
        keyed = sorted(path for path in self.compiler_cache_root.glob("*") if path.is_dir())
        if not keyed:
            return None
        if len(keyed) > 1:
            raise ToolError(
                f"{self.compiler_cache_root} holds {len(keyed)} caches; a rehearsal's driver keeps one"
            )
        if not objects:
            return 0
        logged = compiler_cache.read_stats_log(keyed[0] / compiler_cache.STATS_LOG_NAME)
        sources = compiler_cache.compile_sources(self.src_dir / "build", os.environ)
        return len(objects) - len(compiler_cache.served_from_cache(objects, logged, sources))

    def restore_work_dir(self) -> None:
        """A fresh copy of the stashed work directory at the same path (mtimes kept, so Ninja sees pass 1)."""
        if not self.work_stash.exists():
            raise ToolError("no stash of the work directory: run the top-level build first")
        self.remover.discard(self.src_dir)
        shutil.copytree(self.work_stash, self.src_dir, symlinks=True)

    def _run_build_script(self, step: Step, log: Path) -> int:
        command = ["bash", "-o", "errexit", str(self.recipe_dir / "build.sh")]
        env = self.environment(step)
        if self.target.windows:
            # what recipe/bld.bat runs: %BUILD_PREFIX%\python.exe -m megabuild, RECIPE_DIR on PYTHONPATH
            command = [str(self.build_prefix / "bin" / "python"), "-m", "megabuild"]
            env["PYTHONPATH"] = str(self.recipe_dir)
        # A process group of its own (as conda-build's script has none of our terminal): a signal to this
        # tool is forwarded to the whole script, which stops its own build in turn. A rerun's log starts
        # empty; the script writes into it, its last words (the driver's error line) included.
        return interruption.run_child(
            command,
            self.src_dir,
            env,
            log=log,
            on_line=(lambda line: self.progress(f"      | {line}")) if self.verbose else None,
            grace=interruption.GRACE_SECONDS,
        )

    def _write_package(self, step: Step, files: list[str]) -> Path:
        package_dir = self.packages_dir / step.label
        shutil.rmtree(package_dir, ignore_errors=True)
        package_dir.mkdir(parents=True)
        prefixes.install_files(self.prefix, files, package_dir)
        (package_dir / "info").mkdir(exist_ok=True)
        atomic_file.write_text(package_dir / "info" / "files", "".join(f"{path}\n" for path in files))
        atomic_file.write_text(
            package_dir / "info" / "index.json",
            json.dumps(
                {
                    "name": step.name,
                    "version": step.version,
                    "build": step.build_string,
                    "build_number": step.build_number,
                    "variant": dict(step.variant),
                },
                indent=2,
            )
            + "\n",
        )
        return package_dir

    # ---- everything --------------------------------------------------------------------------------------
    def run(self) -> list[StepResult]:
        """All steps in order; stops at the first failing build script with a one-line ToolError."""
        total = len(self.steps)
        for number, step in enumerate(self.steps, start=1):
            self.progress(f"[{number}/{total}] {step.label} (PKG_NAME={step.name}) ...")
            result = self.run_step(step)
            status = "ok" if result.ok else f"FAILED (exit {result.returncode})"
            self.progress(
                f"      {status} in {result.seconds:.1f} s: {result.compiles} of {len(result.objects)} "
                "objects compiled (the rest served by the compiler cache), "
                f"{len(result.new_files)} files into PREFIX"
            )
            if not result.ok:
                tail = result.log.read_text(errors="replace").splitlines()[-25:]
                for line in tail:
                    self.progress("      | " + line)
                script = f"recipe/{'bld.bat' if self.target.windows else 'build.sh'}"
                if full_device.log_says_full(result.log):
                    raise ToolError(
                        full_device.full_log_line(f"{step.label}: {script}", result.log, self.work_root)
                    )
                raise ToolError(
                    f"{step.label}: {script} failed with exit {result.returncode} "
                    f"({result.last_line()!r}); full log: {result.log}"
                )
        return self.results
