"""One view of a feedstock checkout: where its parts are, and its configurations listed and read once.

A command makes one :class:`Feedstock` of the root it works on and asks it for paths (``.ci_support``,
``conda-forge.yml``, the recipe) and for the configurations, which it lists (the ``.ci_support/*.yaml``
files, in name order) and reads (:func:`feedstock_tools.common.configuration.read_configuration`) the
first time they are asked for. A command that writes the configurations (``render-ci``, the bump) makes a
new view of the tree it wrote. This is the one module that spells those names and lists that folder
(tests/test_one_way_in_and_out.py holds it).

Standard library only: build-locally.py and ``.scripts/`` use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from feedstock_tools.common.configuration import Configuration, read_configuration

CI_SUPPORT = ".ci_support"
FORGE_YML = "conda-forge.yml"
RECIPE = "recipe"


def configuration_files(folder: Path, pattern: str = "*.yaml") -> list[Path]:
    """The configuration files of ``folder`` matching ``pattern``, in name order (none: an empty list)."""
    return sorted(folder.glob(pattern)) if folder.is_dir() else []


@dataclass(frozen=True)
class Feedstock:
    """The feedstock at ``root``: its paths, and its configurations read once per view."""

    root: Path
    _read: dict[Path, Configuration] = field(default_factory=dict, compare=False, repr=False)

    @property
    def ci_support(self) -> Path:
        return self.root / CI_SUPPORT

    @property
    def migrations(self) -> Path:
        return self.ci_support / "migrations"

    @property
    def forge_yml(self) -> Path:
        return self.root / FORGE_YML

    @property
    def recipe_dir(self) -> Path:
        return self.root / RECIPE

    @property
    def meta_yaml(self) -> Path:
        return self.recipe_dir / "meta.yaml"

    def configuration_files(self, pattern: str = "*.yaml") -> list[Path]:
        """``.ci_support``'s files matching ``pattern``, in name order."""
        return configuration_files(self.ci_support, pattern)

    def configuration(self, path: Path) -> Configuration:
        """The configuration of ``path``, read the first time this view is asked for it."""
        if path not in self._read:
            self._read[path] = read_configuration(path)
        return self._read[path]

    def configurations(self, pattern: str = "*.yaml") -> list[Configuration]:
        """Every configuration matching ``pattern``, in name order, each file read once per view."""
        return [self.configuration(path) for path in self.configuration_files(pattern)]
