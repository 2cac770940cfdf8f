"""Fixtures shared by several test modules."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from feedstock_tools.common import user_cache
from feedstock_tools.common.errors import ToolError
from feedstock_tools.proofs.rehearsal import prefixes

# The CPythons of the recipe's Python matrix this project's machines and CI have (3.14 is not installed).
HOST_PYTHONS = ("3.10", "3.11", "3.12", "3.13")
# The rehearsal's own venv cache (the per-user cache ``python -m feedstock_tools rehearse`` uses by
# default), so the templates are made once for the command line and every test.
VENV_CACHE = user_cache.rehearsal_cache()


# Shared fixtures whose tests may run on any xdist worker: cheap to make again (the venv templates are cached
# on disk), or made once per run for every worker (run_once.made_once_per_run: test_bump.py's bump, whose four
# rehearsals of the bumped copy then spread over the workers).
UNGROUPED = {"host_pythons", "bumped", "worked"}


def shared_fixtures(info: Any, name: str) -> list[Any]:
    """The definitions of ``name`` that this suite makes once per process (module or session scope; pytest's
    own, such as tmp_path_factory, have no baseid)."""
    return [
        d
        for d in info.name2fixturedefs.get(name, ())
        if d.baseid and d.scope in ("module", "session") and name not in UNGROUPED
    ]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``-n 2 --dist loadgroup``, pyproject.toml) a module- or session-scoped fixture is
    made once per worker: every test using one (a rehearsal, the laid-out wheel) goes into an xdist group
    named after it (after the first it is built from, for a chain of them), so one worker makes it once.
    A test marked with a group of its own keeps it."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None or item.get_closest_marker("xdist_group") is not None:
            continue

        heavy = {name: shared_fixtures(info, name) for name in item.fixturenames}
        heavy = {name: definitions for name, definitions in heavy.items() if definitions}
        roots = [name for name, defs in heavy.items() if not any(set(d.argnames) & set(heavy) for d in defs)]
        if roots:
            item.add_marker(pytest.mark.xdist_group(roots[0]))


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
    # xdist workers make the templates in opposite orders: each template has a lock of its own, so on a new
    # machine two are made at once instead of one worker waiting for the other's
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    for minor in HOST_PYTHONS if int(worker or 0) % 2 == 0 else HOST_PYTHONS[::-1]:
        try:
            venv = prefixes.venv_template(VENV_CACHE, minor, log)
        except ToolError as exc:
            pytest.fail(str(exc), pytrace=False)
        found[minor] = HostPython(minor, prefixes.find_interpreter(minor), venv)
    return {minor: found[minor] for minor in HOST_PYTHONS}
