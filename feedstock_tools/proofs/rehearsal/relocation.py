"""conda-build's binary relocation of ELF files before packaging (``build/binary_relocation``, on by default).

conda-build rewrites the RPATH of every new ELF file in ``PREFIX``: ``$ORIGIN`` entries stay, entries inside
the prefix become ``$ORIGIN``-relative, other entries (the build tree) are dropped, then the recipe's
``build/rpaths`` (default ``lib/``) are appended as ``$ORIGIN``-relative entries. Without this,
the ``-Wl,-rpath,$PREFIX/lib`` of conda-forge's LDFLAGS would make packaged libraries look into the
rehearsal's last host prefix.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from feedstock_tools.common.errors import ToolError

ELF_MAGIC = b"\x7fELF"
DEFAULT_RPATHS = ("lib/",)


def is_elf(path: Path) -> bool:
    if path.is_symlink() or not path.is_file():
        return False
    with path.open("rb") as handle:
        return handle.read(4) == ELF_MAGIC


def relocated_rpath(
    entries: list[str], file: Path, prefix: Path, rpaths: tuple[str, ...] = DEFAULT_RPATHS
) -> str:
    """The RPATH conda-build gives ``file`` (inside ``prefix``) for its current ``entries``."""
    origin = file.parent
    relocated: list[str] = []

    def add(entry: str) -> None:
        if entry not in relocated:
            relocated.append(entry)

    for entry in entries:
        if entry.startswith("$ORIGIN"):
            add(entry)
        elif entry.startswith(f"{prefix}/") or entry == str(prefix):
            add("$ORIGIN/" + os.path.relpath(entry, origin))
    for rpath in rpaths:
        add("$ORIGIN/" + os.path.relpath(prefix / rpath, origin))
    return ":".join(relocated)


def relocate(prefix: Path, files: list[str]) -> list[str]:
    """Rewrite the RPATH of the ELF files among ``files`` (relative to ``prefix``); returns those changed."""
    elves = [prefix / rel for rel in files if is_elf(prefix / rel)]
    if not elves:
        return []
    if shutil.which("patchelf") is None:
        raise ToolError(
            "the rehearsal relocates RPATHs like conda-build and needs patchelf: apt-get install patchelf"
        )
    changed: list[str] = []
    for path in elves:
        current = subprocess.run(
            ["patchelf", "--print-rpath", str(path)], check=True, capture_output=True, text=True
        ).stdout.strip()
        entries = [entry for entry in current.split(":") if entry]
        new = relocated_rpath(entries, path, prefix)
        if new != current:
            subprocess.run(["patchelf", "--force-rpath", "--set-rpath", new, str(path)], check=True)
            changed.append(path.relative_to(prefix).as_posix())
    return changed
