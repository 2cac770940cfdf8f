"""``cache-diff``: entries that differ between two real CMake caches of the upstream stand-in."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cmake_builds import STANDIN, configure, have_toolchain, install_standin_magma
from recipe_matrix import RECIPE_VERSION

from feedstock_tools.__main__ import main
from feedstock_tools.maintainer.cache_diff import cache_changes

pytestmark = pytest.mark.skipif(
    not have_toolchain(), reason="needs cmake, ninja and g++ (.ci/run installs them)"
)


@pytest.fixture(scope="module")
def two_passes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A build configured without MAGMA, its cache saved, then re-configured with MAGMA (pass 3's edit)."""
    root = tmp_path_factory.mktemp("cache-diff")
    magma_home = install_standin_magma(root)
    build = root / "build"
    configure(STANDIN, build, "-DUSE_CUDA=ON", "-DUSE_MAGMA=OFF", magma_home=magma_home)
    first = root / "CMakeCache.pass1.txt"
    shutil.copy(build / "CMakeCache.txt", first)
    configure(
        STANDIN, build, "-DUSE_MAGMA=ON", f"-DTORCH_BUILD_VERSION={RECIPE_VERSION}", magma_home=magma_home
    )
    return first, build, magma_home


def test_two_passes_differ_in_the_edited_options_and_what_they_found(
    two_passes: tuple[Path, Path, Path],
) -> None:
    first, build, magma_home = two_passes
    rows = cache_changes(first, build, internal=False)
    assert {row["key"]: (row["a"], row["b"]) for row in rows} == {
        "USE_MAGMA": ("OFF", "ON"),
        "TORCH_BUILD_VERSION": ("0.0.0", RECIPE_VERSION),
        # Turning MAGMA on makes the configure step look for it: two new cached paths.
        "MAGMA_INCLUDE_DIR": (None, str(magma_home / "include")),
        "MAGMA_LIBRARIES": (None, str(magma_home / "lib" / "libmagma.so")),
    }
    assert cache_changes(first, first) == []


def test_two_build_directories_hide_location_entries(tmp_path: Path, capsys) -> None:
    configure(STANDIN, tmp_path / "a", "-DUSE_NUMPY=OFF")
    configure(STANDIN, tmp_path / "b", "-DUSE_NUMPY=OFF", "-DBUILD_TEST=OFF")
    assert main(["cache-diff", str(tmp_path / "a"), str(tmp_path / "b"), "--no-internal"]) == 0
    table = capsys.readouterr().out
    assert "| BUILD_TEST | changed | BOOL | ON | OFF |" in table
    assert "CMAKE_CACHEFILE_DIR" not in table
    assert main(["cache-diff", str(tmp_path / "a"), str(tmp_path / "b"), "--keep-locations", "--json"]) == 0
    keys = {row["key"] for row in json.loads(capsys.readouterr().out)}
    assert {"BUILD_TEST", "CMAKE_CACHEFILE_DIR"} <= keys
    assert main(["cache-diff", str(tmp_path / "a"), str(tmp_path / "b"), "--exit-code"]) == 2


def test_missing_cache_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    assert main(["cache-diff", str(tmp_path), str(tmp_path)]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "no CMakeCache.txt" in error
