"""feedstock_tools imports only downward between its sub-packages; no module of it or of the build driver
(recipe/megabuild) imports itself back; the tools may import the driver, the driver imports no tool.

The layers (docs/reference/architecture.md): ``megabuild`` (the build driver, ``recipe/megabuild``) <-
``common`` <- ``conda`` <- ``ci`` <- {``maintainer``, ``proofs``} <- ``release``. A module
may import its own sub-package and the sub-packages of lower layers; ``maintainer`` and ``proofs`` share a
layer and do not import each other; ``__main__`` (the CLI) is above everything. Every import counts: at module
level, inside functions and under ``TYPE_CHECKING`` alike, since each is a dependency a reader must follow.

Inside ``proofs`` the rooms by job are layered the same way: ``solve`` and ``wheels`` (what the others
build on) <- ``rehearsal`` <- ``builders`` and ``gpu_check``.
"""

from __future__ import annotations

import argparse
import ast
import functools
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "feedstock_tools"
PACKAGE_DIR = Path(__file__).resolve().parents[1] / PACKAGE
# The build driver conda-build runs (standard library only, no layers inside): it must have no import circle
# either. It is the tools' bottom layer, below common: any tool may import it (``from megabuild import ...``),
# and it imports no tool, since it runs under conda-build, where feedstock_tools is not there.
DRIVER = "megabuild"
DRIVER_DIR = Path(__file__).resolve().parents[1] / "recipe" / DRIVER
DRIVER_LAYER = -1
LAYERS = {"common": 0, "conda": 1, "ci": 2, "maintainer": 3, "proofs": 3, "release": 4}
CLI_LAYER = 5  # feedstock_tools/__main__.py
# proofs' sub-packages (and its one-module job, gpu_check); the package's own __init__ is below them all
PROOFS_LAYERS = {"solve": 0, "wheels": 0, "rehearsal": 1, "builders": 2, "gpu_check": 2}


@dataclass(frozen=True)
class Import:
    """``importer`` (dotted) imports ``imported`` at ``path`` (relative to the package's parent):``line``."""

    importer: str
    imported: str
    path: Path
    line: int

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def module_name(path: Path, package_dir: Path) -> str:
    parts = path.relative_to(package_dir.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_paths(package_dir: Path) -> dict[str, Path]:
    return {module_name(path, package_dir): path for path in sorted(package_dir.rglob("*.py"))}


def imports_of(
    path: Path, package_dir: Path, modules: dict[str, Path], packages: tuple[str, ...] = ()
) -> Iterator[Import]:
    """Every import in ``path`` of a module of the package (or of ``packages``, if given), resolved to the
    module it loads (``modules`` names the modules an import may resolve to)."""
    wanted = packages or (package_dir.name,)
    importer = module_name(path, package_dir)
    is_package = path.name == "__init__.py"
    for node in _nodes(path.read_text()):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = importer.split(".")[: len(importer.split(".")) - node.level + (1 if is_package else 0)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            # `from pkg import submodule` depends on the submodule, `from module import name` on the module
            targets = [
                f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            if any(target == package or target.startswith(f"{package}.") for package in wanted):
                yield Import(importer, target, path.relative_to(package_dir.parent), node.lineno)


@functools.cache
def _nodes(source: str) -> tuple[ast.AST, ...]:
    """Every node of a module, by its text: each check of this module reads every module's imports."""
    return tuple(ast.walk(ast.parse(source)))


def tool_and_driver_imports(package_dir: Path) -> Iterator[Import]:
    """Every import in the tools of a module of the tools or of the build driver (recipe/megabuild)."""
    modules = module_paths(package_dir)
    known = modules | module_paths(DRIVER_DIR)
    for path in modules.values():
        yield from imports_of(path, package_dir, known, packages=(package_dir.name, DRIVER))


def layer_of(module: str) -> tuple[str, int | None]:
    """A module's sub-package and its layer; None: in no layer (the package's own __init__, which imports
    nothing and is imported by nothing, or a sub-package not in LAYERS)."""
    parts = module.split(".")
    if parts[0] == DRIVER:
        return DRIVER, DRIVER_LAYER
    if len(parts) == 1:
        return "", None
    if parts[1] == "__main__":
        return "__main__", CLI_LAYER
    return parts[1], LAYERS.get(parts[1])


def layer_violations(package_dir: Path) -> list[str]:
    """One line per import that goes up, sideways between sub-packages, or into an unknown sub-package."""
    problems = []
    for imp in tool_and_driver_imports(package_dir):
        importer_pkg, importer_layer = layer_of(imp.importer)
        imported_pkg, imported_layer = layer_of(imp.imported)
        if importer_layer is None:  # the package's own __init__ imports nothing of the tools or the driver
            importer_layer = DRIVER_LAYER - 1
        if imported_layer is None:
            problems.append(f"{imp.where()}: {imp.importer} imports {imp.imported}, outside any layer")
        elif importer_pkg != imported_pkg and imported_layer >= importer_layer:
            problems.append(
                f"{imp.where()}: {imp.importer} ({importer_pkg}, layer {importer_layer}) imports "
                f"{imp.imported} ({imported_pkg}, layer {imported_layer}): imports go only downward"
            )
    return problems


def tool_imports_in_driver(driver_dir: Path) -> list[str]:
    """One line per import of the tools (feedstock_tools) in the build driver, at module level, in a
    function or under ``TYPE_CHECKING`` alike: the driver imports no tool."""
    modules = module_paths(driver_dir)
    return [
        f"{imp.where()}: {imp.importer} imports {imp.imported}: the driver imports no tool (conda-build runs "
        "it without feedstock_tools); move what both need into the driver"
        for path in modules.values()
        for imp in imports_of(path, driver_dir, modules, packages=(PACKAGE,))
    ]


def driver_imports_table(package_dir: Path) -> str:
    """The Markdown table of docs/reference/architecture.md, drawn from the imports: each module of the build
    driver the tools import, and the tool modules that import it, by sub-package."""
    importers: dict[str, dict[str, set[str]]] = {}
    for imp in tool_and_driver_imports(package_dir):
        if layer_of(imp.imported)[0] == DRIVER:
            sub_package, _, module = imp.importer.removeprefix(f"{PACKAGE}.").partition(".")
            by_sub_package = importers.setdefault(imp.imported.removeprefix(f"{DRIVER}."), {})
            by_sub_package.setdefault(sub_package, set()).add(module or "(its __init__)")
    rows = [
        f"| `{driver}` | "
        + "; ".join(f"`{sub}`: {', '.join(sorted(names))}" for sub, names in sorted(by_sub.items()))
        + " |"
        for driver, by_sub in sorted(importers.items())
    ]
    return "\n".join(["| driver module | tool modules that import it, by sub-package |", "|---|---|", *rows])


def proofs_room(module: str) -> tuple[str, int]:
    """The room of a module of ``proofs`` and its layer there (the package itself: -1)."""
    parts = module.split(".")
    if len(parts) < 3:
        return "", -1
    return parts[2], PROOFS_LAYERS.get(parts[2], -2)


def proofs_violations(package_dir: Path) -> list[str]:
    """One line per import between proofs' rooms that goes up or sideways, or from a room not listed."""
    problems = []
    for imp in tool_and_driver_imports(package_dir):
        if layer_of(imp.importer)[0] != "proofs" or layer_of(imp.imported)[0] != "proofs":
            continue
        importer_room, importer_layer = proofs_room(imp.importer)
        imported_room, imported_layer = proofs_room(imp.imported)
        if -2 in (importer_layer, imported_layer):
            problems.append(f"{imp.where()}: a room of proofs not in PROOFS_LAYERS")
        elif importer_room != imported_room and imported_layer >= importer_layer >= 0:
            problems.append(
                f"{imp.where()}: {imp.importer} (proofs/{importer_room}, layer {importer_layer}) imports "
                f"{imp.imported} (proofs/{imported_room}, layer {imported_layer}): imports go only "
                "downward"
            )
    return problems


def import_cycles(package_dir: Path) -> list[list[str]]:
    """Each circle of module imports once, as the list of modules around it."""
    modules = module_paths(package_dir)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for path in modules.values():
        for imp in imports_of(path, package_dir, modules):
            if imp.imported in graph and imp.imported != imp.importer:
                graph[imp.importer].add(imp.imported)
    cycles: list[list[str]] = []
    seen: set[frozenset[str]] = set()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt) :]
                if frozenset(cycle) not in seen:
                    seen.add(frozenset(cycle))
                    cycles.append([*cycle, nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)
    return cycles


def test_every_sub_package_is_a_known_layer() -> None:
    sub_packages = {p.name for p in PACKAGE_DIR.iterdir() if (p / "__init__.py").is_file()}
    assert sub_packages == set(LAYERS)


def test_imports_go_only_downward() -> None:
    assert layer_violations(PACKAGE_DIR) == []


def test_every_room_of_proofs_is_a_known_layer() -> None:
    proofs = PACKAGE_DIR / "proofs"
    rooms = {p.name for p in proofs.iterdir() if (p / "__init__.py").is_file()}
    rooms |= {p.stem for p in proofs.glob("*.py") if p.name != "__init__.py"}
    assert rooms == set(PROOFS_LAYERS)


def test_imports_between_the_rooms_of_proofs_go_only_downward() -> None:
    assert proofs_violations(PACKAGE_DIR) == []


def test_the_tools_import_the_driver_as_a_plain_package() -> None:
    """The tools' imports of ``megabuild`` are imports a reader (and this test) sees, each into the bottom
    layer, and none names a module the driver does not have."""
    into_driver = [imp for imp in tool_and_driver_imports(PACKAGE_DIR) if layer_of(imp.imported)[0] == DRIVER]
    assert {layer_of(imp.importer)[0] for imp in into_driver} >= {"common", "conda", "maintainer", "proofs"}
    assert {imp.imported for imp in into_driver} <= set(module_paths(DRIVER_DIR))
    assert f"{DRIVER}.atomic_file" in {imp.imported for imp in into_driver}


def test_the_driver_imports_no_tool() -> None:
    assert tool_imports_in_driver(DRIVER_DIR) == []


def test_the_architecture_page_shows_the_tools_imports_of_the_driver() -> None:
    """docs/reference/architecture.md's table of the tools' arrows into the driver is the one drawn from the
    imports now."""
    page = (PACKAGE_DIR.parent / "docs" / "reference" / "architecture.md").read_text(encoding="utf-8")
    table = driver_imports_table(PACKAGE_DIR)
    assert table in page, f"docs/reference/architecture.md: replace the driver-imports table with:\n{table}"


@pytest.mark.parametrize("package_dir", [PACKAGE_DIR, DRIVER_DIR], ids=lambda path: path.name)
def test_no_import_circles(package_dir: Path) -> None:
    assert import_cycles(package_dir) == []


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    """A copy of the real package to break on purpose."""
    copy = tmp_path / PACKAGE
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_an_upward_import_is_named(package_copy: Path) -> None:
    variants = package_copy / "conda" / "variants.py"
    variants.write_text(variants.read_text() + "\nfrom feedstock_tools.ci.ci_support import CI_SUPPORT\n")
    line = len(variants.read_text().splitlines())
    (problem,) = layer_violations(package_copy)
    assert problem.startswith(f"{PACKAGE}/conda/variants.py:{line}: feedstock_tools.conda.variants (conda, ")
    assert "imports feedstock_tools.ci.ci_support (ci, layer 2)" in problem


def test_a_sideways_import_between_maintainer_and_proofs_is_named(package_copy: Path) -> None:
    check = package_copy / "maintainer" / "check.py"
    check.write_text(check.read_text() + "\nfrom ..proofs.wheels import wheel_layout\n")
    (problem,) = layer_violations(package_copy)
    assert "feedstock_tools.maintainer.check (maintainer, layer 3) imports" in problem
    assert "feedstock_tools.proofs.wheels.wheel_layout (proofs, layer 3)" in problem


def test_an_upward_import_between_rooms_of_proofs_is_named(package_copy: Path) -> None:
    linkage = package_copy / "proofs" / "wheels" / "linkage.py"
    linkage.write_text(linkage.read_text() + "\nfrom feedstock_tools.proofs.rehearsal import harness\n")
    (problem,) = proofs_violations(package_copy)
    assert "feedstock_tools.proofs.wheels.linkage (proofs/wheels, layer 0) imports" in problem
    assert "feedstock_tools.proofs.rehearsal.harness (proofs/rehearsal, layer 1)" in problem
    assert layer_violations(package_copy) == []  # within one sub-package of the tools: only this rule sees it


def test_an_import_of_a_tool_in_the_driver_is_named(tmp_path: Path) -> None:
    copy = tmp_path / DRIVER
    shutil.copytree(DRIVER_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    staging = copy / "staging.py"
    staging.write_text(
        staging.read_text()
        + "\n\ndef _late() -> None:\n    from feedstock_tools.common.errors import ToolError\n"
    )
    line = len(staging.read_text().splitlines())
    (problem,) = tool_imports_in_driver(copy)
    assert problem.startswith(
        f"{DRIVER}/staging.py:{line}: megabuild.staging imports feedstock_tools.common.errors: the driver "
        "imports no tool"
    )


def test_an_import_of_the_tools_from_the_driver_layer_is_upward(package_copy: Path) -> None:
    """A tool module may import the driver; the driver's layer is below every sub-package of the tools."""
    cache_store = package_copy / "common" / "cache_store.py"
    assert "from megabuild import" in cache_store.read_text()
    assert layer_violations(package_copy) == []
    assert layer_of("megabuild.atomic_file") == (DRIVER, DRIVER_LAYER) and min(LAYERS.values()) > DRIVER_LAYER


def test_a_circle_is_found_even_behind_type_checking(package_copy: Path) -> None:
    config = package_copy / "ci" / "ci_config.py"
    config.write_text(
        config.read_text()
        + "\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        + "    from feedstock_tools.ci.ci_workflow import WORKFLOW\n"
    )
    assert import_cycles(package_copy) == [
        ["feedstock_tools.ci.ci_config", "feedstock_tools.ci.ci_workflow", "feedstock_tools.ci.ci_config"]
    ]


def test_a_circle_in_the_build_driver_is_found(tmp_path: Path) -> None:
    """recipe/megabuild imports by absolute name (``from megabuild.x import ...``), also inside functions."""
    copy = tmp_path / "megabuild"
    shutil.copytree(DRIVER_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    cache = copy / "cmake_cache.py"
    cache.write_text(cache.read_text() + "\n\ndef _late() -> None:\n    from megabuild import passes\n")
    cycles = import_cycles(copy)
    assert cycles and all(
        "megabuild.cmake_cache" in cycle and "megabuild.passes" in cycle for cycle in cycles
    )


def test_the_cli_table_names_the_subcommand_each_module_registers() -> None:
    """``__main__.SUBCOMMANDS``: with no subcommand chosen every module registers its own, in the table's
    order, and under the name the table gives it."""
    from feedstock_tools.__main__ import SUBCOMMANDS, build_parser

    (subparsers,) = [a for a in build_parser([])._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(subparsers.choices) == list(SUBCOMMANDS)


def test_a_command_imports_only_the_module_of_its_subcommand() -> None:
    """A command's start imports its own tool module, not the other fourteen (most of every start:
    docs/records/2026-11-28-ci-time.md)."""
    from feedstock_tools.__main__ import SUBCOMMANDS

    probe = (
        "import sys; from feedstock_tools.__main__ import SUBCOMMANDS, build_parser; "
        "build_parser(['cache-diff', '--help']); "
        "print(*sorted(m for m in SUBCOMMANDS.values() if 'feedstock_tools.' + m in sys.modules))"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert run.stdout.split() == [SUBCOMMANDS["cache-diff"]]
