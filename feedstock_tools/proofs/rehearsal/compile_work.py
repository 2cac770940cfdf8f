"""The compile-work limit of one job: how many real compiles building it may take, and how many it took.

docs/reference/rehearsal.md ("The compile-work limit") derives it: pass 1 compiles every object once; MAGMA's
linalg pass the objects MAGMA's switch changes; every pytorch Python but pass 1's the Python-dependent objects
of the Python-linked targets; every BLAS after the first its BLAS-dependent objects (those of the
Python-linked targets that depend on the Python too, once per Python). With a compiler cache a compile is a
cache miss, and an object "depends" on a value when its preprocessed input does; the stand-in declares those
sources (tests/upstream_standin/compile_inputs.json). Without a cache (a Windows target) every edge ninja
runs is a compile, so every object of the changed targets counts.

Used by the rehearsal's report and by real-build, which read the same counts from different places.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from feedstock_tools.proofs.rehearsal import ninja_log

COMPILE_INPUTS = "compile_inputs.json"
KINDS = ("python", "blas", "magma")
# the library whose objects MAGMA's switch may change (the linalg pass's target)
LINALG_TARGETS = frozenset({"torch_cuda_linalg"})


@dataclass(frozen=True)
class WorkRatio:
    """Real compiles against the limit, with the terms of the limit."""

    compiled: int  # real compiles over all passes
    pass1: int  # the objects of the first pass 1 (every object of the build)
    linalg: int  # the linalg objects MAGMA's switch changes, if a MAGMA linalg pass ran
    python_bindings: int  # the Python-dependent objects of the Python-linked targets
    extra_pythons: int  # the pytorch outputs' Pythons other than pass 1's
    blas: int = 0  # BLAS-dependent objects outside the Python-linked targets
    blas_python: int = 0  # BLAS-dependent objects of the Python-linked targets that depend on the Python too
    blas_static: int = 0  # BLAS-dependent objects of the Python-linked targets that do not
    extra_blases: int = 0  # the BLAS of the job other than the first one built

    @property
    def per_blas(self) -> int:
        """What one more BLAS compiles: its dependent objects, the Python-dependent ones once per Python."""
        return self.blas + self.blas_static + self.blas_python * (1 + self.extra_pythons)

    @property
    def expected(self) -> int:
        return (
            self.pass1
            + self.linalg
            + self.python_bindings * self.extra_pythons
            + self.extra_blases * self.per_blas
        )

    @property
    def ratio(self) -> float:
        return self.compiled / self.expected if self.expected else float("nan")

    def formula(self) -> str:
        blas = (
            f" + {self.extra_blases} x ({self.blas} + {self.blas_static} + {self.blas_python} x "
            f"{1 + self.extra_pythons})"
            if self.extra_blases
            else ""
        )
        return (
            f"{self.compiled} / ({self.pass1} + {self.linalg} + {self.python_bindings} x "
            f"{self.extra_pythons}{blas}) = {self.ratio:.2f}"
        )


def read_declared(standin_dir: Path) -> dict[str, list[str]]:
    """The stand-in's sources whose preprocessed input each kind of value changes (relative paths)."""
    path = standin_dir / COMPILE_INPUTS
    data = json.loads(path.read_text(encoding="utf-8"))
    return {kind: list(data[kind]) for kind in KINDS}


def dependence(
    sources: Mapping[str, str], src_dir: Path, declared: Mapping[str, Iterable[str]]
) -> dict[str, frozenset[str]]:
    """Per kind, the objects (as .ninja_log names them) whose source is declared dependent; ``sources`` maps
    each object to its source's absolute path (ninja's compile database of a build in ``src_dir``)."""
    result = {}
    for kind in KINDS:
        paths = {os.path.normpath(src_dir / relative) for relative in declared[kind]}
        result[kind] = frozenset(obj for obj, source in sources.items() if os.path.normpath(source) in paths)
    return result


def limit(
    *,
    compiled: int,
    pass1_objects: Collection[str],
    python_linked: Collection[str],
    depends: Mapping[str, Collection[str]] | None,
    magma_ran: bool,
    extra_pythons: int,
    extra_blases: int,
) -> WorkRatio:
    """The limit for a job whose first pass 1 compiled ``pass1_objects``; ``depends`` None where no compiler
    cache served: every object of a changed target compiles again (a further BLAS: all of pass 1, and the
    Python-linked objects once per further Python)."""
    in_python = [o for o in pass1_objects if ninja_log.target_of(o) in python_linked]
    rest = [o for o in pass1_objects if ninja_log.target_of(o) not in python_linked]
    linalg = [o for o in pass1_objects if ninja_log.target_of(o) in LINALG_TARGETS]

    def count(objects: list[str], *kinds: str) -> int:
        if depends is None:
            return len(objects)
        return sum(all(o in depends[kind] for kind in kinds) for o in objects)

    blas_python = count(in_python, "blas", "python")
    return WorkRatio(
        compiled=compiled,
        pass1=len(pass1_objects),
        linalg=count(linalg, "magma") if magma_ran else 0,
        python_bindings=count(in_python, "python"),
        extra_pythons=extra_pythons,
        blas=count(rest, "blas"),
        blas_python=blas_python,
        blas_static=count(in_python, "blas") - blas_python,
        extra_blases=extra_blases,
    )
