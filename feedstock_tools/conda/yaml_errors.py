"""PyYAML errors as one line naming the line of the file, not of the text PyYAML was given.

conda-build parses a recipe file after its line selectors (and, for ``meta.yaml``, Jinja) have dropped or
changed lines, so PyYAML's own marks count lines of that text; its message also spans several lines. The
errors are read by attribute (``problem_mark``, ``context_mark``): standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from feedstock_tools.common.errors import InputError
from feedstock_tools.common.inputs import read_text


def yaml_mark(exc: Exception, lines: int) -> tuple[int, int] | None:
    """(0-based line, 1-based column) of a PyYAML error in a text of ``lines`` lines, or None. A problem
    found past the end (an unclosed quote or bracket) is placed where the unfinished thing began. Read by
    attribute (``problem_mark``, ``context_mark``), so this module needs no PyYAML."""
    problem = getattr(exc, "problem_mark", None)
    context = getattr(exc, "context_mark", None)
    mark = context if context is not None and (problem is None or problem.line >= lines) else problem
    if mark is None or lines == 0:
        return None
    return min(mark.line, lines - 1), mark.column + 1


def yaml_problem(exc: Exception) -> str:
    """A PyYAML error's words without its marks (which name lines of the text parsed, not of the file)."""
    parts = [getattr(exc, "context", None), getattr(exc, "problem", None)]
    return "; ".join(str(part) for part in parts if part) or str(exc).splitlines()[0]


def yaml_error(path: Path, exc: Exception, text: str, numbers: Sequence[int] | None = None) -> InputError:
    """A PyYAML error in ``text``, read from ``path``, as one line naming the line of the file; ``numbers``:
    the file's line number of each line of ``text`` when selectors dropped some
    (:func:`~feedstock_tools.conda.selectors.select_numbered_lines`)."""
    lines = text.splitlines()
    numbers = range(1, len(lines) + 1) if numbers is None else numbers
    mark = yaml_mark(exc, len(numbers))
    where = f" line {numbers[mark[0]]} column {mark[1]}" if mark else ""
    return InputError(f"{path}{where}: not valid YAML ({yaml_problem(exc)}); fix that line")


def rendered_yaml_error(meta: Path, exc: Exception, rendered: str) -> InputError:
    """A YAML error in ``meta.yaml`` after its selectors and Jinja: Jinja may add or drop lines, so the
    line of the file is named only when exactly one line of it begins with the rendered line's text;
    the rendered line itself is always quoted."""
    lines = rendered.splitlines()
    mark = yaml_mark(exc, len(lines))
    if mark is None:
        return InputError(f"{meta} renders to invalid YAML ({yaml_problem(exc)}); fix it")
    shown = lines[mark[0]].strip()
    sources = [
        number
        for number, line in enumerate(read_text(meta).splitlines(), start=1)
        if shown and line.strip().startswith(shown)
    ]
    where = f"line {sources[0]}" if len(sources) == 1 else "the line that renders to"
    return InputError(
        f"{meta} {where} {shown!r} is not valid YAML once rendered ({yaml_problem(exc)}, column {mark[1]}); "
        "fix that line"
    )
