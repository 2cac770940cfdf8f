"""Test helper: the bump's CI inputs (the fixture sets cut from real wheels in tests/data/bump, the 2.13.0
file lists in tests/data) and a scratch copy of the feedstock to bump.

The release a test bumps to is the fixture sets' own: the lowest one newer than the recipe's version, so the
tests follow the recipe wherever main is (2.13.0 -> 2.14.1; a recipe at 2.14.1 would be bumped to 2.15.0).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.maintainer.version_compare import version_numbers
from feedstock_tools.release import recipe_edit, wheel_source

DATA = Path(__file__).resolve().parent / "data"
FIXTURES = DATA / "bump"
PINNING = REPO_ROOT.parent / "shared" / "data" / "conda-forge-pinning"
# A syntactically valid sha256 that is no tarball's: the digest of this sentence. TEST VALUE ONLY.
TEST_ONLY_SHA256 = hashlib.sha256(b"TEST VALUE: not the sha256 of any PyTorch release tarball").hexdigest()
# What the bump reads and writes: the recipes, the CI files, the patch evidence, the anchor-parity document.
FEEDSTOCK = (
    "recipe",
    "recipe-v1",
    ".ci_support",
    "conda-forge.yml",
    "templates",
    ".github",
    ".scripts",
    ".circleci",
    "build-locally.py",
    "tests/patch_fixtures",
    "docs/reference/anchor-parity.md",
)


def recipe_version(root: Path = REPO_ROOT) -> str:
    return recipe_edit.read_version((root / recipe_edit.META).read_text()).version


def fixture_versions() -> list[str]:
    """The releases the fixture sets were cut from (their wheels' names), oldest first."""
    names = [wheel_source.fixture_wheel_name(p) for p in FIXTURES.glob(f"*{wheel_source.FILES_SUFFIX}")]
    return sorted({name.split("-")[1] for name in names if name}, key=version_numbers)


def next_release(current: str | None = None) -> str:
    """The release the bump tests go to: the oldest fixture release newer than the recipe's."""
    current = current or recipe_version()
    newer = [v for v in fixture_versions() if version_numbers(v) > version_numbers(current)]
    assert newer, f"no fixture set in {FIXTURES} is newer than the recipe's {current}: cut the next release's"
    return newer[0]


def copy_feedstock(destination: Path, source: Path = REPO_ROOT, names: Sequence[str] = FEEDSTOCK) -> Path:
    """The feedstock's ``names`` (files and folders, caches left out) copied into a new ``destination``."""
    destination.mkdir(parents=True)
    for name in names:
        path = source / name
        (destination / name).parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            shutil.copytree(path, destination / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif path.is_file():
            shutil.copy2(path, destination / name)
    return destination


def git_tracked(root: Path) -> Path:
    """``root`` as a git work tree with everything committed (git status is clean)."""
    git = ["git", "-C", str(root), "-c", "user.name=Test", "-c", "user.email=test@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "the feedstock before the bump"], check=True)
    return root


def git_status(root: Path) -> list[str]:
    """``git status --porcelain``, every untracked file listed."""
    out = subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=all"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.splitlines()


def add_run_lines(meta: str, lines: list[str]) -> str:
    """The lines, as the bump's rows write them (``- name spec  # [selector]``), at the end of the pytorch
    output's run requirements."""
    at = re.search(r"^  - name: pytorch\n.*?^(?=      run_constrained:)", meta, re.M | re.S)
    assert at, "recipe/meta.yaml: the pytorch output has no run_constrained section"
    block = "".join(f"        {line}\n" for line in lines)
    return meta[: at.end()] + block + meta[at.end() :]
