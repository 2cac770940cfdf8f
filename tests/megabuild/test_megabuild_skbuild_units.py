"""The driver's choice between source-tree kinds (megabuild/pep517.py), its Python 3.10 reader of the one
pyproject.toml key, the stand-in overlay's assembly, and the STRICT check of what scikit-build-core changed
in the cache (megabuild/skbuild.py) — without building."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from feedstock_tools.common.errors import ToolError
from feedstock_tools.proofs.rehearsal import standins
from megabuild import passes, pep517, skbuild
from megabuild.cmake_cache import CMakeCache
from megabuild.errors import MegabuildError

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11: what the 3.10 reader is held against
STANDIN_PYPROJECTS = [path / "pyproject.toml" for path in standins.STANDINS.values()]


def _tree(tmp_path: Path, pyproject: str | None, setup_py: bool) -> Path:
    if pyproject is not None:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    if setup_py:
        (tmp_path / "setup.py").write_text("")
    return tmp_path


@pytest.mark.parametrize("pyproject", STANDIN_PYPROJECTS, ids=lambda p: p.parent.name)
def test_each_stand_in_is_recognised_by_its_backend(pyproject: Path, tmp_path: Path):
    backend = tomllib.loads(pyproject.read_text())["build-system"]["build-backend"]
    tree = _tree(tmp_path, pyproject.read_text(), setup_py=(pyproject.parent / "setup.py").exists())
    expected = pep517.SCIKIT_BUILD_CORE if backend == "scikit_build_core.build" else pep517.SETUPTOOLS
    assert pep517.source_kind(tree) == expected


@pytest.mark.parametrize(
    "text",
    [
        *(p.read_text() for p in STANDIN_PYPROJECTS),
        "[project]\nbuild-backend = 'not.this'\n[build-system]\nrequires = []\nbuild-backend = 'x.y' # c\n",
        '[ "build-system" ]\nbuild-backend="a.b:c"\n[tool.x]\nbuild-backend = "no"\n',
        "[tool.scikit-build]\nwheel.install-dir = 'torch'\n",
    ],
)
def test_the_python_3_10_reader_agrees_with_tomllib(text: str):
    expected = tomllib.loads(text).get("build-system", {}).get("build-backend")
    assert pep517._read_build_backend(text) == expected


def test_setup_py_without_pyproject_is_a_setuptools_tree(tmp_path: Path):
    assert pep517.source_kind(_tree(tmp_path, None, setup_py=True)) == pep517.SETUPTOOLS


@pytest.mark.parametrize(
    ("pyproject", "setup_py", "says"),
    [
        ('[build-system]\nbuild-backend = "hatchling.build"\n', True, "build-backend 'hatchling.build'"),
        ('[build-system]\nbuild-backend = "setuptools.build_meta"\n', False, "and no setup.py"),
        (None, False, "no build-backend and no setup.py"),
    ],
)
def test_a_tree_of_another_shape_is_one_line_naming_the_file(tmp_path: Path, pyproject, setup_py, says):
    with pytest.raises(MegabuildError) as caught:
        pep517.source_kind(_tree(tmp_path, pyproject, setup_py))
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(tmp_path / "pyproject.toml")) and says in message


def test_the_overlay_shares_the_base_sources_and_replaces_only_its_own(tmp_path: Path):
    overlay = standins.Standin.load(standins.STANDINS[standins.SKBUILD])
    assert overlay.base == standins.STANDINS[standins.SETUPTOOLS].resolve()
    own = {p.relative_to(overlay.root) for p in overlay.root.rglob("*") if p.is_file()}
    shadowed = {p for p in own if (overlay.base / p).exists()}
    # no second copy: the overlay replaces exactly the base files it omits
    assert {str(p) for p in shadowed} <= overlay.omit
    overlay.copy_to(tmp_path / "tree")
    tree = tmp_path / "tree"
    assert not (tree / "setup.py").exists() and not (tree / standins.OVERLAY_FILE).exists()
    assert (tree / "CMakeLists.txt").read_bytes() == (overlay.base / "CMakeLists.txt").read_bytes()
    assert (tree / "version.txt").read_text() == (overlay.root / "version.txt").read_text()
    assert pep517.source_kind(tree) == pep517.SCIKIT_BUILD_CORE


def _cache(path: Path, entries: dict[str, str]) -> CMakeCache:
    path.write_text("".join(f"{key}:STRING={value}\n" for key, value in entries.items()))
    return CMakeCache.load(path)


def _context(strict: bool) -> passes.PassContext:
    """What _check_backend_changes reads of a pass: its options."""
    return SimpleNamespace(options=passes.Options(strict=strict))  # type: ignore[return-value]


BEFORE = {
    "CMAKE_BUILD_TYPE": "Release",
    "USE_MAGMA": "ON",
    "CMAKE_INSTALL_PREFIX": "/tmp/a/wheel/platlib/torch",
    "SKBUILD_PLATLIB_DIR": "/tmp/a/wheel/platlib",
    "Python_ROOT_DIR": "/x/3.10.13",
}


def test_backend_may_change_only_the_wheel_directory_and_interpreter_hints(tmp_path: Path):
    after = BEFORE | {
        "CMAKE_INSTALL_PREFIX": "/tmp/b/wheel/platlib/torch",
        "SKBUILD_PLATLIB_DIR": "/tmp/b/wheel/platlib",
        "Python_ROOT_DIR": "/x/3.11.7",
    }
    skbuild._check_backend_changes(
        _context(strict=True),
        "4 pytorch",
        _cache(tmp_path / "a", BEFORE),
        _cache(tmp_path / "b", after),
    )


@pytest.mark.parametrize("key", ["USE_MAGMA", "CMAKE_BUILD_TYPE"])
def test_any_other_change_fails_a_strict_pass(tmp_path: Path, key: str, capsys):
    after = BEFORE | {key: "OFF" if key == "USE_MAGMA" else "Debug"}
    before_cache, after_cache = _cache(tmp_path / "a", BEFORE), _cache(tmp_path / "b", after)
    with pytest.raises(passes.PassFailed, match=rf"changed 1 cache entry .* first {key}:"):
        skbuild._check_backend_changes(_context(strict=True), "4 pytorch", before_cache, after_cache)
    skbuild._check_backend_changes(_context(strict=False), "4 pytorch", before_cache, after_cache)
    assert key in capsys.readouterr().out  # without STRICT: a warning


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        (["python", "numpy", "setuptools"], standins.SETUPTOOLS),
        (["python", "scikit-build-core >=1"], standins.SKBUILD),
    ],
)
def test_the_rehearsal_picks_the_stand_in_the_recipes_host_calls_for(host: list[str], expected: str):
    names = [spec.split()[0] for spec in host]
    assert standins.resolve(None, names) == standins.STANDINS[expected]
    assert standins.resolve(expected, []) == standins.STANDINS[expected]  # --standin NAME wins


def test_an_unknown_stand_in_is_one_line(tmp_path: Path):
    with pytest.raises(ToolError, match=r"^--standin nope: neither setuptools nor skbuild nor a directory"):
        standins.resolve("nope", [])


def test_a_host_without_scikit_build_core_is_one_line_naming_the_fix(tmp_path: Path):
    """Pass 1 of a scikit-build-core tree copies the host's scikit_build_core; without it: one line."""
    python = tmp_path / "python"
    python.write_text(
        "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'scikit_build_core'\" >&2\nexit 1\n"
    )
    python.chmod(0o755)
    context = SimpleNamespace(env={}, build=SimpleNamespace(build_dir=tmp_path / "build"))
    with pytest.raises(MegabuildError) as caught:
        skbuild._copy_backend(context, python)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "\n" not in message and "No module named 'scikit_build_core'" in message
    assert message.endswith("add it to the host requirements of every output that builds")
    assert not (tmp_path / "build").exists()  # nothing written


def test_a_cross_cache_without_soabi_keeps_library_paths(tmp_path: Path):
    """A cross-compiling FindPython records no SOABI (_Python_INTERPRETER_PROPERTIES "...;64;;;abi3;..."), so
    the old extension suffix is the bare ".so": the retarget must not respell every library path with it
    (MAGMA_LIBRARIES became libmagma.cpython-310-aarch64-linux-gnu.so in the linux-aarch64 CUDA rehearsals).
    """
    from megabuild.python_target import PythonFacts, retarget

    prefix, sp = "/opt/h_env", "/opt/h_env/lib/python3.11/site-packages"
    cache = CMakeCache.parse(
        f"Python_EXECUTABLE:FILEPATH={prefix}/bin/python\n"
        f"Python_NumPy_INCLUDE_DIR:PATH={sp}/numpy/_core/include\n"
        f"_Python_INTERPRETER_PROPERTIES:INTERNAL=Python;3;11;7;64;;;abi3;{prefix}/lib/python3.11;"
        f"{prefix}/lib/python3.11;{sp};{sp}\n"
        f"MAGMA_LIBRARIES:FILEPATH={prefix}/lib/libmagma.so\n"
    )
    sp10 = f"{prefix}/lib/python3.10/site-packages"
    target = PythonFacts(
        executable=f"{prefix}/bin/python", version=(3, 10, 13), soabi="cpython-310-aarch64-linux-gnu",
        ext_suffix=".cpython-310-aarch64-linux-gnu.so", include_dir=f"{prefix}/include/python3.10",
        stdlib=f"{prefix}/lib/python3.10", platstdlib=f"{prefix}/lib/python3.10", purelib=sp10, platlib=sp10,
        numpy_include=f"{sp10}/numpy/_core/include",
    )  # fmt: skip
    changes = {change.key for change in retarget(cache, target)}
    assert cache.get("MAGMA_LIBRARIES") == f"{prefix}/lib/libmagma.so" and "MAGMA_LIBRARIES" not in changes
    assert cache.get("Python_NumPy_INCLUDE_DIR") == f"{sp10}/numpy/_core/include"
