"""The per-user cache's place: $PYTORCH_FEEDSTOCK_CACHE, else the XDG cache home, else ~/.cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from feedstock_tools.common import user_cache


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, Path.home() / ".cache" / "pytorch-feedstock"),
        ({"XDG_CACHE_HOME": ""}, Path.home() / ".cache" / "pytorch-feedstock"),
        ({"XDG_CACHE_HOME": "/x/cache"}, Path("/x/cache/pytorch-feedstock")),
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
