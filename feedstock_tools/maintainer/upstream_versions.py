"""The upstream side of the dependency table: versions PyTorch itself uses, and where it sets them.

Two kinds of evidence: files of the source tree (CI install scripts and pin files under
``.ci/docker/``, version files of vendored submodules under ``third_party/``, Python requirement
lists), and the ``Requires-Dist`` lines of a built wheel's ``METADATA``.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from feedstock_tools.maintainer.source_tree import SourceTree


@dataclass(frozen=True)
class FileVersion:
    """A version written in a file: ``pattern``'s groups joined with dots (all matches if ``every``)."""

    path: str  # path in the tree, or a glob
    pattern: str
    every: bool = False
    packed: bool = False  # one integer major*10000 + minor*100 + patch (fmt's FMT_VERSION)

    def find(self, tree: SourceTree) -> tuple[list[str], str] | None:
        paths = tree.glob(self.path) if any(c in self.path for c in "*?[") else [self.path]
        for path in paths:
            text = tree.read_text(path)
            if text is None:
                continue
            matches = list(re.finditer(self.pattern, text, flags=re.MULTILINE | re.DOTALL))
            if not matches:
                continue
            found = [".".join(group for group in match.groups() if group) for match in matches]
            if self.packed:
                found = [f"{int(n) // 10000}.{int(n) // 100 % 100}.{int(n) % 100}" for n in found]
            versions = list(dict.fromkeys(found)) if self.every else found[:1]
            return versions, path
        return None


@dataclass(frozen=True)
class WheelMetadata:
    """What a built wheel declares: ``Requires-Dist`` specs by normalised name, and ``torch/version.py``."""

    label: str
    requires: dict[str, str]
    cuda: str | None


def normalise_name(name: str) -> str:
    """PEP 503 name normalisation: ``typing_extensions`` and ``Typing.Extensions`` are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


_REQUIREMENT = re.compile(
    r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*\(?\s*((?:[<>=!~]=?|===)[^;()]*)?\)?\s*(;.*)?$"
)


def parse_requirement(line: str) -> tuple[str, str, str] | None:
    """``'sympy>=1.13.3; extra == "x"'`` -> ``("sympy", ">=1.13.3", 'extra == "x"')``."""
    match = _REQUIREMENT.match(line.strip())
    if not match:
        return None
    spec = (match.group(3) or "").replace(" ", "") or "*"
    marker = (match.group(4) or "").lstrip(";").strip()
    return normalise_name(match.group(1)), spec, marker


def read_wheel(path: Path) -> WheelMetadata:
    """``METADATA`` (and ``torch/version.py``) from a ``.whl``, a ``METADATA`` file or a ``.dist-info`` dir.

    Requirements behind an ``extra == ...`` marker are optional features, so they are left out.
    """
    version_py: str | None = None
    if path.is_file() and path.suffix == ".whl":
        with zipfile.ZipFile(path) as wheel:
            names = wheel.namelist()
            metadata_names = [n for n in names if n.endswith(".dist-info/METADATA") and n.count("/") == 1]
            if not metadata_names:
                raise ValueError(f"{path} has no *.dist-info/METADATA")
            metadata = wheel.read(metadata_names[0]).decode("utf-8")
            if "torch/version.py" in names:
                version_py = wheel.read("torch/version.py").decode("utf-8")
    elif path.is_dir() and (path / "METADATA").is_file():
        metadata = (path / "METADATA").read_text(encoding="utf-8")
    elif path.is_file():
        metadata = path.read_text(encoding="utf-8")
    else:
        raise ValueError(f"{path} does not exist")
    requires: dict[str, str] = {}
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        parsed = parse_requirement(line.split(":", 1)[1])
        if parsed and "extra" not in parsed[2]:
            requires.setdefault(parsed[0], parsed[1])
    if not requires and "Metadata-Version:" not in metadata:
        raise ValueError(f"{path} is not wheel metadata (no Metadata-Version header)")
    cuda = None
    if version_py:
        match = re.search(r"^cuda(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", version_py, flags=re.MULTILINE)
        cuda = match.group(1) if match else None
    return WheelMetadata(label=str(path), requires=requires, cuda=cuda)


def submodules(tree: SourceTree) -> dict[str, str]:
    """``.gitmodules``: submodule path -> URL (empty when the tree has no ``.gitmodules``)."""
    text = tree.read_text(".gitmodules") or ""
    paths = re.findall(r"^\s*path\s*=\s*(\S+)", text, flags=re.MULTILINE)
    urls = re.findall(r"^\s*url\s*=\s*(\S+)", text, flags=re.MULTILINE)
    return dict(zip(paths, urls, strict=False))


# Files that list Python requirements, in the order the table trusts them: what the package declares,
# then what the build needs, then what developers and CI install.
REQUIREMENT_FILES: tuple[str, ...] = (
    "pyproject.toml",
    "requirements-build.txt",
    "requirements.txt",
    ".ci/docker/requirements-ci.txt",
)


def tree_requirement(tree: SourceTree, python_name: str) -> tuple[list[str], str] | None:
    """The specs for ``python_name`` in the first requirement file naming it, and that file.

    A file may name a package several times (per-Python CI pins, build and dev bounds); all its
    distinct specs are returned, in file order.
    """
    wanted = normalise_name(python_name)
    for path in REQUIREMENT_FILES:
        text = tree.read_text(path)
        if text is None:
            continue
        candidates = _toml_strings(text) if path.endswith(".toml") else _requirement_lines(text)
        specs = [
            parsed[1]
            for parsed in map(parse_requirement, candidates)
            if parsed is not None and parsed[0] == wanted
        ]
        if specs:
            return list(dict.fromkeys(specs)), path
    return None


def _requirement_lines(text: str) -> list[str]:
    return [line.split("#", 1)[0] for line in text.splitlines() if line.split("#", 1)[0].strip()]


def _toml_strings(text: str) -> list[str]:
    """Quoted strings of a pyproject.toml's required-dependency arrays (not optional extras)."""
    strings: list[str] = []
    section = ""
    for line in text.splitlines():
        stripped = line.split("#", 1)[0].strip()
        if stripped.startswith("["):
            section = stripped
            continue
        if section in ("[build-system]", "[project]", "[dependency-groups]"):
            strings.extend(
                double or single for double, single in re.findall(r"\"([^\"]+)\"|'([^']+)'", stripped)
            )
    return strings
