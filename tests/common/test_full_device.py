"""A full device is named as the cause in one line, whichever command meets it: the CLI dispatcher for an
ENOSPC/EDQUOT of any subcommand (or one below a ToolError), and the commands whose child process failed
with "No space left on device" in its log (the rehearsal's uv, which would otherwise blame PyPI)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from feedstock_tools.__main__ import main
from feedstock_tools.common import full_device
from feedstock_tools.common.errors import ToolError
from feedstock_tools.maintainer import cache_diff
from feedstock_tools.proofs.rehearsal import prefixes


def _full(path: Path) -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


@pytest.mark.parametrize("wrapped", [False, True], ids=["oserror", "below-a-toolerror"])
def test_any_subcommand_meeting_a_full_device_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, wrapped: bool
) -> None:
    target = tmp_path / "work" / "out.txt"
    target.parent.mkdir()

    def writes_to_a_full_device(_args: object) -> int:
        if not wrapped:
            raise _full(target)
        try:
            raise _full(target)
        except OSError as exc:
            raise ToolError("could not write the report") from exc

    monkeypatch.setattr(cache_diff, "run", writes_to_a_full_device)
    assert main(["cache-diff", str(tmp_path), str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: the device holding ")
    assert f"{target.parent} is full (No space left on device writing {target}; " in err
    assert "TMPDIR" in err and "free" in err


def test_another_os_error_is_not_called_a_full_device(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def denied(_args: object) -> int:
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path))

    monkeypatch.setattr(cache_diff, "run", denied)
    with pytest.raises(PermissionError):
        main(["cache-diff", str(tmp_path), str(tmp_path)])


def _fake_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, install_says: str) -> None:
    """``uv`` as a script whose ``venv`` succeeds and whose ``pip install`` fails with what the real one
    printed here (uv 0.13.9)."""
    uv = tmp_path / "uv"
    uv.write_text(f'#!/bin/sh\n[ "$1" = venv ] && exit 0\nprintf \'%s\\n\' "{install_says}" >&2\nexit 2\n')
    uv.chmod(uv.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(prefixes, "uv_binary", lambda: str(uv))


def test_a_venv_template_on_a_full_device_blames_the_device_not_pypi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uv's install fails as it did on a full 2 MiB tmpfs here (its words, paths changed): the log's 'No space
    left on device' is the cause, with the device's directory (the path the log names, before the words)."""
    full = tmp_path / "full-tmp"
    (full / "numpy.libs").mkdir(parents=True)
    _fake_uv(tmp_path, monkeypatch, (
        "error: Failed to install: numpy-2.5.5-cp312-cp312-manylinux_2_28_x86_64.whl (numpy==2.5.5)\n"
        f"  cause: failed to copy file from /root/.cache/uv/archive-v0/K/numpy.libs/x.so to "
        f"{full}/numpy.libs/.tmpgwlY1y: No space left on device (os error 28)"
    ))  # fmt: skip
    log = tmp_path / "setup.log"
    with pytest.raises(ToolError) as raised:
        prefixes.venv_template(tmp_path / "cache", "3.12", log, ("numpy",))
    line = str(raised.value)
    assert "PyPI" not in line and "\n" not in line
    assert line.startswith("making the Python 3.12 venv template (uv pip) failed: ")
    says = f"(its log {log} says 'No space left on device'"
    assert f"the device holding {full / 'numpy.libs'} is full {says}" in line
    assert f"{tmp_path / 'cache'}" in line  # where else it can write: the cache directory


def test_a_venv_template_that_fails_otherwise_still_names_pypi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uv's words for a requirement PyPI cannot meet (as it printed them here for numpy==0.0.1)."""
    _fake_uv(tmp_path, monkeypatch, (
        "error: No solution found when resolving dependencies\n  cause: Because there is no version of "
        "numpy==0.0.1 and you require numpy==0.0.1, we can conclude that your requirements are unsatisfiable."
    ))  # fmt: skip
    with pytest.raises(ToolError, match=r"\(uv pip failed\): PyPI must be reachable"):
        prefixes.venv_template(tmp_path / "cache", "3.12", tmp_path / "setup.log", ("numpy",))


def test_the_full_error_is_found_below_other_errors() -> None:
    full = _full(Path("/x"))
    try:
        try:
            raise full
        except OSError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert full_device.full_error(outer) is full
    assert full_device.full_error(ValueError("no")) is None
