"""The stand-in's tools/generate_torch_version.py behaves like 2.13.0's (tests/upstream_standin/README.md):
it imports packaging first and asserts PYTORCH_BUILD_NUMBER whenever PYTORCH_BUILD_VERSION is set."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "upstream_standin" / "tools" / "generate_torch_version.py"
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
    assert version(sys.executable).stdout.strip() == "2.13.0"
    assert "AssertionError" in version(sys.executable, PYTORCH_BUILD_VERSION="2.13.0").stderr
    assert (
        version(sys.executable, PYTORCH_BUILD_VERSION="2.13.0", PYTORCH_BUILD_NUMBER="0").stdout == "2.13.0\n"
    )
    assert (
        version(sys.executable, PYTORCH_BUILD_VERSION="2.13.0", PYTORCH_BUILD_NUMBER="1").stdout == "2.13.0\n"
    )
    two = version(sys.executable, PYTORCH_BUILD_VERSION="2.13.0", PYTORCH_BUILD_NUMBER="2")
    assert two.stdout == "2.13.0.post2\n"


def test_a_python_without_packaging_fails_at_the_import(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    result = version(
        tmp_path / "venv" / "bin" / "python", PYTORCH_BUILD_VERSION="2.13.0", PYTORCH_BUILD_NUMBER="0"
    )
    assert result.returncode != 0
    assert "No module named 'packaging'" in result.stderr
