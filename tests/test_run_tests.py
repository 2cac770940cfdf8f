"""run-tests.py, the README's test command and what .ci/run runs: its set-up steps and its pass-through.

Each run here is the real script in a copy of its own (a temporary checkout with a two-test suite), with
stand-ins of dpkg-query, apt-get and sudo first on PATH where the Debian step is under test.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "run-tests.py"
PINNING = REPO.parent / "shared" / "data" / "conda-forge-pinning"

# dpkg-query: every package installed but those in STANDIN_MISSING; apt-get and sudo record their argv
STANDIN = """#!{python}
import json, os, sys
name = os.path.basename(sys.argv[0])
if name == "sudo":
    os.execvp(sys.argv[2], sys.argv[2:])  # sudo -n COMMAND...
with open(os.environ["STANDIN_LOG"], "a") as log:
    log.write(json.dumps([name, *sys.argv[1:]]) + "\\n")
if name == "dpkg-query":
    missing = os.environ.get("STANDIN_MISSING", "").split()
    print("unknown ok not-installed" if sys.argv[-1] in missing else "install ok installed", end="")
"""


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("run_tests", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git checkout holding run-tests.py, this project's requirements and a suite of two tests."""
    root = tmp_path / "checkout"
    (root / "tests").mkdir(parents=True)
    shutil.copy2(SCRIPT, root)
    for name in ("requirements-dev.txt", "pyproject.toml"):  # the pins; ruff's and pytest's settings
        shutil.copy2(REPO / name, root)
    (root / "tests" / "test_pair.py").write_text(
        "import os\nfrom pathlib import Path\n\n\ndef test_one() -> None:\n    pass\n\n\n"
        'def test_two() -> None:\n    if os.environ.get("WRITE_INTO_TREE"):\n'
        '        Path("left-behind.txt").write_text("x")\n'
    )
    (root / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def run_script(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # not the outer run's PYTEST_XDIST_WORKER and PYTEST_CURRENT_TEST: the inner pytest is a run of its own
    outer = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    environment = {**outer, "CONDA_FORGE_PINNING": str(PINNING), **(env or {})}
    return subprocess.run(
        [sys.executable, str(root / "run-tests.py"), *args],
        cwd=root,
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )


def test_pytest_arguments_pass_through_and_ci_checks_the_tree(checkout: Path) -> None:
    args = ("--no-setup", "--ci", "-q", "-p", "no:cacheprovider", "-n", "0", "-k", "two", "tests")
    result = run_script(checkout, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"run-tests: {sys.executable} -m ruff format --check .\n" in result.stdout
    assert f"run-tests: {sys.executable} -m pytest {' '.join(args[2:])}\n" in result.stdout
    assert "1 passed, 1 deselected" in result.stdout
    left = run_script(checkout, *args, env={"WRITE_INTO_TREE": "1"})
    assert left.returncode == 1
    assert left.stderr.splitlines() == [
        "error: the tests changed the tree (write under pytest's tmp_path, or git-ignore a cache): "
        "?? left-behind.txt"
    ]


def test_missing_debian_packages_are_installed_after_an_update(checkout: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("dpkg-query", "apt-get", "sudo"):
        (bin_dir / name).write_text(STANDIN.format(python=sys.executable))
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "calls.jsonl"
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "STANDIN_LOG": str(log),
        "STANDIN_MISSING": "graphviz patchelf",
    }
    result = run_script(checkout, "--setup-only", env=env)
    assert result.returncode == 0, result.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    packages = list(load_script().DEBIAN_PACKAGES)
    assert calls == [
        *(["dpkg-query", "-W", "-f=${Status}", package] for package in packages),
        ["apt-get", "update"],
        [
            "apt-get",
            "install",
            "-y",
            "--no-install-recommends",
            "graphviz",
            "patchelf",
            "-o",
            "Dpkg::Options::=--force-unsafe-io",
        ],
    ]
    assert "run-tests: Debian packages: installing graphviz patchelf (apt-get update first)" in result.stdout
    assert "run-tests: Python packages: requirements-dev.txt satisfied" in result.stdout
    log.unlink()
    again = run_script(checkout, "--setup-only", env={**env, "STANDIN_MISSING": ""})
    assert f"run-tests: Debian packages: all {len(packages)} present" in again.stdout
    asked = [call[0] for call in map(json.loads, log.read_text().splitlines())]
    assert asked == ["dpkg-query"] * len(packages)


@pytest.mark.parametrize(
    ("args", "added"),
    [
        ([], ["-n", "auto", "--dist", "loadgroup"]),
        (["-k", "linkage", "tests/proofs/wheels/test_linkage.py"], ["-n", "auto", "--dist", "loadgroup"]),
        (["-n", "0"], []),
        (["-n4"], []),
        (["--numprocesses=3"], []),
        (["--dist=load"], []),
        (["-p", "no:xdist"], []),
    ],
)
def test_pytest_runs_on_every_core_unless_told_otherwise(args: list[str], added: list[str]) -> None:
    assert load_script().parallel(args) == added


def test_unmet_requirements_name_the_pin_and_what_is_installed(tmp_path: Path) -> None:
    from importlib import metadata

    script = load_script()
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(
        "# comment\n"
        f"pytest=={metadata.version('pytest')}\n"
        "PyYAML==0.0.1  # another version\n"
        "surely-not-installed-package==1.0\n"
    )
    assert script.unmet_requirements(requirements) == [
        f"PyYAML==0.0.1 ({metadata.version('PyYAML')})",
        "surely-not-installed-package==1.0 (missing)",
    ]


def test_a_missing_pinning_is_one_line(checkout: Path) -> None:
    result = run_script(checkout, "--no-setup", env={"CONDA_FORGE_PINNING": str(checkout / "nowhere")})
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: conda-forge's pinning not found at $CONDA_FORGE_PINNING ({checkout / 'nowhere'}): put "
        "shared/data beside the checkout, or point CONDA_FORGE_PINNING at a conda-forge-pinning directory"
    ]
