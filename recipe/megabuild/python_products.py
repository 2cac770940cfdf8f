"""Each Python's compiled Python-linked targets, kept while the build directory serves another Python.

A ``pytorch`` pass compiles the Python-linked targets (``torch_python``, ``_C``, ``nnapi_backend``) for its
own Python, in the one build directory every output shares. conda-build does not build the ``pytorch``
outputs in an order the recipe chooses: the variants of one output come from sets of strings, so their
order follows Python's string hashing (``conda_build/variants.py`` 609-655,
``list_of_dicts_to_dict_of_lists``; measured with conda-build 26.7.1 on this recipe, PYTHONHASHSEED 0: 3.12,
3.13, 3.10, 3.11, 3.14; seed 1: 3.10, 3.13, 3.11, 3.12, 3.14). Pass 1 compiled them for its own Python; a
``pytorch`` output of that Python that comes after another Python's compiled them a second time (measured:
39 objects for a minimum of 31 in a CPU build).

So before a ``pytorch`` pass builds, the driver moves the Python-linked products of the Python the build
directory holds (its objects and linked files, with ninja's records of them: their ``.ninja_log`` lines and
their ``.ninja_deps`` records) to ``build/megabuild/python-products/<SOABI>/``, and moves this pass's
Python's products back if an earlier pass left them there. ninja then finds the products it built for this
Python, under the command lines it recorded, with the header dependencies it recorded, and compiles
nothing; the total is pass 1 + the MAGMA library + the Python-linked objects once per other Python, in any
order. Only renames: no product is stored twice.

``build/megabuild/python-products.json`` names the Python whose products are in place; it is cleared before
anything moves and written once a pass has built or restored them, so an interrupted move leaves at worst
products ninja rebuilds, never products of one Python taken for another's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from megabuild import ninja_deps
from megabuild.atomic_file import write_text
from megabuild.log import say
from megabuild.ninja_log import LogEntry, is_linked, is_object, read_log, target_of_linked, target_of_object

RECORD = "python-products.json"  # in build/megabuild/: the Python whose products are in place
KEEP_DIR = "python-products"  # in build/megabuild/: one directory per kept Python
FILES = "files"
LOG_LINES = "ninja_log.txt"
DEPS = "ninja_deps.json"
# Windows' linked files (the rehearsal names its simulated ones so): a DLL, its import library, a .pyd module
_WINDOWS_LINKED = (".dll", ".lib", ".pyd")


@dataclass(frozen=True)
class Switch:
    """What :func:`switch_to` did: ``in place`` (the products were this Python's already), ``restored`` (put
    back from the keep) or ``to build`` (none kept: the pass compiles them)."""

    state: str
    kept: str | None = None  # the Python whose products were moved to the keep, if any
    files: int = 0  # products restored

    @property
    def compiles_nothing(self) -> bool:
        return self.state != "to build"


def key(soabi: str, nodot: str) -> str:
    """The keep's name for one interpreter: its SOABI (``cpython-312-x86_64-linux-gnu``, free-threaded
    ``cpython-314t-...``), which every Python of one build has a different one of."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", soabi or f"py{nodot}")


def in_place(state_dir: Path) -> str | None:
    try:
        return json.loads((state_dir / RECORD).read_text(encoding="utf-8")).get("in_place")
    except (FileNotFoundError, ValueError):
        return None


def record_in_place(state_dir: Path, python: str | None) -> None:
    write_text(state_dir / RECORD, json.dumps({"in_place": python}) + "\n")


def switch_to(build_dir: Path, state_dir: Path, python: str, targets: tuple[str, ...]) -> Switch:
    """Make the Python-linked products in ``build_dir`` those of ``python`` where they were built before."""
    current = in_place(state_dir)
    if current == python:
        return Switch("in place")
    record_in_place(state_dir, None)
    keep = state_dir / KEEP_DIR
    if current is not None:
        moved = _keep(build_dir, keep, current, targets)
        say(f"kept the {moved} Python-linked products of {current} in {keep / current}")
    if not (keep / python).is_dir():
        return Switch("to build", current)
    restored = _restore(build_dir, keep / python)
    say(f"restored the {restored} Python-linked products of {python} from {keep / python}")
    record_in_place(state_dir, python)
    return Switch("restored", current, restored)


def products(build_dir: Path, targets: tuple[str, ...]) -> dict[str, LogEntry]:
    """The outputs of ``targets`` ninja built that are in ``build_dir``: objects by their target directory,
    linked files (and their version links) by CMake's naming (``ninja_log.target_of_linked``)."""
    wanted = set(targets)
    found: dict[str, LogEntry] = {}
    for output, entry in read_log(build_dir / ".ninja_log").items():
        if is_object(output):
            target = target_of_object(output)
        elif is_linked(output) or output.endswith(_WINDOWS_LINKED):
            target = target_of_linked(output)
        else:
            continue
        if target in wanted and os.path.lexists(build_dir / output):
            found[output] = entry
    return found


def _keep(build_dir: Path, keep: Path, python: str, targets: tuple[str, ...]) -> int:
    """Move ``python``'s products into ``keep/python`` (assembled under a temporary name, then renamed)."""
    entries = products(build_dir, targets)
    deps = ninja_deps.read(build_dir / ".ninja_deps").deps
    keep.mkdir(parents=True, exist_ok=True)
    for stale in [keep / python, *keep.glob(".partial-*")]:
        shutil.rmtree(stale, ignore_errors=True)
    partial = keep / f".partial-{python}"
    partial.mkdir()
    lines = "".join(entry.line() for entry in entries.values())
    (partial / LOG_LINES).write_text(lines, encoding="utf-8", errors="surrogateescape")
    kept_deps = {
        out: {"mtime": deps[out].mtime, "inputs": deps[out].inputs} for out in entries if out in deps
    }
    (partial / DEPS).write_text(json.dumps(kept_deps), encoding="utf-8")
    for output in entries:
        destination = partial / FILES / output
        destination.parent.mkdir(parents=True, exist_ok=True)
        os.rename(build_dir / output, destination)  # keeps the time stamp ninja compares
    os.rename(partial, keep / python)
    return len(entries)


def _restore(build_dir: Path, kept: Path) -> int:
    """Move a kept Python's products back and give ninja its records of them again."""
    files = [path for path in (kept / FILES).rglob("*") if path.is_symlink() or path.is_file()]
    for path in files:
        destination = build_dir / path.relative_to(kept / FILES)
        destination.parent.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(destination):
            os.unlink(destination)  # what a later Python's build left under the same name
        os.rename(path, destination)
    with open(build_dir / ".ninja_log", "a", encoding="utf-8", errors="surrogateescape") as log:
        log.write((kept / LOG_LINES).read_text(encoding="utf-8", errors="surrogateescape"))
    records = json.loads((kept / DEPS).read_text(encoding="utf-8"))
    ninja_deps.append(
        build_dir / ".ninja_deps",
        {out: ninja_deps.Deps(r["mtime"], tuple(r["inputs"])) for out, r in records.items()},
    )
    shutil.rmtree(kept)
    return len(files)
