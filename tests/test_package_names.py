"""The recipe's package names are written once, in recipe/megabuild/package_files.py, and read from there by
the driver and the tools (issue 37): a string literal that is one of them anywhere else in the code fails
here, naming its file and line, as tests/test_one_way_in_and_out.py does for readers and writers.

Only whole literals count (``"pytorch"``, also inside an f-string's expression); prose that names a package
(an error line, a docstring) is not a second definition. Names of other projects' things that happen to
read alike stay literal: benchmarks/ fetches Debian's source package ``pytorch``, which is Debian's name,
not the recipe's, and is outside the scan.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from megabuild import package_files

REPO = Path(__file__).resolve().parents[1]
THE_ONE = REPO / "recipe" / "megabuild" / "package_files.py"
NAMES = frozenset(
    {
        package_files.TOP_LEVEL,
        *package_files.PACKAGES,
        package_files.PYTORCH_CPU,
        package_files.PYTORCH_GPU,
    }
)


def scanned_files() -> list[Path]:
    """The driver and the tools: the code that knows the recipe's packages."""
    files = [
        *sorted((REPO / "feedstock_tools").rglob("*.py")),
        *sorted((REPO / "recipe" / "megabuild").rglob("*.py")),
        *sorted((REPO / ".scripts").glob("*.py")),
        REPO / "build-locally.py",
    ]
    return [path for path in files if path.is_file() and path != THE_ONE]


def name_literals(path: Path, root: Path = REPO) -> list[str]:
    """``file:line: 'name'`` for each string literal of ``path`` that is exactly a package name."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        f"{path.relative_to(root).as_posix()}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES
    ]


def test_package_names_are_read_from_package_files() -> None:
    second = [hit for path in scanned_files() for hit in name_literals(path)]
    assert not second, (
        "a package name written again; read it from recipe/megabuild/package_files.py "
        "(from megabuild import package_files):\n" + "\n".join(second)
    )


def test_the_scan_sees_a_name_written_again(tmp_path: Path) -> None:
    """The idioms this check replaced, as they were written before it: a comparison, a key, an f-string."""
    source = tmp_path / "second.py"
    source.write_text(
        '"""The pytorch package (prose is no literal)."""\n'
        "def f(step, packages, cuda):\n"
        '    if step.name == "libtorch-cuda-linalg":\n'
        '        return {"libtorch": 1}\n'
        "    return f\"{'pytorch-gpu' if cuda else 'pytorch-cpu'} {packages}\"\n"
    )
    found = [hit.split(": ", 1)[1] for hit in name_literals(source, tmp_path)]
    assert sorted(found) == sorted(["'libtorch-cuda-linalg'", "'libtorch'", "'pytorch-gpu'", "'pytorch-cpu'"])


def test_every_name_is_one_the_recipes_use() -> None:
    """The constants name what both recipes build: each appears in recipe/meta.yaml and recipe-v1."""
    for recipe in (REPO / "recipe" / "meta.yaml", REPO / "recipe-v1" / "recipe.yaml"):
        text = recipe.read_text(encoding="utf-8")
        missing = [name for name in NAMES if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)]
        assert not missing, f"{recipe.relative_to(REPO)} names no package {missing}"
