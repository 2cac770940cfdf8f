"""Pass 1 settles the build graph: CMake's first reconfigure may rewrite command lines (measured on Debian's
pytorch 2.6.0+dfsg, where it relinked libtorch_cpu and libtorch_python in the first later pass), so the
driver reconfigures until they stop changing before it builds, and checks afterwards that a reconfigure
leaves nothing to rebuild. Later passes that link outside their targets fail under --strict."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from cmake_builds import have_toolchain

from megabuild import ninja_graph
from megabuild.ninja_log import PassWork, target_of_linked
from megabuild.passes import Options, PassFailed, _check_settled, _check_work

DATA = Path(__file__).parents[1] / "data"
REAL_GRAPH = json.loads((DATA / "real_graph_2_6_first_reconfigure.json").read_text())
# A CMake project with the 2.6.0 idiom (its CMakeLists.txt says which): libcore links libm by path on the
# first configure and as -lm afterwards; libbindings links libcore.
IDIOM = DATA / "first_reconfigure_rewrite"
needs_toolchain = pytest.mark.skipif(not have_toolchain("gcc"), reason="needs cmake, ninja and a C compiler")


def link_command(output: str, link_libraries: str) -> str:
    """A link command as CMake's Ninja generator writes it for these libraries (objects left out)."""
    return (
        f"/usr/bin/c++ -fPIC -O2 -shared -Wl,-soname,{output.rsplit('/', 1)[-1]} -o {output} {link_libraries}"
    )


def test_the_real_first_reconfigure_rewrites_the_libtorch_link_lines():
    first = [
        link_command(out, lines["first_configure"]) for out, lines in REAL_GRAPH["link_libraries"].items()
    ]
    later = [link_command(out, lines["reconfigure"]) for out, lines in REAL_GRAPH["link_libraries"].items()]
    assert ninja_graph.changed_outputs(first, later) == [
        "lib/libtorch_cpu.so.2.6.0",
        "lib/libtorch_python.so.2.6.0",
    ]
    assert ninja_graph.changed_outputs(later, later) == []
    for lines in REAL_GRAPH["link_libraries"].values():
        assert "/usr/lib/x86_64-linux-gnu/libfmt.so" in lines["first_configure"].split()
        assert "-lfmt" in lines["reconfigure"].split()


def test_linked_files_are_named_by_their_target():
    assert target_of_linked("lib/libtorch_cpu.so.2.6.0") == "torch_cpu"
    assert target_of_linked("lib/libtorch_python.so") == "torch_python"
    assert target_of_linked("torch/_C.cpython-312-x86_64-linux-gnu.so") == "_C"
    assert target_of_linked("lib/libtorch_cpu.dylib") == "torch_cpu"
    assert target_of_linked("bin/torch_shm_manager") == "torch_shm_manager"
    assert target_of_linked("lib/libfp16.a") == "fp16"


class _Ctx:
    """A test double of the PassContext fields _check_work and _check_settled read."""

    def __init__(self, strict: bool, build_dir: Path | None = None) -> None:
        self.options = Options(strict=strict)
        self.build = SimpleNamespace(build_dir=build_dir, src_dir=build_dir)
        self.env = dict(os.environ, MAX_JOBS="2")


def test_a_relink_of_libtorch_cpu_fails_a_strict_python_pass_and_warns_otherwise(capsys):
    relink = PassWork(
        objects=[], linked=["lib/libtorch_cpu.so.2.6.0", "lib/libtorch_python.so.2.6.0"], other=[]
    )
    expected = ["torch_python", "_C", "nnapi_backend"]
    with pytest.raises(PassFailed, match=r"linked 1 file\(s\) .*first lib/libtorch_cpu.so.2.6.0"):
        _check_work(_Ctx(strict=True), "4 pytorch (py3.11)", relink, expected)
    assert _check_work(_Ctx(strict=False), "4 pytorch (py3.11)", relink, expected) == [
        "lib/libtorch_cpu.so.2.6.0"
    ]
    assert "WARNING" in capsys.readouterr().out
    own = PassWork(objects=[], linked=["lib/libtorch_python.so.2.6.0", "lib/libnnapi_backend.so"], other=[])
    assert _check_work(_Ctx(strict=True), "4 pytorch (py3.11)", own, expected) == []


def _configure(source: Path, build: Path) -> dict[str, str]:
    env = dict(os.environ)
    subprocess.run(
        ["cmake", "-G", "Ninja", "-S", str(source), "-B", str(build)], check=True, capture_output=True
    )
    return env


def _ninja_build(build: Path):
    return lambda: subprocess.run(["ninja", "-C", str(build)], check=True, capture_output=True)


@needs_toolchain
def test_without_settling_a_reconfigure_relinks_the_library(tmp_path):
    env = _configure(IDIOM, tmp_path / "b")
    _ninja_build(tmp_path / "b")()
    # a dry run shows it, a build does it
    relinked = {"libcore.so", "libbindings.so", "libumbrella.so"}
    ninja_graph.reconfigure(tmp_path / "b", env)
    assert set(ninja_graph.would_run(tmp_path / "b", env)) == relinked
    rebuilt = ninja_graph.rebuilt_after_reconfigure(tmp_path / "b", env, _ninja_build(tmp_path / "b"))
    assert set(rebuilt) == relinked
    assert ninja_graph.rebuilt_after_reconfigure(tmp_path / "b", env, _ninja_build(tmp_path / "b")) == []


@needs_toolchain
def test_a_reconfigure_keeps_the_time_stamp_of_sources_cmake_rewrote_unchanged(tmp_path):
    build = tmp_path / "b"
    env = _configure(IDIOM, build)
    ninja_graph.settle(build, env)
    _ninja_build(build)()
    # CMake's own reconfigure: file(WRITE) gives empty.c a new time stamp, so its object is rebuilt
    subprocess.run(["cmake", str(build)], check=True, capture_output=True)
    assert ninja_graph.would_run(build, env) == ["CMakeFiles/umbrella.dir/empty.c.o", "libumbrella.so"]
    _ninja_build(build)()
    ninja_graph.reconfigure(build, env)
    assert ninja_graph.would_run(build, env) == []


@needs_toolchain
def test_pass_1_check_fails_an_unsettled_graph_under_strict_and_warns_otherwise(tmp_path, capsys):
    for name in ("warned", "strict"):
        _configure(IDIOM, tmp_path / name)
        _ninja_build(tmp_path / name)()
    _check_settled(_Ctx(strict=False, build_dir=tmp_path / "warned"))
    assert "WARNING: pass 1 did not settle the build graph" in capsys.readouterr().out
    _check_settled(_Ctx(strict=True, build_dir=tmp_path / "warned"))  # the check rebuilt it: settled now
    with pytest.raises(PassFailed, match=r"did not settle .* rebuilt 3 object"):
        _check_settled(_Ctx(strict=True, build_dir=tmp_path / "strict"))


@needs_toolchain
def test_settling_before_the_build_leaves_nothing_for_a_reconfigure(tmp_path):
    build = tmp_path / "b"
    env = _configure(IDIOM, build)
    settled = ninja_graph.settle(build, env)
    assert settled.rewritten == ["libcore.so"]
    assert settled.reconfigures == 2  # the one that rewrote, the one that confirmed
    _ninja_build(build)()
    assert ninja_graph.rebuilt_after_reconfigure(build, env, _ninja_build(build)) == []


@needs_toolchain
def test_a_graph_that_never_settles_is_an_error(tmp_path):
    build = tmp_path / "b"
    env = _configure(IDIOM, build)
    calls = []

    def reconfigure_with_new_flags(build_dir: Path, environ) -> None:
        # every reconfigure writes another command line, as a configure reading a clock or a counter would
        calls.append(1)
        subprocess.run(
            ["cmake", f"-DCMAKE_C_FLAGS=-DRUN={len(calls)}", str(build_dir)], check=True, capture_output=True
        )

    with pytest.raises(ninja_graph.GraphError, match=r"still changes after 3 reconfigures"):
        ninja_graph.settle(build, env, run_reconfigure=reconfigure_with_new_flags)
    assert len(calls) == ninja_graph.MAX_RECONFIGURES


def test_would_run_names_the_compile_and_link_edges_of_a_dry_run(tmp_path):
    if shutil.which("ninja") is None:
        pytest.skip("needs ninja")
    # edges described as CMake's Ninja generator describes them; the generator edge is not compile work
    (tmp_path / "build.ninja").write_text(
        "rule cp\n  command = cp $in $out\n  description = $desc\n"
        "build gen.c: cp src.c\n  desc = Generating gen.c\n"
        "build CMakeFiles/core.dir/gen.c.o: cp gen.c\n"
        "  desc = Building C object CMakeFiles/core.dir/gen.c.o\n"
        "build libcore.so: cp CMakeFiles/core.dir/gen.c.o\n  desc = Linking C shared library libcore.so\n"
    )
    (tmp_path / "src.c").write_text("int x;\n")
    assert ninja_graph.would_run(tmp_path, dict(os.environ)) == ["CMakeFiles/core.dir/gen.c.o", "libcore.so"]
