"""The CMakeCache.txt model against caches written by the real CMake."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from megabuild.cmake_cache import CacheChange, CacheEntry, CMakeCache, CMakeCacheError

needs_cmake = pytest.mark.skipif(
    shutil.which("cmake") is None or shutil.which("ninja") is None, reason="needs cmake and ninja"
)

PROJECT = """\
cmake_minimum_required(VERSION 3.18)
project(cache_probe LANGUAGES C)
set(WITH_SPACE " padded " CACHE STRING "Value that starts and ends with a space")
set("ODD:KEY" "x" CACHE STRING "A key CMake has to quote")
option(USE_THING "A switch" ON)
option(BUILD_OTHER "Another switch" OFF)
set(TARGET_VALUE "${USE_THING}" CACHE INTERNAL "Follows USE_THING on every configure" FORCE)
file(WRITE "${CMAKE_BINARY_DIR}/seen.txt" "USE_THING=${USE_THING};BUILD_OTHER=${BUILD_OTHER}")
add_custom_target(show ALL COMMAND ${CMAKE_COMMAND} -E echo "configured")
"""


@pytest.fixture
def configured(tmp_path: Path) -> Path:
    """A real CMake + Ninja build directory; returns its CMakeCache.txt."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(PROJECT)
    build = tmp_path / "build"
    subprocess.run(
        ["cmake", "-S", str(source), "-B", str(build), "-G", "Ninja", "-DFROM_COMMAND_LINE=abc"],
        check=True,
        capture_output=True,
    )
    return build / "CMakeCache.txt"


@needs_cmake
def test_round_trip_of_a_real_cache_is_byte_exact(configured: Path, tmp_path: Path) -> None:
    cache = CMakeCache.load(configured)
    out = cache.write(tmp_path / "copy.txt")
    assert out.read_bytes() == configured.read_bytes()


@needs_cmake
def test_entries_carry_type_value_and_help(configured: Path) -> None:
    cache = CMakeCache.load(configured)
    assert cache.entries["USE_THING"] == CacheEntry("USE_THING", "BOOL", "ON", "A switch")
    # the single quotes CMake adds around a value with outer spaces are not part of the value
    assert cache.get("WITH_SPACE") == " padded "
    assert cache.entries["ODD:KEY"].value == "x"
    # a -D without type is UNINITIALIZED, as setup.py's -DPython_EXECUTABLE=... entries are
    assert cache.entries["FROM_COMMAND_LINE"].type == "UNINITIALIZED"
    assert cache.entries["CMAKE_GENERATOR"].type == "INTERNAL"
    keys = list(cache.entries)
    assert keys.index("USE_THING") < keys.index("CMAKE_GENERATOR")  # file order is kept
    assert cache.get("NOT_THERE") is None
    assert cache.get("NOT_THERE", "fallback") == "fallback"


@needs_cmake
def test_cmake_reads_back_edits_made_through_the_model(configured: Path) -> None:
    cache = CMakeCache.load(configured)
    changes = [cache.set("USE_THING", "OFF")]
    assert changes[0] == CacheChange("USE_THING", "ON", "OFF", "BOOL", "BOOL")
    changes += [cache.set("BUILD_OTHER", "ON"), cache.set("WITH_SPACE", " still padded ")]
    changes += [cache.set("BRAND_NEW", "hello", type="STRING"), cache.set("TARGET_VALUE", "stale")]
    cache.write()
    build = configured.parent
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True)  # auto-reconfigure
    after = CMakeCache.load(configured)
    assert (build / "seen.txt").read_text() == "USE_THING=OFF;BUILD_OTHER=ON"
    assert after.get("TARGET_VALUE") == "OFF"
    assert after.get("WITH_SPACE") == " still padded "
    assert after.entries["BRAND_NEW"] == CacheEntry("BRAND_NEW", "STRING", "hello", "")
    # TARGET_VALUE is FORCE-set by the project from USE_THING: CMake did not keep our edit, and we can tell
    assert after.not_kept([c for c in changes if c is not None]) == ["TARGET_VALUE='OFF' (we set 'stale')"]


@needs_cmake
def test_changes_from_names_every_key_with_old_and_new(configured: Path) -> None:
    before = CMakeCache.load(configured)
    after = CMakeCache.load(configured)
    after.set("USE_THING", "OFF")
    after.set("ADDED", "1", type="BOOL")
    removed = after.remove("CMAKE_AR")
    assert [change.key for change in removed] == ["CMAKE_AR", "CMAKE_AR-ADVANCED"]
    changes = {change.key: change for change in after.changes_from(before)}
    assert changes["USE_THING"][:3] == ("USE_THING", "ON", "OFF")
    assert changes["ADDED"][:3] == ("ADDED", None, "1")
    assert changes["CMAKE_AR"].new is None and changes["CMAKE_AR"].old == before.get("CMAKE_AR")
    assert set(changes) == {"USE_THING", "ADDED", "CMAKE_AR", "CMAKE_AR-ADVANCED"}
    assert changes["USE_THING"].describe() == "USE_THING: BOOL='ON' -> BOOL='OFF'"
    assert before.changes_from(CMakeCache.load(configured)) == []


def test_setting_the_same_value_is_no_change() -> None:
    cache = CMakeCache.parse("//help\nA:STRING=1\n")
    assert cache.set("A", "1") is None
    assert cache.render() == "//help\nA:STRING=1\n"


def test_edited_entry_keeps_its_help_and_place() -> None:
    text = "# banner\n\n//first line\n//second line\nA:PATH=/old\n\nB:BOOL=ON\n"
    cache = CMakeCache.parse(text)
    cache.set("A", "/new")
    assert cache.render() == "# banner\n\n//first line\n//second line\nA:PATH=/new\n\nB:BOOL=ON\n"
    assert cache.entries["A"].help == "first line\nsecond line"


def test_new_entries_go_to_their_section() -> None:
    text = (
        "########################\n# EXTERNAL cache entries\n########################\n\nA:BOOL=ON\n\n"
        "########################\n# INTERNAL cache entries\n########################\n\nI:INTERNAL=1\n"
    )
    cache = CMakeCache.parse(text)
    cache.set("NEW_EXTERNAL", "x", type="STRING")
    cache.set("NEW_INTERNAL", "y", type="INTERNAL")
    lines = cache.render().splitlines()
    assert lines.index("NEW_EXTERNAL:STRING=x") < lines.index("# INTERNAL cache entries")
    assert lines[-1] == "NEW_INTERNAL:INTERNAL=y"


def test_remove_drops_help_and_property_entries() -> None:
    cache = CMakeCache.parse("//help of A\nA:STRING=1\nB:STRING=2\nA-ADVANCED:INTERNAL=1\n")
    cache.remove("A")
    assert cache.render() == "B:STRING=2\n"
    assert cache.remove("A") == []


def test_malformed_entry_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "CMakeCache.txt"
    path.write_text("# comment\nGOOD:BOOL=ON\nthis line is not an entry\n")
    with pytest.raises(CMakeCacheError) as info:
        CMakeCache.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}:3: malformed cache entry")
    assert "\n" not in message


def test_unknown_type_and_duplicate_key_are_errors() -> None:
    with pytest.raises(CMakeCacheError, match=r"<CMakeCache.txt>:1: unknown cache type 'NUMBER'"):
        CMakeCache.parse("A:NUMBER=1\n")
    with pytest.raises(CMakeCacheError, match=r":2: cache entry A appears twice"):
        CMakeCache.parse("A:BOOL=ON\nA:BOOL=OFF\n")


def test_invalid_edits_are_refused() -> None:
    cache = CMakeCache.parse("A:STRING=1\n")
    with pytest.raises(CMakeCacheError, match="without a type"):
        cache.set("NEW", "1")
    with pytest.raises(CMakeCacheError, match="not a CMake cache type"):
        cache.set("A", "1", type="TEXT")
    with pytest.raises(CMakeCacheError, match="line break"):
        cache.set("A", "1\n2")


def test_missing_file_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(CMakeCacheError, match="no CMake cache there"):
        CMakeCache.load(tmp_path / "CMakeCache.txt")


def test_write_is_atomic_when_rendering_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "CMakeCache.txt"
    path.write_text("A:STRING=1\n")
    cache = CMakeCache.load(path)
    cache.set("A", "2")

    def failing_render() -> str:
        raise OSError("disk full")

    monkeypatch.setattr(cache, "render", failing_render)
    with pytest.raises(OSError, match="disk full"):
        cache.write()
    assert path.read_text() == "A:STRING=1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["CMakeCache.txt"]  # no temporary left behind
