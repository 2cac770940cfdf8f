"""The per-user cache's place: $PYTORCH_FEEDSTOCK_CACHE, else the XDG cache home, else ~/.cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from feedstock_tools.common import user_cache
from feedstock_tools.common.recipe_imports import REPO_ROOT


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, Path.home() / ".cache" / "pytorch-feedstock"),
        ({"XDG_CACHE_HOME": ""}, Path.home() / ".cache" / "pytorch-feedstock"),
        ({"XDG_CACHE_HOME": "/x/cache"}, Path("/x/cache/pytorch-feedstock")),
        ({"XDG_CACHE_HOME": "x/cache"}, Path.home() / ".cache" / "pytorch-feedstock"),
        ({"XDG_CACHE_HOME": "/x/cache", user_cache.CACHE_ENV: "/y/mine"}, Path("/y/mine")),
    ],
)
def test_the_cache_is_where_the_environment_says(environ: dict[str, str], expected: Path) -> None:
    assert user_cache.tool_cache(environ) == expected
    assert user_cache.rehearsal_cache(environ) == expected / "rehearsal"


def test_the_tools_default_to_it_and_not_to_the_checkout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A fresh clone finds what another checkout made: the rehearsal's default cache is the per-user one."""
    from feedstock_tools.proofs.rehearsal.harness import DEFAULT_WORK_ROOT, Rehearsal

    monkeypatch.setenv(user_cache.CACHE_ENV, str(tmp_path))
    config = sorted((DEFAULT_WORK_ROOT.parent / ".ci_support").glob("linux_64*.yaml"))[0]
    assert Rehearsal(config).cache_dir == tmp_path / "rehearsal"


def test_a_relative_cache_home_in_the_environment_is_ignored(tmp_path: Path) -> None:
    """XDG_CACHE_HOME=cache, as a shell exports it, for a command started in another directory: the
    specification's default under HOME, not ./cache of wherever the command ran (a cache per directory)."""
    home, started_in = tmp_path / "home", tmp_path / "somewhere"
    started_in.mkdir(parents=True)
    code = "from feedstock_tools.common import user_cache; print(user_cache.rehearsal_cache())"
    environ = {k: v for k, v in os.environ.items() if k != user_cache.CACHE_ENV}
    environ.update(XDG_CACHE_HOME="cache", HOME=str(home), PYTHONPATH=str(REPO_ROOT))
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=started_in, env=environ, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == str(home / ".cache" / "pytorch-feedstock" / "rehearsal")
