"""The per-user cache's entries (common/cache_store.py): what a later run reuses is what its key says, whole
and unchanged, whatever an earlier run did to it: killed with SIGKILL, written through a hard link, left a
file beside it, made under another interpreter or another shell's settings (issue 43)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from feedstock_tools.__main__ import main
from feedstock_tools.common import cache_store
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.proofs.builders import local_channel
from feedstock_tools.proofs.rehearsal import prefixes

KEY = cache_store.EntryKey("demo", "3.12", {"what": "a demo entry"})


class Maker:
    """Makes a small entry (files, a directory, a link) and counts its calls."""

    def __init__(self, text: str = "made\n") -> None:
        self.text = text
        self.calls = 0

    def __call__(self, making: cache_store.Making) -> None:
        self.calls += 1
        (making.staging / "lib").mkdir()
        (making.staging / "lib" / "data.txt").write_text(self.text)
        (making.staging / "bin").mkdir()
        (making.staging / "bin" / "tool").write_text("#!/bin/sh\n")
        (making.staging / "bin" / "link").symlink_to("tool")


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _poll(condition: object, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        os.sched_yield()
        time.sleep(0.01)


def test_an_entry_is_made_once_whole_and_then_reused(tmp_path: Path) -> None:
    make = Maker()
    entry = cache_store.obtain(tmp_path, KEY, make)
    assert entry == tmp_path / KEY.name and make.calls == 1
    assert sorted(p.name for p in entry.rglob("*")) == ["bin", "data.txt", "lib", "link", "tool"]
    manifest = json.loads(cache_store.manifest_path(entry).read_text())
    assert manifest["kind"] == "demo" and manifest["inputs"] == {"what": "a demo entry"}
    assert set(manifest["files"]) == {"bin", "bin/tool", "bin/link", "lib", "lib/data.txt"}
    assert cache_store.obtain(tmp_path, KEY, make) == entry and make.calls == 1
    assert not list((tmp_path / cache_store.STAGING).iterdir())


def _append_through_a_hard_link(entry: Path, tmp_path: Path) -> None:
    """A build step appending to a host file of a prefix linked from the entry (harness.link_entry)."""
    prefix = tmp_path / "h_env"
    prefixes.link_tree(entry, prefix)
    with (prefix / "lib" / "data.txt").open("a") as handle:
        handle.write("written by a build step\n")


def _same_size_other_content(entry: Path, _tmp: Path) -> None:
    path = entry / "lib" / "data.txt"
    info = path.stat()
    path.write_text("MADE\n")
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


@pytest.mark.parametrize(
    "spoil",
    [
        _append_through_a_hard_link,
        _same_size_other_content,
        lambda entry, _tmp: (entry / "lib" / "junk.conda").write_bytes(b"not a package"),
        lambda entry, _tmp: (entry / "bin" / "tool").unlink(),
        lambda entry, _tmp: ((entry / "bin" / "link").unlink(), (entry / "bin" / "link").symlink_to("/")),
        lambda entry, _tmp: cache_store.manifest_path(entry).write_text("{"),
        lambda entry, _tmp: cache_store.manifest_path(entry).unlink(),
    ],
    ids=[
        "hard-link-write",
        "same-size",
        "junk-file",
        "file-gone",
        "link-changed",
        "bad-manifest",
        "no-manifest",
    ],
)
def test_a_spoiled_entry_is_made_again_and_said_once(tmp_path: Path, spoil: object) -> None:
    make = Maker()
    entry = cache_store.obtain(tmp_path / "store", KEY, make)
    assert entry is not None
    spoil(entry, tmp_path)  # type: ignore[operator]
    cache_store._digests_checked.clear()  # a later process: it compares digests on first use
    said: list[str] = []
    assert cache_store.obtain(tmp_path / "store", KEY, make, said.append) == entry
    assert make.calls == 2
    assert len(said) == 1 and said[0].startswith(f"      cache: {KEY.name} ") and "making it again" in said[0]
    assert (entry / "lib" / "data.txt").read_text() == "made\n"
    assert cache_store.check(entry, KEY, digests=True) is None
    assert not list((tmp_path / "store" / cache_store.TRASH).iterdir())


_KILLED_MAKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path[:0] = [{root!r}, {recipe!r}]
    from feedstock_tools.common import cache_store

    def make(making):
        (making.staging / "early").write_text("made before the kill\\n")
        late = str(making.staging / "late")
        making.run(["sh", "-c", 'touch "$0"; sleep 30; echo late > "$1"', {marker!r}, late], Path({log!r}))

    key = cache_store.EntryKey("demo", "3.12", {{"what": "a demo entry"}})
    cache_store.obtain(Path({store!r}), key, make)
    """
)


def test_a_maker_killed_by_sigkill_leaves_nothing_trusted_and_its_children_die(tmp_path: Path) -> None:
    """A real maker process, SIGKILLed while its child (in a group of its own) runs: the child keeps the
    entry's lock, so the next run cannot make the entry beside it; that run kills the child's group (the
    maker is gone), removes the staging leftover and makes the entry whole."""
    store, marker = tmp_path / "store", tmp_path / "child-started"
    script = _KILLED_MAKER.format(
        root=str(REPO_ROOT), recipe=str(REPO_ROOT / "recipe"), marker=str(marker),
        log=str(tmp_path / "maker.log"), store=str(store),
    )  # fmt: skip
    maker = subprocess.Popen([sys.executable, "-c", script])
    lock = store / cache_store.LOCKS / KEY.name
    # the child started and the maker recorded its group (a maker killed in between leaves an orphan that
    # is not killed but still holds the lock: the next run waits for it to end, and trusts nothing it left)
    _poll(lambda: (marker.exists() and "group" in lock.read_text()) or maker.poll() is not None)
    assert maker.poll() is None, "the maker ended before its child started"
    maker.send_signal(signal.SIGKILL)
    maker.wait()
    groups = [int(line.split()[1]) for line in lock.read_text().splitlines() if line.startswith("group ")]
    assert len(groups) == 1 and _alive(groups[0])  # the orphan, still running
    assert [p.name for p in (store / cache_store.STAGING).iterdir()] == [f"{KEY.name}@{maker.pid}"]
    assert cache_store.check(store / KEY.name, KEY) == "absent"

    said: list[str] = []
    make = Maker()
    entry = cache_store.obtain(store, KEY, make, said.append)
    assert entry is not None and make.calls == 1
    assert not _alive(groups[0])
    assert said[0] == (
        f"      the run that made {KEY.name} (pid {maker.pid}) is gone and left processes holding its lock: "
        f"stopping process group {groups[0]}"
    )
    assert not list((store / cache_store.STAGING).iterdir())
    assert sorted(p.name for p in entry.iterdir()) == ["bin", "lib"]  # nothing of the killed maker's
    assert cache_store.check(entry, KEY, digests=True) is None


def test_what_decides_an_entry_is_in_its_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pyenv patch upgrade, one shell's uv or pip setting, pip's configuration file and the stand-in's
    libmagma sources each give another entry; where uv caches and how it prints do not."""
    interpreter = prefixes.find_interpreter("3.12")
    assert interpreter is not None
    versions = tmp_path / "pyenv" / "versions"
    (versions / "3.12.1" / "bin").mkdir(parents=True)
    wrapper = versions / "3.12.1" / "bin" / "python3"
    wrapper.write_text(f'#!/bin/sh\nexec {interpreter} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in [n for n in os.environ if n.startswith(("UV_", "PIP_"))]:
        monkeypatch.delenv(name)
    plan = local_channel.ChannelPlan({"numpy": ("numpy",)}, {}, None, {}, {"3.12": "*_cpython"}, tmp_path)
    before = (prefixes.template_key("3.12", ("six",)).name, local_channel.wheels_key("3.12", ("six",)).name)
    assert prefixes.template_key("3.12", ("six",)).inputs["interpreter"] == str(wrapper)
    # the upgrade: pyenv install 3.12.2
    (versions / "3.12.2").mkdir()
    (versions / "3.12.1" / "bin").rename(versions / "3.12.2" / "bin")
    after = (prefixes.template_key("3.12", ("six",)).name, local_channel.wheels_key("3.12", ("six",)).name)
    assert after[0] != before[0] and after[1] != before[1]
    channel = plan.key().name

    names = {prefixes.template_key("3.12", ("six",)).name}
    for variable, value in [("UV_CACHE_DIR", str(tmp_path)), ("UV_NO_PROGRESS", "1"), ("PIP_CACHE_DIR", "x")]:
        monkeypatch.setenv(variable, value)
    assert {prefixes.template_key("3.12", ("six",)).name} == names
    assert plan.key().name == channel
    for variable, value in [("UV_RESOLUTION", "lowest"), ("UV_INDEX_URL", "https://mirror.example/simple")]:
        monkeypatch.setenv(variable, value)
        names.add(prefixes.template_key("3.12", ("six",)).name)
        monkeypatch.delenv(variable)
    monkeypatch.setenv("PIP_PRE", "1")
    assert plan.key().name != channel
    monkeypatch.delenv("PIP_PRE")
    (tmp_path / "config" / "pip").mkdir(parents=True)
    (tmp_path / "config" / "pip" / "pip.conf").write_text("[global]\nindex-url = https://mirror.example\n")
    names.add(prefixes.template_key("3.12", ("six",)).name)
    assert len(names) == 4

    standin = tmp_path / "standin"
    source = REPO_ROOT / "tests" / "upstream_standin" / "third_party" / "magma"
    (standin / "third_party").mkdir(parents=True)
    (standin / "third_party" / "magma").mkdir()
    for path in source.iterdir():
        (standin / "third_party" / "magma" / path.name).write_bytes(path.read_bytes())
    first = prefixes.magma_key(standin).name
    with (standin / "third_party" / "magma" / "magma.cpp").open("a") as handle:
        handle.write("// changed\n")
    assert prefixes.magma_key(standin).name != first


def test_libmagma_is_an_entry_made_whole(tmp_path: Path) -> None:
    """The stand-in's libmagma: what an older cache left under the old name (only an empty library, a kill
    between its two installs) is not used; a library emptied in the entry is built again."""
    standin = REPO_ROOT / "tests" / "upstream_standin"
    (tmp_path / "libmagma" / "lib").mkdir(parents=True)
    (tmp_path / "libmagma" / "lib" / "libmagma.so").write_bytes(b"")
    log = tmp_path / "setup.log"
    entry = prefixes.magma_install(standin, tmp_path, log)
    assert entry != tmp_path / "libmagma"
    files = sorted(str(p.relative_to(entry)) for p in entry.rglob("*") if p.is_file())
    assert files == ["include/magma_v2.h", "lib/libmagma.so"]
    library = entry / "lib" / "libmagma.so"
    assert library.read_bytes().startswith(b"\x7fELF")
    library.write_bytes(b"")
    assert prefixes.magma_install(standin, tmp_path, log) == entry
    assert library.read_bytes().startswith(b"\x7fELF")


def test_a_store_over_its_bound_loses_its_least_recently_used_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a new entry: those unused for the maximum age go, then the least recently used while the store is
    over its bound; one used within the last hour never."""
    now = time.time()
    ages = {"old": 40 * 86400, "stale": 5 * 86400, "older": 6 * 86400, "recent": 600}
    for name, age in ages.items():
        entry = cache_store.obtain(tmp_path, cache_store.EntryKey(name, "", {}), Maker("x" * 100_000))
        assert entry is not None
        os.utime(cache_store.manifest_path(entry), (now - age, now - age))
    legacy = tmp_path / "venv-3.12-5-0123456789"  # left by older tools
    legacy.mkdir()
    (legacy / "python").write_bytes(b"x" * 100_000)
    os.utime(legacy, (now - 7200, now - 7200))
    monkeypatch.setenv(cache_store.MAX_BYTES_ENV, str(250_000 / 1024**3))
    cache_store.obtain(tmp_path, cache_store.EntryKey("new", "", {}), Maker("x" * 100_000))
    left = sorted(item.path.name.split("-")[0] for item in cache_store.listing(tmp_path))
    assert left == ["new", "recent"]  # "old" by age; "older", the legacy one and "stale" by size
    monkeypatch.setenv(cache_store.MAX_BYTES_ENV, "lots")
    with pytest.raises(
        cache_store.ToolError, match=r"PYTORCH_FEEDSTOCK_CACHE_MAX_GIB is 'lots', not a number"
    ):
        cache_store.max_bytes()


def test_the_cache_command_lists_verifies_and_prunes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "rehearsal"
    now = time.time()
    for name, age in {"old": 20 * 86400, "new": 0}.items():
        entry = cache_store.obtain(store, cache_store.EntryKey(name, "3.12", {}), Maker())
        assert entry is not None
        os.utime(cache_store.manifest_path(entry), (now - age, now - age))
    (store / "venv-3.12-5-0123456789" / "bin").mkdir(parents=True)  # left by older tools
    os.utime(store / "venv-3.12-5-0123456789", (now - 3600, now - 3600))
    (store / cache_store.STAGING / "new-3.12-0@99").mkdir(parents=True)  # a killed maker's
    assert main(["cache", "list", "--cache-dir", str(tmp_path)]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0] == f"{store}:"
    assert [line.split()[0] for line in listed[1:4]] == [
        f"new-3.12-{cache_store.EntryKey('new', '3.12', {}).name.rsplit('-', 1)[1]}",
        "venv-3.12-5-0123456789",
        f"old-3.12-{cache_store.EntryKey('old', '3.12', {}).name.rsplit('-', 1)[1]}",
    ]
    assert "left by older tools (no manifest)" in listed[2] and "(20 d ago)" in listed[3]
    assert listed[4] == "  1 leftover(s) of stopped makers in .staging/.trash"

    old = store / cache_store.EntryKey("old", "3.12", {}).name
    (old / "lib" / "data.txt").write_text("changed\n")
    assert main(["cache", "verify", "--cache-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"{old}: lib/data.txt changed (size 8, manifest 5)" in out and "1 entry not as made" in out

    assert main(["cache", "prune", "--cache-dir", str(tmp_path)]) == 1
    assert "say what to remove: --older-than DAYS or --all" in capsys.readouterr().err
    assert main(["cache", "prune", "--older-than", "7", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"removed {old}" in out and "left by a stopped maker" in out
    assert not old.exists() and (store / "venv-3.12-5-0123456789").exists()
    held = cache_store.EntryLock(store, cache_store.EntryKey("new", "3.12", {}).name)
    assert held.acquire()
    assert main(["cache", "prune", "--all", "--cache-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "another run holds its lock" in out and not (store / "venv-3.12-5-0123456789").exists()
    held.release()
    assert main(["cache", "prune", "--all", "--cache-dir", str(tmp_path)]) == 0
    assert cache_store.listing(store) == []
    assert main(["cache", "list", "--cache-dir", str(tmp_path / "nowhere")]) == 1
    assert "does not exist or is not a directory" in capsys.readouterr().err


def test_an_entry_made_again_is_said_even_without_a_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A caller with no progress of its own (the import checks' prefixes, libmagma) still has the line said:
    on standard error, never silently."""
    entry = cache_store.obtain(tmp_path, KEY, Maker())
    assert entry is not None
    (entry / "lib" / "data.txt").write_text("poisoned\n")
    capsys.readouterr()
    cache_store.obtain(tmp_path, KEY, Maker())
    err = capsys.readouterr().err
    assert err.startswith(f"cache: {KEY.name} lib/data.txt changed") and err.count("\n") == 1
