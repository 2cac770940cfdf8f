"""What conda-build tells a build script through its environment (see docs/reference/megabuild.md for the
sources).

On Windows (conda-build 26.x environ.py windows_vars/python_vars, config.py _get_python) the script
also gets ``LIBRARY_PREFIX`` (``%PREFIX%\\Library``, with ``LIBRARY_BIN``/``LIBRARY_LIB``/``LIBRARY_INC``
below it), ``PYTHON`` is ``%PREFIX%\\python.exe``, ``SP_DIR`` ``%PREFIX%\\Lib\\site-packages`` and
``SHLIB_EXT`` ``.dll``.

conda-build runs ``build.sh`` for the top-level recipe and again for every output with ``script: build.sh``,
each time with ``PKG_NAME`` set to the package being built, ``PREFIX`` pointing at that output's host
prefix (a fresh environment at the same path every time), ``SRC_DIR`` at the shared work directory and
every variant key exported under its own name (``blas_impl``, ``cuda_compiler_version``, ...).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from megabuild.errors import MegabuildError

# Variant keys of recipe/conda_build_config.yaml and the global pinning that steer the driver.
VARIANT_KEYS = ("arm_variant_type", "blas_impl", "cuda_compiler_version", "magma_variant", "megabuild")


@dataclass(frozen=True)
class CondaBuild:
    pkg_name: str
    pkg_version: str
    prefix: Path
    build_prefix: Path
    src_dir: Path
    recipe_dir: Path
    python: Path | None  # ${PYTHON}: only set when the output has python in its host requirements
    py_ver: str | None
    sp_dir: Path | None
    cpu_count: int
    shlib_ext: str
    target_platform: str
    build_platform: str
    variant: Mapping[str, str]
    # %LIBRARY_PREFIX% (= %PREFIX%\Library): conda's root of C/C++ files on Windows, None elsewhere
    library_prefix: Path | None = None

    @property
    def windows(self) -> bool:
        """A win-64 target: conda's Windows layout (Library/bin, Library/lib, Lib/site-packages)."""
        return self.target_platform.startswith("win-")

    @property
    def cuda_version(self) -> str | None:
        """ "12.9", "13.0", or None for CPU builds (conda-forge spells that "None")."""
        value = self.variant.get("cuda_compiler_version", "None")
        return None if value in ("", "None") else value

    @property
    def build_dir(self) -> Path:
        """PyTorch's CMake build tree (env.py's BUILD_DIR = "build", relative to the source root)."""
        return self.src_dir / "build"

    @property
    def state_dir(self) -> Path:
        """What pass 1 saves for later outputs, inside the work directory that all outputs share."""
        return self.build_dir / "megabuild"

    @classmethod
    def from_environ(cls, env: Mapping[str, str] | None = None) -> CondaBuild:
        env = os.environ if env is None else env

        def need(name: str) -> str:
            value = env.get(name)
            if not value:
                raise MegabuildError(
                    f"environment variable {name} is not set: run recipe/build.sh through conda-build "
                    "(or the rehearsal harness), which sets it"
                )
            return value

        def optional_path(name: str) -> Path | None:
            value = env.get(name)
            return Path(value) if value else None

        pkg_name = need("PKG_NAME")  # first: it names the pass, and a bare run lacks it before anything else
        target_platform = need("target_platform")
        windows = target_platform.startswith("win-")
        if windows and not env.get("LIBRARY_PREFIX"):
            raise MegabuildError(
                f"LIBRARY_PREFIX is not set for this {target_platform} build: conda-build sets it to "
                "%PREFIX%\\Library on Windows; run recipe/bld.bat through conda-build (or the rehearsal "
                "harness)"
            )
        cpu_count = env.get("CPU_COUNT") or str(os.cpu_count() or 1)
        if not cpu_count.isdigit() or int(cpu_count) < 1:
            raise MegabuildError(f"CPU_COUNT={cpu_count!r} is not a positive number: fix it or unset it")
        return cls(
            pkg_name=pkg_name,
            pkg_version=need("PKG_VERSION"),
            prefix=Path(need("PREFIX")),
            build_prefix=Path(need("BUILD_PREFIX")),
            src_dir=Path(need("SRC_DIR")),
            recipe_dir=Path(need("RECIPE_DIR")),
            python=optional_path("PYTHON"),
            py_ver=env.get("PY_VER") or None,
            sp_dir=optional_path("SP_DIR"),
            cpu_count=int(cpu_count),
            # conda-build's get_shlib_ext: .dll on win, .dylib on osx, .so on linux
            shlib_ext=env.get("SHLIB_EXT", ".dll" if windows else ".so"),
            target_platform=target_platform,
            build_platform=env.get("build_platform") or target_platform,
            variant={key: env[key] for key in VARIANT_KEYS if key in env},
            library_prefix=optional_path("LIBRARY_PREFIX") if windows else None,
        )
