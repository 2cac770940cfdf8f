"""Checks of the paths a subcommand is given, made before it reads or writes anything.

A path the user named that is missing, empty or of the wrong kind is one :class:`ToolError` line naming
the option, the problem and what to give instead -- never an empty result with exit 0 (issue 22). An
input a subcommand may go without is checked only when it was given.
"""

from __future__ import annotations

from pathlib import Path

from feedstock_tools.common.errors import InputError, ToolError


def input_file(path: Path, option: str, wanted: str, suffixes: tuple[str, ...] = ()) -> Path:
    """An existing, non-empty file (with one of ``suffixes`` when given); ``wanted`` says what to give."""
    if not path.exists():
        raise ToolError(f"{option} {path} does not exist; give {wanted}")
    if path.is_dir():
        raise ToolError(f"{option} {path} is a directory; give {wanted}")
    if suffixes and not path.name.endswith(suffixes):
        raise ToolError(f"{option} {path} is not a {' or '.join(suffixes)} file; give {wanted}")
    if path.stat().st_size == 0:
        raise ToolError(f"{option} {path} is empty; give {wanted}")
    return path


def input_dir(path: Path, option: str, wanted: str, holding: str | None = None) -> Path:
    """An existing directory (holding the file ``holding`` when given)."""
    if not path.exists():
        raise ToolError(f"{option} {path} does not exist; give {wanted}")
    if not path.is_dir():
        raise ToolError(f"{option} {path} is not a directory; give {wanted}")
    if holding is not None and not (path / holding).is_file():
        raise ToolError(f"{option} {path}: no {holding} there; give {wanted}")
    if holding is None and not any(path.iterdir()):
        raise ToolError(f"{option} {path} is empty; give {wanted}")
    return path


def output_file(path: Path, option: str) -> Path:
    """A file this command may write: its directory exists and it is not itself a directory."""
    if path.is_dir():
        raise ToolError(f"{option} {path} is a directory; give a file name in it")
    if not path.parent.is_dir():
        raise ToolError(f"{option} {path}: directory {path.parent} does not exist; create it first")
    return path


def work_dir(path: Path, option: str) -> Path:
    """A directory this command creates or fills: absent, or a directory (never a file)."""
    if path.exists() and not path.is_dir():
        raise ToolError(f"{option} {path} is a file; give a directory (it is created when absent)")
    return path


def read_text(path: Path) -> str:
    """A text input decoded as UTF-8 (newlines made ``\\n``, as ``Path.read_text`` does): a byte that is not
    UTF-8 is one :class:`InputError` naming the file, its line and column, where a bare decode names only an
    offset into the file."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        line = data.count(b"\n", 0, exc.start) + 1
        column = len(data[line_start : exc.start].decode("utf-8", errors="replace")) + 1
        raise InputError(
            f"{path} line {line} column {column}: byte 0x{data[exc.start]:02x} is not UTF-8 ({exc.reason}); "
            "save the file as UTF-8"
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")
