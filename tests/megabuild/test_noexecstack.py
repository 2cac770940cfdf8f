"""Issue 30 item 3: why the driver links linux builds with ``-Wl,-z,noexecstack``, shown on a real ELF.

oneDNN's ittapi assembly (``ittptmark64.S``) has no ``.note.GNU-stack`` section; GNU ld then marks the shared
library that contains it as needing an executable stack (``GNU_STACK ... RWE``), which glibc >= 2.41 refuses
to ``dlopen`` (conda-forge pytorch-cpu-feedstock issue #350, fix 272621ba). A one-function assembly file
without the note, linked into a shared library by the real gcc with the driver's LDFLAGS words and without
them, shows the marking and that the flag removes it. (Loading it under glibc >= 2.41 needs such a
distribution: the first real job's package test on one settles that part.)
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from megabuild.environment import LINUX_LDFLAGS_ADDED

# x86-64 or aarch64 alike: a function that returns, and no .note.GNU-stack section
ASSEMBLY = "    .text\n    .globl marker\n    .type marker, @function\nmarker:\n    ret\n"

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None or shutil.which("readelf") is None, reason="needs gcc and readelf"
)


def gnu_stack_flags(library: Path) -> str:
    program_headers = subprocess.run(
        ["readelf", "-lW", str(library)], check=True, capture_output=True, text=True
    ).stdout
    (line,) = [line for line in program_headers.splitlines() if "GNU_STACK" in line]
    return line.split()[-2]  # the Flg column, before Align


def shared_library(tmp_path: Path, name: str, ldflags: tuple[str, ...]) -> tuple[Path, str]:
    """The library and the linker's messages."""
    source = tmp_path / "ittptmark_like.S"
    source.write_text(ASSEMBLY)
    library = tmp_path / f"lib{name}.so"
    linked = subprocess.run(
        ["gcc", "-shared", "-fPIC", str(source), "-o", str(library), *ldflags],
        check=True,
        capture_output=True,
        text=True,
    )
    return library, linked.stderr


def test_the_driver_flag_turns_an_executable_stack_into_a_plain_one(tmp_path: Path) -> None:
    assert "-Wl,-z,noexecstack" in LINUX_LDFLAGS_ADDED
    without, warned = shared_library(tmp_path, "without", ())
    assert gnu_stack_flags(without) == "RWE"
    # the warning conda-forge's log showed for ittptmark64.S.o (272621ba's message)
    assert "missing .note.GNU-stack section implies executable stack" in warned
    with_flag, quiet = shared_library(tmp_path, "with", LINUX_LDFLAGS_ADDED)
    assert gnu_stack_flags(with_flag) == "RW"
    assert "executable stack" not in quiet
