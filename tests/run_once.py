"""Test helper: a session fixture's work done once per test run, not once per xdist worker."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def made_once_per_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]
) -> Path:
    """The directory ``name`` that ``make`` fills once per test run, whichever xdist worker asks first; a
    worker asking meanwhile waits for it (pytest-xdist's documented way to share a session fixture's work:
    each worker's temporary directory sits in the run's own)."""
    run_dir = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run_dir = run_dir.parent
    directory = run_dir / name
    with (run_dir / f"{name}.lock").open("a") as lock:  # a lock: nothing is written to it
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (directory / ".made").exists():
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir()
            make(directory)
            (directory / ".made").write_text("")
    return directory
