"""Test helpers: configure and build CMake + Ninja projects (the upstream stand-in and its libmagma)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

STANDIN = Path(__file__).parent / "upstream_standin"
TOOLCHAIN = ("cmake", "ninja", "g++")


def have_toolchain(*extra: str) -> bool:
    return all(shutil.which(tool) for tool in (*TOOLCHAIN, *extra))


def configure(source: Path, build: Path, *options: str, magma_home: Path | None = None) -> None:
    """``cmake -G Ninja`` with compile_commands.json, the test's Python, and MAGMA_HOME when given."""
    environ = dict(os.environ)
    environ.pop("MAGMA_HOME", None)
    if magma_home is not None:
        environ["MAGMA_HOME"] = str(magma_home)
    subprocess.run(
        [
            "cmake",
            "-G",
            "Ninja",
            "-S",
            str(source),
            "-B",
            str(build),
            "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
            f"-DPython_EXECUTABLE={sys.executable}",
            *options,
        ],
        check=True,
        capture_output=True,
        env=environ,
    )


def build(directory: Path) -> None:
    subprocess.run(["ninja", "-C", str(directory)], check=True, capture_output=True)


def install_standin_magma(work: Path) -> Path:
    """The stand-in's tiny libmagma built and installed into ``work/magma-prefix`` (a MAGMA_HOME)."""
    prefix = work / "magma-prefix"
    configure(STANDIN / "third_party" / "magma", work / "magma-build", f"-DCMAKE_INSTALL_PREFIX={prefix}")
    build(work / "magma-build")
    subprocess.run(["cmake", "--install", str(work / "magma-build")], check=True, capture_output=True)
    return prefix
