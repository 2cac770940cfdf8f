"""Which kind of source tree this is, read from the tree itself: its ``pyproject.toml`` build backend.

* ``setuptools``: ``setup.py`` with setuptools' PEP 517 backend (or no ``pyproject.toml``): PyTorch up to
  2.13, whose ``setup.py build`` drives CMake (passes.py);
* ``scikit-build-core``: ``build-backend = "scikit_build_core.build"``: PyTorch 2.14 and later, which deleted
  ``setup.py`` (pytorch/pytorch#180247, #180248; the 2.14.1 and 2.15.0 wheels' WHEEL files say
  ``Generator: scikit-build-core``) (skbuild.py).

The driver may run under Python 3.10 (``python >=3.10`` in the recipe's build requirements), which has no
``tomllib``; there the one key is read by :func:`_read_build_backend`, which understands the TOML a
``[build-system]`` table is written in (a basic or literal string on one line), and nothing else.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from megabuild.errors import MegabuildError

SETUPTOOLS = "setuptools"
SCIKIT_BUILD_CORE = "scikit-build-core"
SourceKind = Literal["setuptools", "scikit-build-core"]

_SETUPTOOLS_BACKENDS = ("setuptools.build_meta", "setuptools.build_meta:__legacy__")
_SCIKIT_BUILD_CORE_BACKENDS = ("scikit_build_core.build",)
_TABLE = re.compile(r"^\s*\[\s*([A-Za-z0-9_.\-\" ]+?)\s*\]\s*(?:#.*)?$")
_BACKEND = re.compile(r"""^\s*build-backend\s*=\s*(?:"([^"\\]*)"|'([^']*)')\s*(?:#.*)?$""")


def source_kind(src_dir: Path) -> SourceKind:
    """The kind of ``src_dir``; a tree the driver cannot build is a one-line error naming the file."""
    pyproject = src_dir / "pyproject.toml"
    setup_py = src_dir / "setup.py"
    backend = _build_backend(pyproject) if pyproject.is_file() else None
    if backend in _SCIKIT_BUILD_CORE_BACKENDS:
        return SCIKIT_BUILD_CORE
    if setup_py.is_file() and backend in (None, *_SETUPTOOLS_BACKENDS):
        return SETUPTOOLS
    found = f"build-backend {backend!r}" if backend else "no build-backend"
    raise MegabuildError(
        f"{pyproject}: {found}{'' if setup_py.is_file() else ' and no setup.py'}: the driver builds a "
        f"setup.py tree (build-backend {_SETUPTOOLS_BACKENDS[0]!r} or none) or a scikit-build-core one "
        f"({_SCIKIT_BUILD_CORE_BACKENDS[0]!r}); use a PyTorch source tree of one of those shapes"
    )


def _build_backend(pyproject: Path) -> str | None:
    text = pyproject.read_text(encoding="utf-8")
    try:
        import tomllib  # Python >= 3.11
    except ModuleNotFoundError:
        return _read_build_backend(text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MegabuildError(
            f"{pyproject}: not valid TOML ({exc}): fix the source tree's pyproject.toml"
        ) from None
    backend = data.get("build-system", {}).get("build-backend")
    return backend if isinstance(backend, str) else None


def _read_build_backend(text: str) -> str | None:
    """``build-backend`` of the ``[build-system]`` table, for Pythons without tomllib."""
    table = None
    for line in text.splitlines():
        header = _TABLE.match(line)
        if header:
            table = header.group(1).replace('"', "").replace(" ", "")
            continue
        match = _BACKEND.match(line) if table == "build-system" else None
        if match:
            return match.group(1) if match.group(1) is not None else match.group(2)
    return None
