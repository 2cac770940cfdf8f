"""How every command names a ``.ci_support`` configuration: one selector, the same errors everywhere.

``build-locally.py CONFIG``, ``rehearse CONFIG`` and ``render CONFIG`` take any of

* a path to the ``.yaml`` file (``.ci_support/osx_arm64_.yaml``; rehearse and render also take a file
  outside ``.ci_support``),
* the exact name (the file name without ``.yaml``),
* a glob (``'linux_64*cuda*13.0*'``), or
* a unique part of the name (``osx_arm64``).

A glob or part may match several configurations; commands that run one say which before stopping, and
build-locally.py lists them before building them in a row.

conda-smithy names a CPU configuration ``...cuda_compiler_versionNone...``, so ``'linux_64*cuda*'`` would
match the CPU builds through the word ``cuda``. Decision (docs/guides/build-locally.md): a glob or part is
matched against a CPU configuration's name with ``cuda_compiler_versionNone`` read as ``cpu``, unless it
names ``None`` itself: ``'linux_64*cuda*'`` selects the CUDA builds only, ``'linux_64*cpu*'`` the CPU
builds, ``'*versionNone*'`` still works. The exact name and a path are taken as written.

:class:`ConfigFilter` narrows by the fields people think in (platform, CUDA version, BLAS), for
``--list`` and ``--all``; :func:`kept` and :func:`resolve_by_fields` apply it to a folder's
configurations (:mod:`feedstock_tools.common.configuration`: the rehearsal's filters, and the configuration
of a wheel's target in ``wheel-layout``). Standard library only: build-locally.py uses it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from feedstock_tools.common import feedstock
from feedstock_tools.common.configuration import Configuration, read_configuration, version_key
from feedstock_tools.common.errors import ToolError

GLOB_CHARACTERS = "*?["
CPU_MARK = "cuda_compiler_versionNone"
CPU_ALIAS = "cpu"
# Every command names the one listing that works everywhere (stdlib-only, no arguments needed).
LIST_HINT = "list them with './build-locally.py --list' (narrow it with --platform, --cuda, --blas)"


class SelectionError(ToolError):
    """A selector that names no configuration, or several where one is needed."""


def configuration_files(folder: Path) -> list[Path]:
    files = feedstock.configuration_files(folder)
    if not files:
        raise SelectionError(
            f"no configurations in {folder}: render them with 'python -m feedstock_tools render-ci' "
            "(or 'conda smithy rerender')"
        )
    return files


def is_path(selector: str) -> bool:
    """A selector written as a file path (a directory part or the .yaml suffix) rather than a name."""
    return "/" in selector or selector.endswith(".yaml")


def is_glob(selector: str) -> bool:
    return any(char in selector for char in GLOB_CHARACTERS)


def _matching_name(name: str, selector: str) -> str:
    """The name a glob or part is matched against: a CPU build's ``cuda_compiler_versionNone`` reads
    ``cpu`` unless the selector itself names ``None``."""
    return name if "None" in selector else name.replace(CPU_MARK, CPU_ALIAS)


def select(names: Sequence[str], selector: str) -> list[str]:
    """The names ``selector`` chooses: the exact name, else every glob match, else every name holding it."""
    if not selector.strip():
        raise SelectionError(f"an empty configuration name selects nothing; {LIST_HINT}")
    if selector in names:
        return [selector]
    if is_glob(selector):
        matches = [n for n in names if fnmatch.fnmatchcase(_matching_name(n, selector), selector)]
    else:
        matches = [n for n in names if selector in _matching_name(n, selector)]
    if not matches:
        raise SelectionError(f"no configuration matches {selector!r}; {LIST_HINT}")
    return matches


def select_one(names: Sequence[str], selector: str) -> str:
    matches = select(names, selector)
    if len(matches) > 1:
        raise SelectionError(
            f"{selector!r} matches {len(matches)} configurations ({', '.join(matches)}); give more of the "
            "name (build-locally.py builds them all in a row with --match)"
        )
    return matches[0]


def resolve_files(selector: str, folder: Path, outside: bool = False) -> list[Path]:
    """The configuration files ``selector`` chooses in ``folder``; with ``outside`` a path may name a
    ``.yaml`` file anywhere (the rehearsal and render take crafted configurations)."""
    if is_path(selector):
        path = Path(selector)
        if path.is_dir():
            raise SelectionError(f"{selector} is a directory; name one .yaml file in it, or a configuration")
        if not path.is_file():
            raise SelectionError(f"no configuration file {selector}; {LIST_HINT}")
        if path.suffix != ".yaml":
            raise SelectionError(f"{selector} is not a .yaml configuration file; {LIST_HINT}")
        if path.stat().st_size == 0:
            raise SelectionError(
                f"{selector} is empty: re-render it with 'python -m feedstock_tools render-ci'"
            )
        if not outside and path.resolve().parent != folder.resolve():
            raise SelectionError(f"{selector} is not in {folder}; name a configuration there, or {LIST_HINT}")
        return [path]
    files = {path.stem: path for path in configuration_files(folder)}
    return [files[name] for name in select(list(files), selector)]


def resolve_one(selector: str, folder: Path, outside: bool = False) -> Path:
    if is_path(selector):
        return resolve_files(selector, folder, outside)[0]
    files = {path.stem: path for path in configuration_files(folder)}
    return files[select_one(list(files), selector)]


@dataclass(frozen=True)
class ConfigFilter:
    """``--platform``, ``--cuda``, ``--blas``: None keeps all. ``cuda`` takes a version, ``none``/``cpu``
    (the CPU builds) or ``any`` (every CUDA build); ``platform`` takes ``linux-64`` or ``linux_64``;
    ``blas`` keeps the configurations that build that BLAS, among others (one job builds both where a
    platform has both)."""

    platform: str | None = None
    cuda: str | None = None
    blas: str | None = None

    def __bool__(self) -> bool:
        return any(value is not None for value in (self.platform, self.cuda, self.blas))

    def keeps(self, config: Configuration) -> bool:
        if self.platform is not None and config.target_platform != self.platform.replace("_", "-"):
            return False
        if self.blas is not None and self.blas not in config.blases:
            return False
        if self.cuda is None:
            return True
        wanted = self.cuda.lower()
        if wanted in ("none", "cpu"):
            return config.cuda is None
        if wanted == "any":
            return config.cuda is not None
        return config.cuda == self.cuda

    def apply(self, configs: Sequence[Configuration]) -> list[Configuration]:
        """The configurations kept; a value no configuration has is an error naming the values there are."""
        cuda_words = ("none", "cpu", "any")
        platform = self.platform and self.platform.replace("_", "-")
        checks = (
            ("--platform", platform, [c.target_platform for c in configs]),
            ("--blas", self.blas, [blas for c in configs for blas in c.blases]),
            (
                "--cuda",
                self.cuda,
                # versions in numeric order (12.8 before 12.9 before 13.0), whatever order the files come in
                [*cuda_words, *sorted({c.cuda for c in configs if c.cuda is not None}, key=version_key)],
            ),
        )
        for option, value, known in checks:
            if value is not None and value.lower() not in {k.lower() for k in known}:
                choices = ", ".join(dict.fromkeys(known))
                raise SelectionError(f"{option} {value}: no configuration has it; choose one of {choices}")
        kept = [config for config in configs if self.keeps(config)]
        if not kept:
            raise SelectionError(f"no configuration is {self.describe()}; drop one of these options")
        return kept

    def describe(self) -> str:
        named = (("platform", self.platform), ("CUDA", self.cuda), ("BLAS", self.blas))
        return ", ".join(f"{name} {value}" for name, value in named if value is not None)


def configurations(folder: Path) -> list[Configuration]:
    """Every configuration of ``folder``, each file read once."""
    return [read_configuration(path) for path in configuration_files(folder)]


def kept(folder: Path, only: ConfigFilter) -> list[Configuration]:
    """The configurations of ``folder`` that ``only`` keeps (all of them with no filter), by name."""
    every = configurations(folder)
    return only.apply(every) if only else every


def resolve_by_fields(folder: Path, preferred: Sequence[ConfigFilter], choose_with: str) -> Configuration:
    """The one configuration of ``folder`` kept by the first filter of ``preferred`` that keeps any (e.g.
    generic BLAS first, else any BLAS); none or several is a SelectionError naming them and ``choose_with``,
    the option that names one instead."""
    configs = configurations(folder)
    matching: list[Configuration] = []
    for wanted in preferred:
        try:
            matching = wanted.apply(configs)
        except SelectionError:
            continue
        break
    if len(matching) != 1:
        found = ", ".join(config.name for config in matching) or "none"
        described = " or ".join(wanted.describe() for wanted in preferred)
        raise SelectionError(
            f"{len(matching)} configurations in {folder} are {described} ({found}): "
            f"name the one to use with {choose_with}"
        )
    return matching[0]
