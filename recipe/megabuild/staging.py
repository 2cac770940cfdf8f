"""Stage one package's files into $PREFIX from the upstream trees, by the table in package_files.py.

Staging is all or nothing: the package is assembled in a temporary directory beside $PREFIX (same file
system), checked against what $PREFIX already holds, and only then moved in, file by file with renames. A
failure before the move leaves $PREFIX untouched; a failure during the move takes back what was moved;
signals wait until the move is complete; a journal written before the move lets the next staging into the
same $PREFIX take back the files of a run killed outright (SIGKILL, power loss), and assembly directories
such a run left beside $PREFIX are removed then too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from megabuild.atomic_file import write_text
from megabuild.errors import MegabuildError, os_error_line
from megabuild.interrupt import checkpoint, no_interruption, pending
from megabuild.log import say
from megabuild.package_files import NOT_SHIPPED, PACKAGES, Rule, Tree, rules_for

try:  # Unix only (Python docs: fcntl "Availability: Unix"); Windows locks with msvcrt
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

# Directories of the install prefix <SRC_DIR>/torch that CMake's install step fills.
INSTALL_TREE_DIRS = ("lib", "include", "share", "bin")
# The placeholder of package_files.py's library patterns, and conda-build's SHLIB_EXT per platform
# (conda_build/environ.py get_shlib_ext: ".so" on linux, ".dylib" on osx, ".dll" on win).
SHLIB_TOKEN = "{shlib}"
SHLIB_EXTS = (".so", ".dylib", ".dll")


class StagingError(MegabuildError):
    """A file the table does not place exactly once, or a package that cannot be moved into $PREFIX."""


@dataclass(frozen=True)
class UpstreamTrees:
    """Where the upstream build left its files; a tree that is None is not part of this staging."""

    install: Path | None = None  # <SRC_DIR>/torch
    setuptools: Path | None = None  # <SRC_DIR>/build/lib.<platform>-cpython-3XX
    metadata: Path | None = None  # directory holding torch-<version>.dist-info
    # the target platform's shared-library suffix (conda-build's SHLIB_EXT): how the trees name libraries
    shlib_ext: str = ".so"

    def roots(self) -> dict[Tree, Path]:
        found: dict[Tree, Path | None] = {
            "install": self.install,
            "setuptools": self.setuptools,
            "metadata": self.metadata,
        }
        return {tree: path for tree, path in found.items() if path is not None}


@dataclass(frozen=True)
class Placement:
    tree: Tree
    path: str  # relative to the tree root, with '/'
    rule: Rule


@dataclass
class StagedPackage:
    package: str
    files: list[str] = field(default_factory=list)  # paths relative to $PREFIX, files and symlinks
    links: dict[str, str] = field(default_factory=dict)  # symlink path -> target, relative to $PREFIX


def shlib_regex(shlib_ext: str) -> str:
    """The names a shared library takes after its stem on one platform, versioned ones included.

    Linux puts the version after ``.so`` (``libc10.so``, ``libc10.so.2``, ``libc10.so.2.13.0``: CMake's
    SOVERSION/VERSION names and links); macOS puts it before ``.dylib`` (``libc10.dylib``,
    ``libc10.2.dylib``: CMake's Darwin naming)."""
    if shlib_ext == ".so":
        return r"\.so(?:\.[0-9]+)*"
    if shlib_ext == ".dylib":
        return r"(?:\.[0-9]+)*\.dylib"
    if shlib_ext == ".dll":
        return r"\.dll"  # unversioned; the Windows table (package_files.WINDOWS_RULES) names its files
    raise StagingError(
        f"SHLIB_EXT={shlib_ext!r} is not a platform the staging table knows ({', '.join(SHLIB_EXTS)}): "
        "build on linux, osx or win"
    )


@cache
def _pattern_regex(pattern: str, shlib_ext: str = ".so") -> re.Pattern[str]:
    """``**`` is any number of path segments (at least the file itself), ``*`` and ``?`` stay in a segment,
    ``{shlib}`` is a shared-library suffix of the platform (:func:`shlib_regex`)."""
    out = []
    for index, part in enumerate(pattern.split("/")):
        if index:
            out.append("/")
        if part == "**":
            out.append(".+")
            continue
        for piece_index, piece in enumerate(part.split(SHLIB_TOKEN)):
            if piece_index:
                out.append(shlib_regex(shlib_ext))
            for char in piece:
                out.append("[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char))
    return re.compile("".join(out) + r"\Z")


def matches(pattern: str, path: str, shlib_ext: str = ".so") -> bool:
    return _pattern_regex(pattern, shlib_ext).match(path) is not None


def rule_claims(rule: Rule, tree: Tree, path: str, shlib_ext: str = ".so") -> bool:
    return rule.tree == tree and _claim_test(rule, shlib_ext)(path)


def rules_claiming(rules: Iterable[Rule], tree: Tree, shlib_ext: str = ".so") -> Callable[[str], list[Rule]]:
    """The rules among ``rules`` that claim a path of ``tree`` (in their order), as a function of the path:
    the rules of the tree and their regular expressions picked once, for asking about every file of a
    wheel. A path is asked only of the rules whose literal beginning it can have, picked once per
    directory: a bump asks 177,000 paths of eight wheels, and most patterns begin with their directory
    (``torch/include/ATen/**``)."""
    candidates = [
        (rule, _claim_test(rule, shlib_ext), _literal_prefix(rule.pattern))
        for rule in rules
        if rule.tree == tree
    ]
    by_directory: dict[str, list[tuple[Rule, Callable[[str], bool]]]] = {}

    def claiming(path: str) -> list[Rule]:
        directory = path[: path.rfind("/") + 1]  # with its "/"; "" for a file at the top
        chosen = by_directory.get(directory)
        if chosen is None:
            # a prefix no longer than the directory decides for all its files; a longer one may still fit
            chosen = [
                (rule, claims)
                for rule, claims, prefix in candidates
                if directory.startswith(prefix) or prefix.startswith(directory)
            ]
            by_directory[directory] = chosen
        return [rule for rule, claims in chosen if claims(path)]

    return claiming


def _literal_prefix(pattern: str) -> str:
    """What every path ``pattern`` matches begins with: the pattern up to its first wildcard or
    shared-library token."""
    ends = [index for index in (pattern.find(mark) for mark in ("*", "?", SHLIB_TOKEN)) if index >= 0]
    return pattern[: min(ends, default=len(pattern))]


@cache
def _claim_test(rule: Rule, shlib_ext: str) -> Callable[[str], bool]:
    """Whether ``rule`` claims a path of its tree, with the regular expressions looked up once: classify
    asks every rule about every file (16,000 files x 77 rules in a real wheel)."""
    pattern = _pattern_regex(rule.pattern, shlib_ext).match
    excluded = tuple(_pattern_regex(excluded, shlib_ext).match for excluded in rule.excluding)
    return lambda path: pattern(path) is not None and not any(match(path) for match in excluded)


def require_extension_module(
    setuptools_tree: Path, ext_suffix: str, python: str, install_tree: Path | None = None
) -> Path:
    """``torch/_C{EXT_SUFFIX}`` of the output's Python must be in the setuptools tree: setup.py ships ``_C``
    as package data under exactly that name, and ``import torch`` looks for exactly that name.

    The name comes from CMake (``Python_add_library(_C MODULE WITH_SOABI)`` in 2.13, from FindPython's
    ``Python_SOABI``); when cross-compiling CMake >= 4.1 leaves that empty, CMake installs an untagged
    ``_C.so`` into the install tree and setup.py leaves it out (pytorch-cpu-feedstock 74dd3d46, patch 0022's
    header), so the error names the ``_C`` files of both trees."""
    expected = setuptools_tree / "torch" / f"_C{ext_suffix}"
    if expected.is_file():
        return expected
    found = sorted(path.name for path in (setuptools_tree / "torch").glob("_C.*"))
    if install_tree is not None:
        found += sorted(f"{path.name} (install tree)" for path in install_tree.glob("_C.*"))
    raise StagingError(
        f"no torch/_C{ext_suffix} for Python {python} in {setuptools_tree} (found: "
        f"{', '.join(found) or 'no _C at all'}): CMake named the extension without this Python's SOABI; "
        "when cross-compiling, patch 0012 (Python_SOABI from the target interpreter) must apply"
    )


def tree_files(tree: Tree, root: Path) -> Iterator[str]:
    """Every file and symlink of a tree, relative and with '/'; the install tree only below its four dirs."""
    tops = [root / name for name in INSTALL_TREE_DIRS] if tree == "install" else [root]
    for top in tops:
        yield from relative_entries(top, root)


def relative_entries(top: Path, root: Path) -> Iterator[str]:
    """The entries of :func:`entries_below` ``top``, relative to ``root`` (``top`` or a directory above it)
    and with '/'."""
    below_root = len(str(root)) + 1  # every entry's path is str(root), a separator, then the relative path
    for entry in _entry_paths(str(top)):
        yield entry[below_root:].replace(os.sep, "/")


def entries_below(top: Path) -> Iterator[Path]:
    """Files and symlinks below ``top``, the way a package lists them: a symlink to a directory is one
    entry, not a tree to descend into. Nothing for a missing ``top``."""
    return map(Path, _entry_paths(str(top)))


def _entry_paths(top: str) -> Iterator[str]:
    # strings, not Paths: a real wheel's trees hold 16,000 entries, listed once per package staged
    for dirpath, dirnames, filenames in os.walk(top):
        for name in [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            dirnames.remove(name)
            filenames.append(name)
        for name in filenames:
            yield os.path.join(dirpath, name)


def classify(trees: UpstreamTrees, rules: Iterable[Rule] | None = None) -> list[Placement]:
    """Place every file of the trees by exactly one rule (default: the table of the trees' platform);
    otherwise stop with the offending paths."""
    shlib_regex(trees.shlib_ext)  # an unknown platform is one clear error, not "no rule claims ..."
    rules = tuple(rules_for(trees.shlib_ext) if rules is None else rules)
    placements: list[Placement] = []
    unclaimed: list[str] = []
    twice: list[str] = []
    for tree, root in trees.roots().items():
        claiming = rules_claiming(rules, tree, trees.shlib_ext)
        for path in sorted(tree_files(tree, root)):
            claimed = claiming(path)
            if len(claimed) == 1:
                placements.append(Placement(tree, path, claimed[0]))
            elif not claimed:
                unclaimed.append(str(root / path))
            else:
                patterns = " and ".join(repr(rule.pattern) for rule in claimed)
                twice.append(f"{root / path} (by {patterns})")
    if unclaimed:
        raise StagingError(
            f"{len(unclaimed)} installed file(s) no staging rule claims, first {unclaimed[0]}: "
            "add a rule for it to recipe/megabuild/package_files.py"
            + (
                f" (others: {', '.join(unclaimed[1:4])}{', ...' if len(unclaimed) > 4 else ''})"
                if len(unclaimed) > 1
                else ""
            )
        )
    if twice:
        raise StagingError(
            f"installed file claimed by two staging rules: {twice[0]}: make the rules in "
            "recipe/megabuild/package_files.py disjoint"
        )
    return placements


def files_by_package(trees: UpstreamTrees) -> dict[str, list[Placement]]:
    grouped: dict[str, list[Placement]] = {name: [] for name in (*PACKAGES, NOT_SHIPPED)}
    for placement in classify(trees):
        grouped[placement.rule.package].append(placement)
    return grouped


def stage_package(
    package: str, trees: UpstreamTrees, prefix: Path, sp_dir: Path | None = None
) -> StagedPackage:
    """Move ``package``'s files from ``trees`` into ``prefix`` (``sp_dir`` for the Python trees), atomically.

    Works on any directories: the driver passes conda-build's $PREFIX/$SP_DIR, tests pass temporary ones.
    """
    with prepare_stage(package, trees, prefix, sp_dir) as prepared:
        prepared.commit()
    return prepared.staged


@contextmanager
def prepare_stage(
    package: str, trees: UpstreamTrees, prefix: Path, sp_dir: Path | None = None
) -> Iterator[PreparedStage]:
    """Assemble ``package`` beside ``prefix``; the caller may write its report, then ``commit()``.

    Leaving the block without a commit (an error, a signal) removes the assembly: nothing is staged."""
    if package not in PACKAGES:
        raise StagingError(f"unknown package {package!r}: the staging table knows {', '.join(PACKAGES)}")
    prefix = prefix.resolve()
    placements = files_by_package(trees)[package]
    if not placements:
        raise StagingError(f"no files for {package} in {_describe(trees)}: did the build pass install them?")
    roots = trees.roots()
    staged = StagedPackage(package)
    try:
        prefix.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StagingError(f"cannot create PREFIX: {os_error_line(exc)}") from None
    area = _StagingArea(prefix)
    with area.locked():
        area.recover()
        try:
            scratch = Path(tempfile.mkdtemp(prefix=f"{area.scratch_prefix}{os.getpid()}-", dir=area.dir))
        except OSError as exc:
            raise StagingError(f"cannot stage {package} next to PREFIX: {os_error_line(exc)}") from None
        sources: dict[str, Path] = {}  # destination (relative to PREFIX) -> the file that goes there
        destinations = _Destinations(prefix, sp_dir)
        try:
            for placement in placements:
                destination = destinations.placement(placement)
                if placement.rule.action == "link":
                    link_path = destinations.of(placement.tree, placement.rule.link_dir)
                    target = os.path.relpath(prefix / placement.rule.link_to, link_path.parent)
                    staged.links[link_path.relative_to(prefix).as_posix()] = target
                    continue
                relative = destination.relative_to(prefix)
                if relative.as_posix() in sources:  # Windows: c10.dll in both lib/ and bin/ of one tree
                    raise StagingError(
                        f"{roots[placement.tree] / placement.path} and {sources[relative.as_posix()]} both "
                        f"go to {relative.as_posix()}: remove one of them from the build's install step"
                    )
                sources[relative.as_posix()] = roots[placement.tree] / placement.path
                _copy_entry(roots[placement.tree] / placement.path, scratch / relative)
                staged.files.append(relative.as_posix())
            for link, target in staged.links.items():
                (scratch / link).parent.mkdir(parents=True, exist_ok=True)
                os.symlink(target, scratch / link)
            checkpoint("staging-assembled")
            _refuse_clashes(prefix, [*staged.files, *staged.links])
            yield PreparedStage(staged, scratch, prefix, area)
        except OSError as exc:
            raise StagingError(f"staging {package} failed: {os_error_line(exc)}") from None
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


@dataclass
class PreparedStage:
    """An assembled package waiting beside PREFIX; ``commit()`` moves it in, all or nothing."""

    staged: StagedPackage
    scratch: Path
    prefix: Path
    area: _StagingArea

    def commit(self) -> None:
        """Move every entry into PREFIX by renames, with signals deferred and a journal for SIGKILL.

        A signal that arrived before the move cancels it; one arriving during the move is held until the
        move is complete, and then the moved files are taken back: an interrupted pass stages nothing. The
        journal lists what is being moved: if the process is killed outright, the next staging into this
        PREFIX takes those files back first."""
        relatives = [*self.staged.files, *self.staged.links]
        with no_interruption():
            if pending():
                return  # the handler raises once signals are unblocked; the scratch is removed
            self.area.write_journal(relatives)
            try:
                _move_into(self.scratch, self.prefix, relatives)
            except BaseException:  # _move_into took back what it had moved
                self.area.journal.unlink()
                raise
            if pending():
                self.area.recover()  # by the journal, as after a kill
            else:
                self.area.journal.unlink()


class _StagingArea:
    """Where a package is assembled for PREFIX: beside it when on the same file system (renames must not
    cross devices), else inside it (hidden, removed before the pass ends). Holds the lock, the journal and
    the leftovers of killed runs."""

    def __init__(self, prefix: Path) -> None:
        self.prefix = prefix
        same_device = prefix.parent.stat().st_dev == prefix.stat().st_dev
        self.dir = prefix.parent if same_device else prefix
        self.scratch_prefix = f".megabuild-stage-{prefix.name}-"
        self.journal = self.dir / f".megabuild-stage-{prefix.name}.journal"

    @contextmanager
    def locked(self) -> Iterator[None]:
        """One staging into a PREFIX at a time: flock on the PREFIX directory itself (no lock file to leave
        behind; the kernel drops it when the process ends, however it ends)."""
        if fcntl is None:  # Windows: a directory cannot be opened for locking there
            with self._locked_file():
                yield
            return
        handle = os.open(self.prefix, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield
        finally:
            os.close(handle)

    @contextmanager
    def _locked_file(self) -> Iterator[None]:
        """Windows: msvcrt.locking on a lock file beside PREFIX (never inside it: it is not packaged); the
        system drops the lock when the process ends."""
        import msvcrt  # Windows only

        with (self.dir / f".megabuild-stage-{self.prefix.name}.lock").open("a+b") as handle:
            msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)  # type: ignore[attr-defined]
            try:
                yield
            finally:
                handle.seek(0)
                msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]

    def recover(self) -> None:
        """Take back what a killed run left: a journal's moved files, assembly directories."""
        if self.journal.exists():
            relatives = json.loads(self.journal.read_text(encoding="utf-8"))["moved"]
            removed = 0
            for rel in reversed(relatives):
                path = self.prefix / rel
                if path.is_symlink() or path.is_file():
                    path.unlink()
                    removed += 1
            _remove_empty_parents(self.prefix, relatives)
            self.journal.unlink()
            say(f"took back {removed} file(s) an interrupted staging had moved into {self.prefix}")
        for leftover in self.dir.glob(f"{self.scratch_prefix}*-*"):
            pid = leftover.name.removeprefix(self.scratch_prefix).split("-")[0]
            if leftover.is_dir() and pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(leftover, ignore_errors=True)
                say(f"removed {leftover}, left by an interrupted staging")

    def write_journal(self, relatives: list[str]) -> None:
        record = json.dumps({"prefix": str(self.prefix), "moved": relatives})
        write_text(self.journal, record, durable=True, prefix=self.journal.name)


def _alive(pid: int) -> bool:
    if os.name == "nt":
        # os.kill(pid, 0) would terminate the process on Windows (Python docs, os.kill: any other signal
        # value ends it by TerminateProcess): leave assembly directories of other runs alone there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def _remove_empty_parents(prefix: Path, relatives: list[str]) -> None:
    parents = {
        parent for rel in relatives for parent in (prefix / rel).parents if parent.is_relative_to(prefix)
    }
    for directory in sorted(parents, key=lambda p: len(p.parts), reverse=True):
        if directory != prefix:
            with suppress(OSError):  # not empty: other packages' files live there
                directory.rmdir()


def _describe(trees: UpstreamTrees) -> str:
    return ", ".join(f"{tree} tree {root}" for tree, root in trees.roots().items()) or "no trees"


def _site_packages(prefix: Path, sp_dir: Path | None, tree: Tree) -> Path:
    """SP_DIR resolved, for the files of ``tree``; it must lie inside PREFIX."""
    if sp_dir is None:
        raise StagingError(f"{tree} tree files need a site-packages directory: set SP_DIR")
    sp_dir = sp_dir if sp_dir.is_absolute() else prefix / sp_dir
    if not sp_dir.resolve().is_relative_to(prefix):
        raise StagingError(f"SP_DIR {sp_dir} is not inside PREFIX {prefix}: check the build environment")
    return sp_dir.resolve()


class _Destinations:
    """Where the placements of one staging go; SP_DIR is resolved once, not once per file (a real wheel
    has 16,000)."""

    def __init__(self, prefix: Path, sp_dir: Path | None) -> None:
        self.prefix = prefix
        self.sp_dir = sp_dir
        self._site: Path | None = None

    def of(self, tree: Tree, path: str) -> Path:
        if tree == "install":
            return self.prefix / path
        if self._site is None:
            self._site = _site_packages(self.prefix, self.sp_dir, tree)
        return self._site / path

    def placement(self, placement: Placement) -> Path:
        template = placement.rule.destination
        if not template:
            return self.of(placement.tree, placement.path)
        fields = {"path": placement.path, "name": placement.path.rsplit("/", 1)[-1]}
        if "{sp_dir}" in template:
            fields["sp_dir"] = self.of("setuptools", "").relative_to(self.prefix).as_posix()
        return self.prefix / template.format(**fields)


def _copy_entry(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_symlink():
        os.symlink(os.readlink(source), target)
    else:
        shutil.copy2(source, target)


def _refuse_clashes(prefix: Path, relatives: list[str]) -> None:
    """Staging never overwrites: a file already in PREFIX belongs to a host package (leftovers of an
    interrupted staging into this PREFIX were taken back before, by the journal)."""
    clashes = [rel for rel in relatives if os.path.lexists(prefix / rel)]
    if clashes:
        raise StagingError(
            f"{prefix / clashes[0]} already exists in PREFIX ({len(clashes)} clash(es)): another package of "
            "the host environment ships it; drop it from the package or from the host requirements"
        )


def _move_into(scratch: Path, prefix: Path, relatives: list[str]) -> None:
    """Rename every staged entry into ``prefix``; a failure takes back what was moved."""
    moved: list[Path] = []
    created_dirs: list[Path] = []
    present_dirs: set[Path] = set()  # checked or made already: most files share their directory
    try:
        for rel in relatives:
            destination = prefix / rel
            if destination.parent not in present_dirs:
                missing = [
                    p for p in reversed(destination.parents) if p.is_relative_to(prefix) and not p.exists()
                ]
                for directory in missing:
                    directory.mkdir()
                    created_dirs.append(directory)
                present_dirs.add(destination.parent)
            os.replace(scratch / rel, destination)
            moved.append(destination)
            if len(moved) == len(relatives) // 2:
                checkpoint("staging-half-moved")
    except BaseException:
        for destination in reversed(moved):
            destination.unlink()
        for directory in reversed(created_dirs):
            directory.rmdir()
        raise
