"""``graph``: the build-structure picture of a configured CMake + Ninja build directory.

Writes ``<name>.dot`` and, through Graphviz ``dot``, ``<name>.svg`` / ``<name>.png``, plus a text summary
table (``<name>.txt``) of every library and executable: kind, sources, compile and link time, links.
The picture draws each target once, shaded by compile time, with an edge to each target it links;
edges implied by a longer path are left out (transitive reduction) so the layers stay readable, the
summary keeps the full lists.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

from feedstock_tools.common import inputs, interruption
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.path_safety import component
from feedstock_tools.maintainer.build_structure import (
    OBJECT_LIBRARY,
    BuildStructure,
    Target,
    read_build_structure,
)
from megabuild import atomic_file

IMAGE_FORMATS = ("svg", "png")
NODE_SHAPES = {
    "shared library": "box",
    "static library": "box",
    "module library": "component",
    "executable": "ellipse",
    OBJECT_LIBRARY: "folder",
}
NODE_STYLES = {
    "shared library": "filled,rounded",
    "static library": "filled,dashed",
    "module library": "filled",
    "executable": "filled",
    OBJECT_LIBRARY: "filled,dotted",
}
# Compile-time shading from pale (little) to red (the most expensive target).
COOL, HOT = (255, 255, 204), (227, 26, 28)


def _descendants(graph: dict[str, list[str]], start: str) -> set[str]:
    seen: set[str] = set()
    stack = list(graph.get(start, []))
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(graph.get(node, []))
    return seen


def reduced_edges(targets: dict[str, Target]) -> dict[str, list[str]]:
    """Each target's links minus those reachable through another of its links."""
    graph = {name: [link for link in target.links if link in targets] for name, target in targets.items()}
    reduced: dict[str, list[str]] = {}
    for name, links in graph.items():
        indirect: set[str] = set()
        for link in links:
            indirect |= _descendants(graph, link)
        reduced[name] = [link for link in links if link not in indirect]
    return reduced


def _shade(fraction: float) -> str:
    red, green, blue = (round(c + (h - c) * fraction) for c, h in zip(COOL, HOT, strict=True))
    return f"#{red:02x}{green:02x}{blue:02x}"


def _quote(text: str) -> str:
    """A DOT string literal; real newlines become DOT's centred line breaks."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if value < 10 else f"{value:.0f}"


def render_dot(structure: BuildStructure, externals: bool = True, all_edges: bool = False) -> str:
    targets = structure.targets
    edges = {n: list(t.links) for n, t in targets.items()} if all_edges else reduced_edges(targets)
    slowest = max((t.compile_seconds or 0.0 for t in targets.values()), default=0.0) or 1.0
    sources = sum(t.sources for t in targets.values())
    compile_total = sum(t.compile_seconds or 0.0 for t in targets.values())
    title = (
        f"{structure.project or 'CMake'} build structure ({structure.build_type or 'default'} build)\n"
        f"{len(targets)} targets, {sources} sources, {compile_total:.1f} s compile; "
        f"shade = compile time; edge = links "
        f"({'all listed' if all_edges else 'direct, implied links omitted'})"
    )
    lines = [
        "digraph build_structure {",
        f"  graph [rankdir=TB, labelloc=t, fontsize=16, fontname=Helvetica, label={_quote(title)}];",
        "  node [fontname=Helvetica, fontsize=11];",
        "  edge [color=gray30, arrowsize=0.7];",
    ]
    for name in sorted(targets):
        target = targets[name]
        fraction = (target.compile_seconds or 0.0) / slowest
        noun = "source" if target.sources == 1 else "sources"
        label = f"{name}\n{target.kind}\n{target.sources} {noun}, {_seconds(target.compile_seconds)} s"
        # White text once the fill is dark enough that black would be hard to read.
        font = "white" if fraction > 0.6 else "black"
        lines.append(
            f"  {_quote(name)} [label={_quote(label)}, shape={NODE_SHAPES[target.kind]}, "
            f'style="{NODE_STYLES[target.kind]}", fillcolor="{_shade(fraction)}", fontcolor={font}];'
        )
    for name in sorted(edges):
        for link in edges[name]:
            lines.append(f"  {_quote(name)} -> {_quote(link)};")
    if externals:
        lines.extend(_external_lines(targets, edges))
    lines.append("}")
    return "\n".join(lines) + "\n"


def _external_lines(targets: dict[str, Target], edges: dict[str, list[str]]) -> list[str]:
    """External libraries, drawn from the highest targets that link them (not again from below)."""
    lines: list[str] = []
    drawn: set[str] = set()
    for name in sorted(targets):
        below = _descendants(edges, name)
        for library in targets[name].externals:
            if any(library in targets[other].externals for other in below if other in targets):
                continue
            node = f"external:{library}"
            if node not in drawn:
                drawn.add(node)
                style = "shape=plaintext, fontcolor=gray35, fontsize=9"
                lines.append(f"  {_quote(node)} [label={_quote(library)}, {style}];")
            lines.append(f"  {_quote(name)} -> {_quote(node)} [style=dashed, color=gray60];")
    return lines


def render_summary(structure: BuildStructure) -> str:
    """A fixed-width table, most expensive targets first, with totals and notes."""
    header = ("Target", "Kind", "Sources", "Compile s", "Link s", "Links (as listed by CMake)")
    rows = [
        (
            t.name,
            t.kind,
            str(t.sources),
            _seconds(t.compile_seconds),
            _seconds(t.link_seconds),
            ", ".join(t.links + [f"[{e}]" for e in t.externals]) or "-",
        )
        for t in sorted(structure.targets.values(), key=lambda t: (-(t.compile_seconds or 0.0), t.name))
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]

    def line(row: tuple[str, ...]) -> str:
        cells = [
            cell.rjust(w) if i in (2, 3, 4) else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=False))
        ]
        return "  ".join([*cells, row[-1]]).rstrip()

    total_sources = sum(t.sources for t in structure.targets.values())
    total_compile = sum(t.compile_seconds or 0.0 for t in structure.targets.values())
    out = [
        f"Build structure of {structure.build_dir} ({structure.project or 'CMake project'})",
        "",
        line(header),
        "  ".join("-" * w for w in widths) + "  " + "-" * len(header[-1]),
        *(line(row) for row in rows),
        "",
        f"{len(rows)} targets, {total_sources} sources, {total_compile:.1f} s compile time in total; "
        "[name] = library from outside this build",
    ]
    out += [f"note: {note}" for note in structure.notes]
    return "\n".join(out) + "\n"


def write_outputs(
    structure: BuildStructure,
    *,
    output_dir: Path,
    name: str,
    formats: tuple[str, ...],
    externals: bool,
    all_edges: bool,
) -> list[Path]:
    """Write DOT, images and summary; everything or nothing (files appear only once all succeeded)."""
    dot_text = render_dot(structure, externals=externals, all_edges=all_edges)
    summary = render_summary(structure)
    output_dir.mkdir(parents=True, exist_ok=True)
    outputs: dict[str, str | bytes] = {f"{name}.dot": dot_text, f"{name}.txt": summary}
    with tempfile.TemporaryDirectory(dir=output_dir, prefix=".graph-") as scratch:
        # Graphviz reads and writes files: the images are drawn in a scratch directory first
        dot_file = atomic_file.write_text(Path(scratch) / f"{name}.dot", dot_text)
        for image in formats:
            drawn = Path(scratch) / f"{name}.{image}"
            status, said = interruption.run_logged(
                ["dot", f"-T{image}", "-o", str(drawn), str(dot_file)],
                Path.cwd(),
                os.environ,
                Path(scratch) / f"{name}.{image}.log",
            )
            if status != 0:
                last = [line for line in said if line.strip()][-1:]
                raise ToolError(f"Graphviz dot failed to draw {image}: {last}")
            outputs[drawn.name] = drawn.read_bytes()
    written = []
    for file_name, content in sorted(outputs.items()):
        target = output_dir / file_name
        if isinstance(content, bytes):
            written.append(atomic_file.write_bytes(target, content))
        else:
            written.append(atomic_file.write_text(target, content))
    return written


def run(args: argparse.Namespace) -> int:
    component(args.name, "--name")  # a file-name stem: '../x' would write outside --output-dir
    formats = tuple(dict.fromkeys(f.strip() for f in args.formats.split(",") if f.strip()))
    unknown = [f for f in formats if f not in (*IMAGE_FORMATS, "dot")]
    if unknown:
        raise ToolError(f"unknown --formats {', '.join(unknown)}: use a comma list of dot, svg, png")
    images = tuple(f for f in formats if f in IMAGE_FORMATS)
    if args.output_dir is not None:
        inputs.work_dir(args.output_dir, "--output-dir")
    # The input first: a wrong directory is the problem to name even where Graphviz is missing too.
    structure = read_build_structure(args.build_dir)
    if not structure.targets:
        raise ToolError(
            f"{args.build_dir}/build.ninja links no libraries or executables: is it a CMake build?"
        )
    if images and shutil.which("dot") is None:
        raise ToolError(
            "Graphviz `dot` is not on PATH: install it (apt-get install graphviz) or pass --formats dot"
        )
    written = write_outputs(
        structure,
        output_dir=args.output_dir or args.build_dir / "build-structure",
        name=args.name,
        formats=images,
        externals=not args.no_externals,
        all_edges=args.all_edges,
    )
    print(render_summary(structure), end="")
    print("wrote " + ", ".join(str(path) for path in written))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "graph",
        help="draw the libraries/executables of a CMake+Ninja build dir and their link dependencies",
        description=(
            "Read a configured CMake + Ninja build directory (build.ninja, compile_commands.json, "
            "CMakeCache.txt, and .ninja_log once built) and extract every library and executable, the "
            "number of sources and the compile time of each, and which targets link which. Writes "
            "NAME.dot, NAME.svg and NAME.png (Graphviz dot) and NAME.txt (summary table, also printed) "
            "into --output-dir. The picture shades targets by compile time and leaves out links implied "
            "by a longer path (use --all-edges to draw every link CMake lists)."
        ),
    )
    parser.add_argument("build_dir", type=Path, help="configured CMake build directory (Ninja generator)")
    parser.add_argument("--output-dir", type=Path, help="where to write (default: BUILD_DIR/build-structure)")
    parser.add_argument("--name", default="build-structure", help="file name stem (default: %(default)s)")
    parser.add_argument(
        "--formats",
        default="svg,png",
        help="images to draw besides DOT, comma list of svg,png (default: %(default)s)",
    )
    parser.add_argument(
        "--no-externals", action="store_true", help="leave out libraries from outside the build"
    )
    parser.add_argument("--all-edges", action="store_true", help="draw every link, not only direct ones")
    parser.set_defaults(func=run)
