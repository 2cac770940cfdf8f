"""What the driver checks of the host prefix and the per-output values a builder hands a pass.

conda-build 26.7.1 does not give an output's build script a host prefix holding only the output's host
packages, nor an ``SP_DIR`` read from the output's Python:

* the files the top-level build (pass 1) added to the host prefix are backed up and copied into every
  output's host prefix before its script runs (``conda_build/build.py`` 2640-2648 and 2788-2796);
  rattler-build packages a staging output's new files into every output that inherits it (measured with
  py-rattler-build 0.73.0: 229 ``lib/python3.10/**/__pycache__/*.pyc`` files in ``libtorch``, written by
  pass 1's Python into a host prefix whose packages carried no ``.pyc``);
* ``SP_DIR`` and ``STDLIB_DIR`` are the first ``lib/python?.*`` directory found in the host prefix, sorted,
  not the output's Python (``conda_build/utils.py`` 995-1010 ``get_stdlib_dir``, called by
  ``environ.py`` 422-437 ``python_vars``); ``PY_VER`` is the variant's Python (same function).

So pass 1 fails when it added files under the host prefix's Python directories; every later pass refuses a
host prefix holding files there that none of its packages installed (their records, ``conda-meta/*.json``:
the package would carry them, or ``SP_DIR`` would name their Python); a ``pytorch`` pass refuses an
``SP_DIR`` or ``PY_VER`` that is not its own Python's. The driver itself runs Python with
``PYTHONDONTWRITEBYTECODE=1`` (environment.py), the usual way such files appear.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from pathlib import Path

from megabuild.conda_env import CondaBuild
from megabuild.errors import MegabuildError
from megabuild.python_target import PythonFacts

BUILD_PY_RESTORE = "conda_build/build.py 2640-2648, 2788-2796"
UTILS_SP_DIR = "conda_build/utils.py 995-1010"


def python_tree_files(build: CondaBuild) -> set[str]:
    """Every file and link below the host prefix's Python directories (``lib/python*/``; ``Lib/`` on
    Windows), relative to the prefix with ``/``."""
    prefix = build.prefix
    roots = [prefix / "Lib"] if build.windows else sorted((prefix / "lib").glob("python*"))
    found: set[str] = set()
    for root in roots:
        if root.is_symlink() or not root.is_dir():
            continue
        for directory, subdirs, names in os.walk(root):
            links = [name for name in subdirs if os.path.islink(os.path.join(directory, name))]
            for name in [*names, *links]:
                found.add(Path(directory, name).relative_to(prefix).as_posix())
    return found


def check_pass1_added_none(build: CondaBuild, added: Collection[str]) -> None:
    """Pass 1 must leave the host prefix's Python directories as its packages made them."""
    if added:
        first = sorted(added)[0]
        raise MegabuildError(
            f"pass 1 added {len(added)} file(s) to the host prefix's Python directories, first "
            f"{build.prefix / first}: conda-build copies them into every output's host prefix "
            f"({BUILD_PY_RESTORE}), where they make SP_DIR name this Python ({UTILS_SP_DIR}), and "
            "rattler-build packages them into every output; find what wrote them (a Python run without "
            "the .pyc files of its packages writes __pycache__) and keep the build from writing into $PREFIX"
        )


def owned_files(build: CondaBuild) -> set[str] | None:
    """The files the host prefix's installed packages list (``conda-meta/*.json`` ``files``, which conda and
    rattler write alike); None when the prefix holds no package record (not made by an installer: nothing to
    judge by)."""
    records = sorted((build.prefix / "conda-meta").glob("*.json"))
    if not records:
        return None
    owned: set[str] = set()
    for record in records:
        try:
            files = json.loads(record.read_text(encoding="utf-8")).get("files", [])
        except (OSError, ValueError) as exc:
            raise MegabuildError(f"{record} is no package record ({exc}): a damaged host prefix") from None
        owned.update(str(path).replace("\\", "/") for path in files)
    return owned


def check_no_foreign_python_files(build: CondaBuild) -> None:
    """An output's host prefix must hold under its Python directories only what its packages installed:
    anything else a builder copied in (conda-build: the top-level build's files) would be packaged by
    rattler-build, or name SP_DIR under conda-build."""
    owned = owned_files(build)
    if owned is None:
        return
    foreign = sorted(python_tree_files(build) - owned)
    if foreign:
        raise MegabuildError(
            f"{build.pkg_name}: the host prefix holds {len(foreign)} file(s) under its Python directories "
            f"that no package of it installed, first {build.prefix / foreign[0]}: the package would carry "
            f"them (rattler-build) or SP_DIR name their Python ({UTILS_SP_DIR}); pass 1 or a tool it ran "
            f"wrote them into the top-level build's host prefix ({BUILD_PY_RESTORE} copies them into every "
            "output's): keep the build from writing into $PREFIX"
        )


def check_output_python(build: CondaBuild, target: PythonFacts) -> None:
    """``PY_VER`` and ``SP_DIR`` must be those of ``$PYTHON``, the Python this output is built for."""
    if build.py_ver and build.py_ver != target.short:
        raise MegabuildError(
            f"PY_VER={build.py_ver} but PYTHON={build.python} is Python {target.short}: the output's "
            "variant and its host Python disagree; check the output's python requirement"
        )
    if build.windows:
        # no version in the path (%PREFIX%\Lib\site-packages): the interpreter's site-packages judges
        expected = Path(target.platlib)
        same = build.sp_dir is not None and _same_path(build.sp_dir, expected)
    else:
        expected = build.prefix / "lib" / Path(target.stdlib).name / "site-packages"
        same = build.sp_dir == expected
    if not same:
        own = expected.parent.name
        others = sorted(p.name for p in (build.prefix / "lib").glob("python?.*") if p.name != own)
        raise MegabuildError(
            f"SP_DIR={build.sp_dir} is not the site-packages of this output's Python {target.short} "
            f"({expected}): conda-build takes SP_DIR from the first lib/python?.* of the host prefix "
            f"({UTILS_SP_DIR}), which holds {', '.join(others) or 'no other'}; remove what put another "
            "Python's directory there (pass 1's files are copied into every output's host prefix)"
        )


def _same_path(a: Path, b: Path) -> bool:
    return os.path.normcase(os.path.normpath(a)) == os.path.normcase(os.path.normpath(b))
