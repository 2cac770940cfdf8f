"""A wheel the local channel repackages (local_channel._wheel_package) is checked as pip checks one before it
installs it: a member that leads outside the package, and a console script that is not ``module:attr`` of
identifiers, refuse the wheel in one line naming it and the member; a good console script is quoted into
its shell script and runs."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from feedstock_tools.common.path_safety import UnsafePath
from feedstock_tools.proofs.builders import local_channel

MINOR = f"{sys.version_info.major}.{sys.version_info.minor}"
SITE = f"lib/python{MINOR}/site-packages/"


def _wheel(directory: Path, members: dict[str, str]) -> Path:
    wheel = directory / "tool-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("tool-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: tool\nVersion: 1.0\n")
        for name, text in members.items():
            archive.writestr(name, text)
    return wheel


@pytest.mark.parametrize(
    "member",
    [
        "../../escaped.txt",
        "tool/../../../escaped.txt",
        "/tmp/escaped.txt",
        "C:/escaped.txt",
        "..\\..\\escaped.txt",
        "tool-1.0.data/scripts/../../../../escaped",
    ],
)
def test_a_member_leading_outside_the_package_refuses_the_wheel(tmp_path: Path, member: str) -> None:
    wheel = _wheel(tmp_path, {"tool/__init__.py": "", member: "outside"})
    with pytest.raises(UnsafePath) as refused:
        local_channel._wheel_package(wheel, MINOR)
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"{wheel.name}: member {member!r} would be written outside")


def test_a_member_that_stays_inside_once_normalised_is_kept_there(tmp_path: Path) -> None:
    """pip normalises before it checks (``tool/./x/../a.py`` is ``tool/a.py``): so does the repackaging."""
    wheel = _wheel(tmp_path, {"tool/./x/../a.py": "A = 1\n"})
    files = local_channel._wheel_package(wheel, MINOR).files
    assert files[SITE + "tool/a.py"] == b"A = 1\n"
    assert all(not name.startswith("../") and "/../" not in name for name in files)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("tool", "os:system('touch /tmp/x')"),
        ("tool", "tool; touch /tmp/x:main"),
        ("tool", "tool:main;touch"),
        ("tool", "tool:main $(touch x)"),
        ("tool", "1tool:main"),
        ("tool", "tool"),
        ("../tool", "tool:main"),
        ("..", "tool:main"),
    ],
)
def test_a_console_script_off_the_entry_point_grammar_refuses_the_wheel(
    tmp_path: Path, name: str, value: str
) -> None:
    wheel = _wheel(
        tmp_path, {"tool-1.0.dist-info/entry_points.txt": f"[console_scripts]\n{name} = {value}\n"}
    )
    with pytest.raises(UnsafePath) as refused:
        local_channel._wheel_package(wheel, MINOR)
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"{wheel.name}: console script {name!r} = {value!r} is not")


def test_a_console_script_runs_its_callable(tmp_path: Path) -> None:
    """``tool = tool.cli:Main.run`` becomes bin/tool, which runs that callable with its arguments under the
    prefix's python."""
    cli = "import sys\nclass Main:\n    @staticmethod\n    def run():\n        print('ran', sys.argv[1:])\n"
    wheel = _wheel(
        tmp_path,
        {
            "tool/__init__.py": "",
            "tool/cli.py": cli,
            "tool-1.0.dist-info/entry_points.txt": "[console_scripts]\ntool = tool.cli:Main.run\n",
        },
    )
    prefix = tmp_path / "prefix"
    for relative, content in local_channel._wheel_package(wheel, MINOR).files.items():
        assert isinstance(content, bytes)
        (prefix / relative).parent.mkdir(parents=True, exist_ok=True)
        (prefix / relative).write_bytes(content)
    (prefix / "bin" / "python").symlink_to(sys.executable)
    environ = {**os.environ, "PYTHONPATH": str(prefix / SITE)}
    run = subprocess.run(
        ["sh", str(prefix / "bin" / "tool"), "a b", "$HOME"],
        env=environ,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (run.returncode, run.stdout) == (0, "ran ['a b', '$HOME']\n"), run.stderr
