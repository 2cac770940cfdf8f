"""The stand-in's tools/generate_torch_version.py behaves like 2.13.0's (tests/upstream_standin/README.md):
it imports packaging first and asserts PYTORCH_BUILD_NUMBER whenever PYTORCH_BUILD_VERSION is set."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from recipe_matrix import RECIPE_VERSION

SCRIPT = Path(__file__).resolve().parents[2] / "upstream_standin" / "tools" / "generate_torch_version.py"
# The stand-in's own version (upstream's version.txt: the release whose build interface it models), and the
# version conda-build passes as PYTORCH_BUILD_VERSION (the driver exports PKG_VERSION, the recipe's version):
# the two may differ (a version bump alone moves only the second), and the environment wins, as upstream's.
STANDIN_VERSION = (SCRIPT.parents[1] / "version.txt").read_text().strip()
PROBE = "import sys; sys.path.insert(0, sys.argv[1]); from generate_torch_version import get_torch_version; "


def version(python: Path | str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PYTORCH_BUILD")}
    return subprocess.run(
        [str(python), "-c", PROBE + "print(get_torch_version())", str(SCRIPT.parent)],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=False,
    )


def test_build_number_is_required_and_above_one_appends_post() -> None:
    assert version(sys.executable).stdout.strip() == STANDIN_VERSION
    build = {"PYTORCH_BUILD_VERSION": RECIPE_VERSION}
    assert "AssertionError" in version(sys.executable, **build).stderr
    assert version(sys.executable, **build, PYTORCH_BUILD_NUMBER="0").stdout == f"{RECIPE_VERSION}\n"
    assert version(sys.executable, **build, PYTORCH_BUILD_NUMBER="1").stdout == f"{RECIPE_VERSION}\n"
    two = version(sys.executable, **build, PYTORCH_BUILD_NUMBER="2")
    assert two.stdout == f"{RECIPE_VERSION}.post2\n"


def test_the_build_version_wins_over_the_standins_version_txt() -> None:
    other = f"{STANDIN_VERSION}.post7"  # any version packaging parses, other than the stand-in's own
    assert (
        version(sys.executable, PYTORCH_BUILD_VERSION=other, PYTORCH_BUILD_NUMBER="0").stdout == f"{other}\n"
    )


def test_a_python_without_packaging_fails_at_the_import(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    result = version(
        tmp_path / "venv" / "bin" / "python", PYTORCH_BUILD_VERSION=RECIPE_VERSION, PYTORCH_BUILD_NUMBER="0"
    )
    assert result.returncode != 0
    assert "No module named 'packaging'" in result.stderr
