"""The structure of a configured CMake + Ninja build: its libraries and executables, how many sources
each compiles, how long that took, and which of them link which.

Evidence, all from the build directory: ``build.ninja`` (one link statement per library/executable,
one compile statement per object with the owning target's ``OBJECT_DIR``), ``compile_commands.json``
(the translation units), ``.ninja_log`` (how long each output took, once built) and ``CMakeCache.txt``
(project, build type).
"""

from __future__ import annotations

import itertools
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from feedstock_tools.common.errors import ToolError
from feedstock_tools.maintainer.ninja_files import BuildStatement, parse_build_ninja

# CMake's Ninja generator names link rules <LANG>_<KIND>_LINKER__<target>_<config>.
_LINK_RULE = re.compile(
    r"^(?P<lang>[A-Za-z]+)_(?P<kind>SHARED_LIBRARY|STATIC_LIBRARY|MODULE_LIBRARY|EXECUTABLE)_LINKER__"
    r"(?P<target>.+)_(?P<config>[A-Za-z]*)$"
)
KIND_NAMES = {
    "SHARED_LIBRARY": "shared library",
    "STATIC_LIBRARY": "static library",
    "MODULE_LIBRARY": "module library",
    "EXECUTABLE": "executable",
}
OBJECT_LIBRARY = "object library"
_OBJECT_DIR = re.compile(r"(?:^|/)CMakeFiles/(?P<target>[^/]+)\.dir$")
_LIBRARY_FILE = re.compile(r"\.(so|a|dylib)(\.[0-9.]+)?$")


@dataclass
class Target:
    name: str
    kind: str
    output: str
    sources: int = 0
    compile_seconds: float | None = None
    link_seconds: float | None = None
    links: list[str] = field(default_factory=list)  # targets of this build it links, as CMake listed them
    externals: list[str] = field(default_factory=list)  # libraries from outside the build


@dataclass
class BuildStructure:
    build_dir: Path
    project: str
    build_type: str
    targets: dict[str, Target]
    notes: list[str]


def _require_build_dir(build_dir: Path) -> None:
    if not (build_dir / "CMakeCache.txt").is_file():
        raise ToolError(
            f"{build_dir} is not a configured CMake build directory (no CMakeCache.txt): "
            "configure it with `cmake -G Ninja -S <source> -B <build>` first"
        )
    if not (build_dir / "build.ninja").is_file():
        raise ToolError(
            f"{build_dir} has no build.ninja: the graph reads Ninja's files, configure with `-G Ninja`"
        )


def _normalise(path: str, build_dir: Path) -> str:
    """A build path relative to the build directory when it lies inside it, in POSIX form."""
    candidate = Path(path)
    if candidate.is_absolute():
        try:
            return candidate.resolve().relative_to(build_dir.resolve()).as_posix()
        except ValueError:
            return candidate.as_posix()
    return PurePosixPath(path).as_posix()


def _object_owner(statement: BuildStatement) -> str | None:
    match = _OBJECT_DIR.search(statement.variables.get("OBJECT_DIR", ""))
    return match.group("target") if match else None


def _compiled_objects(build_dir: Path, notes: list[str]) -> set[str] | None:
    """Object files named by ``compile_commands.json`` (``-o``), relative to the build directory."""
    path = build_dir / "compile_commands.json"
    if not path.is_file():
        notes.append(
            "no compile_commands.json (configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON): "
            "source counts are object counts from build.ninja"
        )
        return None
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ToolError(f"{path} is not valid JSON ({exc}): re-run cmake to regenerate it") from exc
    objects: set[str] = set()
    for entry in entries:
        output = entry.get("output")
        if output is None:
            arguments = entry.get("arguments") or shlex.split(entry.get("command", ""))
            output = next((b for a, b in itertools.pairwise(arguments) if a == "-o"), None)
        if output:
            directory = Path(entry.get("directory", build_dir))
            objects.add(_normalise(str(directory / output), build_dir))
    return objects


def read_build_structure(build_dir: Path) -> BuildStructure:
    _require_build_dir(build_dir)
    notes: list[str] = []
    from megabuild import cmake_cache

    try:
        cache = cmake_cache.CMakeCache.load(build_dir / "CMakeCache.txt")
    except cmake_cache.CMakeCacheError as exc:
        raise ToolError(str(exc)) from exc
    statements = parse_build_ninja(build_dir / "build.ninja")

    targets, link_statements = _link_targets(statements, build_dir)
    object_owner = _object_owners(statements, build_dir, targets)

    compiled = _compiled_objects(build_dir, notes)
    durations = _durations(build_dir, notes)

    for obj, owner in object_owner.items():
        target = targets[owner]
        if compiled is None or obj in compiled:
            target.sources += 1
        if obj in durations:
            target.compile_seconds = (target.compile_seconds or 0.0) + durations[obj]

    output_owner = {target.output: name for name, target in targets.items()}
    for name, statement in link_statements.items():
        target = targets[name]
        target.link_seconds = durations.get(target.output)
        _collect_links(target, statement, build_dir, output_owner, object_owner)

    return BuildStructure(
        build_dir=build_dir,
        project=cache.get("CMAKE_PROJECT_NAME") or "",
        build_type=cache.get("CMAKE_BUILD_TYPE") or "",
        targets=targets,
        notes=notes,
    )


def _durations(build_dir: Path, notes: list[str]) -> dict[str, float]:
    """Output -> seconds its latest recorded command took, from ``.ninja_log`` (megabuild's reader)."""
    from megabuild import ninja_log

    if not (build_dir / ".ninja_log").is_file():
        notes.append("no .ninja_log (the directory is configured but not built): compile times are empty")
        return {}
    try:
        entries = ninja_log.read_log(build_dir / ".ninja_log")
    except ninja_log.NinjaLogError as exc:
        raise ToolError(str(exc)) from exc
    return {_normalise(output, build_dir): (e.end_ms - e.start_ms) / 1000.0 for output, e in entries.items()}


def _link_targets(
    statements: list[BuildStatement], build_dir: Path
) -> tuple[dict[str, Target], dict[str, BuildStatement]]:
    """One target per link statement (libraries and executables), with the statement that links it."""
    targets: dict[str, Target] = {}
    link_statements: dict[str, BuildStatement] = {}
    for statement in statements:
        match = _LINK_RULE.match(statement.rule)
        if match and statement.outputs:
            name = match.group("target")
            output = statement.variables.get("TARGET_FILE", statement.outputs[0])
            targets[name] = Target(name, KIND_NAMES[match.group("kind")], _normalise(output, build_dir))
            link_statements[name] = statement
    return targets, link_statements


def _object_owners(
    statements: list[BuildStatement], build_dir: Path, targets: dict[str, Target]
) -> dict[str, str]:
    """Object file -> target compiling it; OBJECT libraries (compiled, never linked) join ``targets``."""
    object_owner: dict[str, str] = {}
    for statement in statements:
        owner = _object_owner(statement)
        if owner and "_COMPILER__" in statement.rule:
            for output in statement.outputs:
                object_owner[_normalise(output, build_dir)] = owner
                if owner not in targets:
                    targets[owner] = Target(owner, OBJECT_LIBRARY, f"CMakeFiles/{owner}.dir")
    return object_owner


def _collect_links(
    target: Target,
    statement: BuildStatement,
    build_dir: Path,
    output_owner: dict[str, str],
    object_owner: dict[str, str],
) -> None:
    def add_internal(name: str) -> None:
        if name != target.name and name not in target.links:
            target.links.append(name)

    for token in shlex.split(statement.variables.get("LINK_LIBRARIES", "")):
        if token.startswith("-l") and len(token) > 2:
            if token[2:] not in target.externals:
                target.externals.append(token[2:])
            continue
        if token.startswith("-"):
            continue  # linker flags (-Wl,-rpath,..., -pthread)
        path = _normalise(token, build_dir)
        if path in output_owner:
            add_internal(output_owner[path])
        elif _LIBRARY_FILE.search(path):
            library = PurePosixPath(path).name
            if library not in target.externals:
                target.externals.append(library)
    for dependency in statement.implicit:
        path = _normalise(dependency, build_dir)
        if path in output_owner:
            add_internal(output_owner[path])
    # Objects of OBJECT libraries linked straight into this target.
    for obj in statement.inputs:
        owner = object_owner.get(_normalise(obj, build_dir))
        if owner and owner != target.name:
            add_internal(owner)
