"""The two upstream stand-ins and how a rehearsal's work directory is made from one.

* ``setuptools``: ``tests/upstream_standin/``, shaped like PyTorch 2.13.0 (``setup.py``, setuptools' PEP 517
  backend);
* ``skbuild``: ``tests/upstream_standin_skbuild/``, shaped like 2.14+/2.15.0 (scikit-build-core, no
  ``setup.py``). It is an *overlay*: its ``overlay.json`` names the base stand-in and the base's files it
  leaves out; everything else (the C++ sources, the CMake project, the code generator, the version script)
  is the base's, so the two stand-ins share one copy of them.

Which one a rehearsal uses follows the recipe: a recipe whose rendered host requirements name
scikit-build-core builds a scikit-build-core source tree (2.14 and later), any other the setup.py one.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.proofs.rehearsal.prefixes import pip_project

SETUPTOOLS = "setuptools"
SKBUILD = "skbuild"
STANDINS = {
    SETUPTOOLS: REPO_ROOT / "tests" / "upstream_standin",
    SKBUILD: REPO_ROOT / "tests" / "upstream_standin_skbuild",
}
OVERLAY_FILE = "overlay.json"
# the host requirement that marks a recipe for a scikit-build-core source tree
SKBUILD_HOST_NAME = "scikit-build-core"


@dataclass(frozen=True)
class Standin:
    """A stand-in directory, with its base when it is an overlay."""

    root: Path
    base: Path | None = None
    omit: frozenset[str] = frozenset()

    @classmethod
    def load(cls, root: Path) -> Standin:
        manifest = root / OVERLAY_FILE
        if not manifest.is_file():
            return cls(root)
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
            base = (root / data["base"]).resolve()
            omit = frozenset(data.get("omit", ()))
        except (ValueError, KeyError, TypeError) as exc:
            raise ToolError(
                f'{manifest}: not an overlay manifest ({exc}): it needs "base" and "omit"'
            ) from None
        if not base.is_dir():
            raise ToolError(f'{manifest}: base {base} is not a directory: point "base" at a stand-in')
        return cls(root, base, omit)

    @property
    def sources(self) -> Path:
        """Where the shared sources are (third_party/magma among them)."""
        return self.base or self.root

    def copy_to(
        self, destination: Path, ignore: Callable[[str, list[str]], Iterable[str]] | None = None
    ) -> None:
        """The stand-in's source tree at ``destination`` (which must not exist): the base without the
        omitted files, then the overlay's own files over it (the manifest itself left out)."""
        if self.base is None:
            shutil.copytree(self.root, destination, ignore=ignore)
            return
        base, omit = self.base, self.omit

        def ignore_base(directory: str, names: list[str]) -> set[str]:
            ignored = set(ignore(directory, names)) if ignore else set()
            if Path(directory) == base:
                ignored |= omit & set(names)
            return ignored

        shutil.copytree(base, destination, ignore=ignore_base)
        shutil.copytree(
            self.root, destination, dirs_exist_ok=True, ignore=lambda d, names: _overlay_ignored(
                self.root, d, names, ignore)
        )  # fmt: skip


def _overlay_ignored(
    root: Path, directory: str, names: list[str], ignore: Callable[[str, list[str]], Iterable[str]] | None
) -> set[str]:
    ignored = {name for name in names if name == "__pycache__"}
    if Path(directory) == root:
        ignored |= {OVERLAY_FILE, "build"} & set(names)
    return ignored | (set(ignore(directory, names)) if ignore else set())


def resolve(choice: str | Path | None, host_names: Iterable[str]) -> Path:
    """The stand-in directory for ``--standin`` (a name of STANDINS, a directory, or None: follow the
    recipe's host requirements)."""
    if choice is None:
        return STANDINS[SKBUILD if SKBUILD_HOST_NAME in set(host_names) else SETUPTOOLS]
    if str(choice) in STANDINS:
        return STANDINS[str(choice)]
    path = Path(choice)
    if not path.is_dir():
        raise ToolError(
            f"--standin {choice}: neither {' nor '.join(STANDINS)} nor a directory; give one of those names"
        )
    return path


def build_requirements(standin: Standin) -> tuple[str, ...]:
    """``[build-system] requires`` of the stand-in's pyproject.toml (the overlay's when it has one)."""
    pyproject = standin.root / "pyproject.toml"
    if not pyproject.is_file():
        pyproject = standin.sources / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the one list, written on one line in both stand-ins
        match = re.search(r"^requires\s*=\s*(\[.*\])\s*$", text, re.MULTILINE)
        if match is None:
            raise ToolError(f"{pyproject}: no one-line [build-system] requires list") from None
        return tuple(json.loads(match.group(1)))
    return tuple(tomllib.loads(text).get("build-system", {}).get("requires", ()))


def with_backend_requirements(pip_requirements: tuple[str, ...], standin: Standin) -> tuple[str, ...]:
    """``pip_requirements`` plus the stand-in's build requirements whose project the list does not name."""
    named = {pip_project(spec) for spec in pip_requirements}
    extra = [spec for spec in build_requirements(standin) if pip_project(spec) not in named]
    return tuple(sorted((*pip_requirements, *extra)))
