"""Fixtures shared by several test modules."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from feedstock_tools.common.errors import ToolError
from feedstock_tools.proofs.rehearsal import prefixes
from feedstock_tools.proofs.rehearsal.harness import DEFAULT_WORK_ROOT

# The CPythons of the recipe's Python matrix this project's machines and CI have (3.14 is not installed).
HOST_PYTHONS = ("3.10", "3.11", "3.12", "3.13")
# The rehearsal's own venv cache (``python -m feedstock_tools rehearse`` with the default work root), so the
# templates are made once for the command line and every test.
VENV_CACHE = DEFAULT_WORK_ROOT / ".cache"


@dataclass(frozen=True)
class HostPython:
    """A local CPython and its venv template with numpy, setuptools, wheel (``prefixes.venv_template``)."""

    minor: str
    base: Path  # the interpreter itself (pyenv's), for making further venvs
    venv: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def site_packages(self) -> Path:
        return self.venv / "lib" / f"python{self.minor}" / "site-packages"


@pytest.fixture(scope="session")
def host_pythons(tmp_path_factory: pytest.TempPathFactory) -> dict[str, HostPython]:
    """Minor version -> :class:`HostPython`, for every version in ``HOST_PYTHONS``. A missing interpreter
    fails the tests that need it: they are always installed where this project is tested."""
    missing = [minor for minor in HOST_PYTHONS if prefixes.find_interpreter(minor) is None]
    if missing:
        pytest.fail(
            f"CPython {', '.join(missing)} not found (pyenv's versions/3.X.* or python3.X on PATH): the "
            f"tests need CPython {HOST_PYTHONS[0]} to {HOST_PYTHONS[-1]}; install each with "
            "`pyenv install 3.X`",
            pytrace=False,
        )
    log = tmp_path_factory.mktemp("host-pythons") / "venv-templates.log"
    found: dict[str, HostPython] = {}
    for minor in HOST_PYTHONS:
        try:
            venv = prefixes.venv_template(VENV_CACHE, minor, log)
        except ToolError as exc:
            pytest.fail(str(exc), pytrace=False)
        found[minor] = HostPython(minor, prefixes.find_interpreter(minor), venv)
    return found
