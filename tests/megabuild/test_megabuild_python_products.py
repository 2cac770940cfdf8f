"""Each Python's Python-linked products kept and put back (megabuild/python_products.py), and the .ninja_deps
records that come with them (megabuild/ninja_deps.py), held against the real ninja: a manifest shaped as
CMake's Ninja generator writes one (objects in CMakeFiles/<target>.dir/, ``deps = gcc``), whose compile
command names the Python as a pytorch pass's does."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from megabuild import ninja_deps, python_products
from megabuild.ninja_log import read_log

pytestmark = pytest.mark.skipif(
    not (shutil.which("ninja") and shutil.which("cc")), reason="needs ninja and a C compiler"
)

TARGETS = ("torch_python",)
MANIFEST = """\
rule cc
  command = cc -MD -MF $out.d -DPYTHON=$python -I{include} -c $in -o $out
  deps = gcc
  depfile = $out.d
rule link
  command = cc -shared -o $out $in
build CMakeFiles/torch_python.dir/module.c.o: cc {src}/module.c
  python = {python}
build CMakeFiles/c10.dir/core.c.o: cc {src}/core.c
  python = 0
build lib/libtorch_python.so: link CMakeFiles/torch_python.dir/module.c.o
build lib/libc10.so: link CMakeFiles/c10.dir/core.c.o
"""


def ninja(build: Path, *args: str) -> str:
    """ninja's output, its -d explain lines (stderr) included."""
    run = subprocess.run(["ninja", "-C", str(build), *args], check=True, capture_output=True, text=True)
    return run.stdout + run.stderr


def project(tmp_path: Path) -> tuple[Path, Path]:
    src, build = tmp_path / "src", tmp_path / "build"
    (src / "include").mkdir(parents=True)
    (src / "include" / "python.h").write_text("#define ABI PYTHON\n")
    (src / "module.c").write_text('#include "python.h"\nint abi(void) { return ABI; }\n')
    (src / "core.c").write_text("int core(void) { return 1; }\n")
    build.mkdir()
    return src, build


def configure(src: Path, build: Path, python: str) -> None:
    """What a pytorch pass's reconfigure does to the compile command: it names the new Python."""
    text = MANIFEST.format(src=src, include=src / "include", python=python)
    (build / "build.ninja").write_text(text)


def compiled(build: Path, before: dict) -> list[str]:
    return sorted(o for o, e in read_log(build / ".ninja_log").items() if before.get(o) != e)


def test_a_return_to_a_kept_python_compiles_nothing(tmp_path: Path) -> None:
    src, build = project(tmp_path)
    state = build / "megabuild"
    state.mkdir()
    configure(src, build, "310")
    ninja(build)
    python_products.record_in_place(state, "cpython-310")  # what pass 1 records
    pass1 = read_log(build / ".ninja_log")

    configure(src, build, "312")
    switch = python_products.switch_to(build, state, "cpython-312", TARGETS)
    assert (switch.state, switch.kept) == ("to build", "cpython-310")
    assert not (build / "lib" / "libtorch_python.so").exists()  # moved to the keep, with its object
    ninja(build)
    assert compiled(build, pass1) == ["CMakeFiles/torch_python.dir/module.c.o", "lib/libtorch_python.so"]
    python_products.record_in_place(state, "cpython-312")
    after_312 = read_log(build / ".ninja_log")

    configure(src, build, "310")
    switch = python_products.switch_to(build, state, "cpython-310", TARGETS)
    assert (switch.state, switch.kept, switch.files) == ("restored", "cpython-312", 2)
    restored = read_log(build / ".ninja_log")
    # ninja's own verdict: nothing to do, the object's header dependencies found in the deps log
    assert "no work to do" in ninja(build, "-d", "explain")
    assert read_log(build / ".ninja_log") == restored
    assert restored["lib/libtorch_python.so"] == pass1["lib/libtorch_python.so"]  # pass 1's line, appended
    assert restored != after_312
    assert not (state / python_products.KEEP_DIR / "cpython-310").exists()
    assert (
        state / python_products.KEEP_DIR / "cpython-312" / "files" / "lib" / "libtorch_python.so"
    ).exists()

    # the header changes: ninja sees it through the restored deps record and compiles the object again
    (src / "include" / "python.h").write_text("#define ABI (PYTHON + 1)\n")
    ninja(build)
    assert compiled(build, restored) == ["CMakeFiles/torch_python.dir/module.c.o", "lib/libtorch_python.so"]


def test_without_its_deps_record_a_restored_object_is_compiled_again(tmp_path: Path) -> None:
    """Why the deps records travel with the objects: ninja's verdict on an object with no record."""
    src, build = project(tmp_path)
    configure(src, build, "310")
    ninja(build)
    (build / ".ninja_deps").unlink()
    assert "deps for 'CMakeFiles/torch_python.dir/module.c.o' are missing" in ninja(
        build, "-n", "-d", "explain"
    )


def test_the_deps_log_reads_and_extends_as_ninja_does(tmp_path: Path) -> None:
    src, build = project(tmp_path)
    configure(src, build, "310")
    ninja(build, "CMakeFiles/torch_python.dir/module.c.o")
    log = ninja_deps.read(build / ".ninja_deps")
    record = log.deps["CMakeFiles/torch_python.dir/module.c.o"]
    assert str(src / "include" / "python.h") in record.inputs
    assert record.mtime == os.stat(build / "CMakeFiles/torch_python.dir/module.c.o").st_mtime_ns

    # a record for an output ninja has not built, with one input it has never seen
    mtime = record.mtime + 1
    ninja_deps.append(
        build / ".ninja_deps",
        {"CMakeFiles/c10.dir/core.c.o": ninja_deps.Deps(mtime, (str(src / "core.c"), "/elsewhere/new.h"))},
    )
    shown = ninja(build, "-t", "deps", "CMakeFiles/c10.dir/core.c.o")
    assert f"#deps 2, deps mtime {mtime}" in shown and "/elsewhere/new.h" in shown
    assert ninja_deps.read(build / ".ninja_deps").deps["CMakeFiles/torch_python.dir/module.c.o"] == record

    # an incomplete last record (a write cut short) is dropped before appending, as ninja drops it on load
    with open(build / ".ninja_deps", "ab") as handle:
        handle.write(b"\x10\x00")
    ninja_deps.append(build / ".ninja_deps", {"lib/libc10.so": ninja_deps.Deps(5, ())})
    assert "lib/libc10.so: #deps 0" in ninja(build, "-t", "deps", "lib/libc10.so")


def test_an_unknown_deps_log_version_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / ".ninja_deps"
    path.write_bytes(ninja_deps.SIGNATURE + (9).to_bytes(4, "little"))
    with pytest.raises(
        ninja_deps.NinjaDepsError, match=r"ninja deps log version 9: this driver reads version 4"
    ):
        ninja_deps.read(path)
