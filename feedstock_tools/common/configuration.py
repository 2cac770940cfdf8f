"""One ``.ci_support/*.yaml`` configuration: the one reader of the file and the one view every tool takes.

conda-smithy writes one file per CI job; conda-build reads it (``-m``) with ``parse_config_file``: line
selectors (a generated file has none), then PyYAML's ``BaseLoader``, so every value is text: ``12.9``,
``true`` and ``None`` stay as written (conda-build 26.7.1, ``conda_build/variants.py``). The file is read
here once, by the standard-library reader of the YAML conda-smithy writes
(:mod:`feedstock_tools.common.ci_files`, held to ``BaseLoader`` on every committed file by
tests/common/test_ci_support_files.py), because ``build-locally.py`` and ``.scripts/`` run on a bare Python.

:class:`Configuration` is the file's mapping (key -> list of texts, as conda-build sees it; the renderers
take it as it is) with typed fields for what the tools ask of it: the target platform, the arm variant,
the BLAS (a job may build several: :meth:`Configuration.for_blas` cuts it to one), CUDA (``None`` for a
CPU build) and the Pythons, each a :class:`PythonVersion` with its build string (``3.13.* *_cp313``: the
ABI tag). :func:`cuda_version` is the one reading of ``cuda_compiler_version``
from any variant; :meth:`PythonVersion.parse` is the one reading of a Python spec. The build driver, which
sees a variant only as conda-build's environment variables, has its own (``megabuild.conda_env``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feedstock_tools.common import ci_files
from feedstock_tools.common.errors import InputError
from feedstock_tools.common.inputs import read_text

CUDA_KEY = "cuda_compiler_version"
BLAS_KEY = "blas_impl"
# conda-smithy's cuda_compiler_version of a build without CUDA (conda-forge's pinning spells it "None")
NO_CUDA = "None"
RERENDER = "re-render it with 'python -m feedstock_tools render-ci'"

# "3.13.* *_cp313", "3.10.* *_cpython", "3.12.*", "3.11": the version's major.minor, then the build string
_PYTHON_SPEC = re.compile(r"^\s*(?P<version>\d+\.\d+)(?:\.\S*)?(?:\s+(?P<build>\S+))?\s*$")


@dataclass(frozen=True)
class PythonVersion:
    """One Python of a variant, as conda-forge's pinning writes it: ``3.13.* *_cp313`` is version ``3.13``
    built ``*_cp313`` (python_abi's build string: the ABI tag; ``*_cpython`` before 3.13, where no
    free-threaded build shares the version)."""

    spec: str  # as written
    version: str  # "3.13"
    build: str  # "*_cp313"; "" when the spec names no build

    @classmethod
    def parse(cls, spec: str) -> PythonVersion:
        match = _PYTHON_SPEC.match(spec)
        if match is None:
            raise InputError(f"cannot read a Python version from {spec!r}; expected e.g. '3.11.* *_cpython'")
        return cls(spec, match["version"], match["build"] or "")

    @property
    def nodot(self) -> str:
        """``313``: conda-build's ``CONDA_PY`` and ``py`` selector, the ``py313`` of a build string."""
        return self.version.replace(".", "")

    @property
    def abi(self) -> str:
        """The build string's tail without its glob: ``_cp313``, ``_cpython``."""
        return self.build.lstrip("*")


def version_key(version: str) -> tuple[int, ...]:
    """A configuration's version (a Python's ``3.10``, a CUDA ``12.9``) as numbers, for ordering: ``3.10``
    after ``3.9``."""
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def cuda_version(variant: Mapping[str, Any]) -> str | None:
    """The CUDA version of a variant (a ``.ci_support`` file's lists, or one variant's values); None for
    none."""
    value = variant.get(CUDA_KEY, NO_CUDA)
    if isinstance(value, list | tuple):
        value = value[0] if value else NO_CUDA
    return None if str(value) == NO_CUDA else str(value)


def cuda_versions(spec: Mapping[str, Any]) -> list[str]:
    """Every CUDA version a spec (key -> list of values) lists, in its order; the CPU entry left out."""
    value = spec.get(CUDA_KEY, [])
    return [str(v) for v in (value if isinstance(value, list | tuple) else [value]) if str(v) != NO_CUDA]


@dataclass(frozen=True)
class Configuration(Mapping[str, Any]):
    """A ``.ci_support`` file: its mapping as conda-build reads it, and typed fields the tools ask for."""

    path: Path
    data: Mapping[str, Any]

    # -- the mapping (what the renderers take) --

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def values_of(self, key: str) -> tuple[str, ...]:
        """The texts of ``key`` (a list of texts, or one text); () for an absent key or one of another
        shape (``zip_keys``' groups, ``pin_run_as_build``'s mapping)."""
        value = self.data.get(key)
        if isinstance(value, str):
            return (value,)
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return tuple(value)
        return ()

    def first(self, key: str) -> str | None:
        """The first text of ``key`` (one variant's value of a job-splitting key); None when there is none."""
        values = self.values_of(key)
        return values[0] if values else None

    # -- typed fields --

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def target_platform(self) -> str:
        target = self.first("target_platform")
        if target is None:
            raise InputError(f"{self.path}: no target_platform; {RERENDER}")
        return target

    @property
    def platform(self) -> str:
        """``linux``, ``osx`` or ``win``: the target's operating system."""
        return self.target_platform.split("-", 1)[0]

    @property
    def arm_variant(self) -> str | None:
        """``sbsa`` or ``tegra`` for linux-aarch64 (``arm_variant_type``), else None."""
        return self.first("arm_variant_type")

    @property
    def blases(self) -> tuple[str, ...]:
        """Every BLAS the job builds (``blas_impl``): linux-64 and osx-64 build ``generic`` and ``mkl`` in one
        job, each from its own pass 1 (docs/reference/recipe.md, "What splits CI jobs"); () where the recipe
        uses no BLAS key."""
        return self.values_of(BLAS_KEY)

    def for_blas(self, blas: str) -> Configuration:
        """The same file with ``blas_impl`` cut to ``blas``: the variants of one BLAS (one top-level build
        and its outputs), for a tool that looks at one BLAS at a time."""
        if blas not in self.blases:
            raise InputError(
                f"{self.path}: builds BLAS {', '.join(self.blases) or '(none)'}, not {blas!r}; choose one of "
                "those"
            )
        return Configuration(self.path, {**self.data, BLAS_KEY: [blas]})

    @property
    def cuda(self) -> str | None:
        """The CUDA version (``12.9``); None for a CPU build."""
        return cuda_version(self.data)

    @property
    def pythons(self) -> tuple[PythonVersion, ...]:
        """Every Python the outputs are built for, in the file's order."""
        return tuple(self._python(spec) for spec in self.values_of("python"))

    @property
    def python_min(self) -> str:
        """The pass-1 Python (``python_min``; without it, the oldest of :attr:`pythons`), as ``3.10``."""
        given = self.first("python_min")
        if given is not None:
            return self._python(given).version
        if not self.pythons:
            raise InputError(f"{self.path}: neither python_min nor python; {RERENDER}")
        return min((p.version for p in self.pythons), key=version_key)

    @property
    def docker_image(self) -> str | None:
        return self.first("docker_image")

    def _python(self, spec: str) -> PythonVersion:
        try:
            return PythonVersion.parse(spec)
        except InputError as exc:
            raise InputError(f"{self.path}: {exc}") from None


def parse_configuration(text: str, path: Path) -> Configuration:
    """A configuration's text (what render-ci would write to ``path``) as a :class:`Configuration`."""
    try:
        data = ci_files.parse(text)
    except ci_files.CiFileError as exc:
        raise ci_files.CiFileError(f"{path}: {exc}; {RERENDER}") from None
    return Configuration(path, data)


def read_configuration(path: Path) -> Configuration:
    """The one reader of a ``.ci_support/*.yaml`` file: a broken one is an :class:`InputError` naming the
    file, the problem and the fix."""
    try:
        return parse_configuration(read_text(path), path)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}; give an existing .ci_support file") from None
