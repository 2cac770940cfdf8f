"""``bump`` writes all or nothing: bad input is one line with nothing written, and a failure at any stage,
after any write, leaves ``git status`` of the feedstock clean (tracked files as they were, nothing added)."""

from __future__ import annotations

import functools
import re
import shutil
import zipfile
from pathlib import Path

import pytest
import yaml
from bump_fixtures import (
    DATA,
    FIXTURES,
    PINNING,
    TEST_ONLY_SHA256,
    add_run_lines,
    copy_feedstock,
    git_status,
    git_tracked,
    next_release,
    recipe_version,
)

from feedstock_tools.__main__ import main
from feedstock_tools.common import tree_journal
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.conda import python_floor, recipe_v1
from feedstock_tools.release import bump, recipe_edit, wheel_source


class InjectedFailure(Exception):
    """The failure a test injects into one stage of the bump."""


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    return git_tracked(copy_feedstock(tmp_path / "feedstock"))


# ---- a failure at every stage puts every file back -----------------------------------------------------


def _render_double(state: bump.BumpState) -> None:
    """render-ci's effect on the tree without its minutes: a changed configuration, a new one, a mode, and
    recipe-v1/ converted from the bumped meta.yaml (the real convert-v1 writer render-ci ends with)."""
    ci = state.root / ".ci_support"
    first = sorted(ci.glob("*.yaml"))[0]
    first.write_text(first.read_text() + "python_min:\n- '3.99'\n")
    (ci / "new_configuration.yaml").write_text("target_platform:\n- linux-64\n")
    (state.root / "build-locally.py").chmod(0o644)
    assert recipe_v1.write(state.root), "the bumped meta.yaml converts to another recipe-v1"


def _anchor_double(state: bump.BumpState) -> None:
    (state.root / "docs" / "reference" / "anchor-parity.md").write_text("rewritten by the test double\n")


# the stages that read the written tree and write nothing, or take minutes: cheap doubles keep each run short
DOUBLES = {
    "staging": lambda state: None,
    "render-ci": _render_double,
    "bundled versions": lambda state: None,
    "CUDA": lambda state: None,
    "linkage": lambda state: None,
    "anchor parity": _anchor_double,
}


@functools.cache
def _release(version: str) -> tuple:
    return bump.load_release([DATA], version), bump.previous_release([DATA], recipe_version())


def _cached_release(state: bump.BumpState) -> None:
    state.release, state.previous = _release(state.version)


def _quick_stages() -> tuple[tuple[str, bump.Stage], ...]:
    """The bump's stages with the doubles in and the release read once per process."""
    return tuple(
        (name, DOUBLES.get(name, _cached_release if name == "release" else stage))
        for name, stage in bump.STAGES
    )


@pytest.mark.parametrize("failing", [name for name, _ in bump.STAGES])
def test_a_failure_at_any_stage_leaves_git_status_clean(
    scratch: Path, failing: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every stage runs (a double where the real one takes minutes), the failing one to its end, then it
    raises: whatever the stages wrote before (recipe, patch evidence, CI files and modes, the v1 recipe
    render-ci converts, the anchor-parity document) is put back and what they added is gone."""
    stages = []
    for name, real in _quick_stages():
        if name == failing:

            def fail(state: bump.BumpState, stage=real, name=name) -> None:
                stage(state)
                raise InjectedFailure(f"injected after the stage {name!r}")

            stages.append((name, fail))
        else:
            stages.append((name, real))
    monkeypatch.setattr(bump, "STAGES", tuple(stages))
    with pytest.raises(bump.ToolError) as failed:
        bump.bump(scratch, next_release(), TEST_ONLY_SHA256, [DATA], PINNING)
    # one line naming the stage and the failure, the tree put back and the journal gone
    assert str(failed.value).startswith(
        f"bump {next_release()}: the stage {failing!r} failed (InjectedFailure: injected after the stage"
    )
    assert isinstance(failed.value.__cause__, InjectedFailure) and "\n" not in str(failed.value)
    assert git_status(scratch) == []
    assert not tree_journal.journal_dir(scratch).joinpath(tree_journal.SNAPSHOT).exists()


def test_a_ci_support_that_is_a_file_is_one_line_and_puts_every_file_back(
    scratch: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """render-ci's real writer meets a .ci_support that is a file: a FileExistsError once ended the bump in
    a traceback; now one line naming the stage, exit 1, and the tree as it was (the recipe written before
    it put back)."""
    shutil.rmtree(scratch / ".ci_support")
    (scratch / ".ci_support").write_text("a file where the configurations go\n")
    git_tracked(scratch)
    stages = [(name, render if name == "render-ci" else stage) for name, stage in _quick_stages()
              for render in [bump.render_ci]]  # fmt: skip
    monkeypatch.setattr(bump, "STAGES", tuple(stages))
    status = main(["bump", next_release(), "--sha256", TEST_ONLY_SHA256, "--root", str(scratch), "--wheels",
                   str(DATA), "--pinning", str(PINNING)])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 1 and len(err.splitlines()) == 1
    assert err.startswith(f"error: bump {next_release()}: the stage 'render-ci' failed (FileExistsError: ")
    assert err.rstrip().endswith("every file is put back as it was: fix that and run the bump again")
    assert git_status(scratch) == []


def test_the_doubles_write_what_the_failures_must_undo(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a failure the same stages leave changes behind, so the test above restores real writes."""
    stages = tuple(
        (name, DOUBLES.get(name, _cached_release if name == "release" else stage))
        for name, stage in bump.STAGES
    )
    monkeypatch.setattr(bump, "STAGES", stages)
    bump.bump(scratch, next_release(), TEST_ONLY_SHA256, [DATA], PINNING)
    changed = {line[3:].split("/")[0] for line in git_status(scratch)}
    assert {"recipe", "recipe-v1", "tests", ".ci_support", "build-locally.py", "docs"} <= changed


def test_an_interruption_puts_every_file_back(scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGINT arrives as KeyboardInterrupt (or the tools' Interrupted): the same restore."""

    def interrupted(state: bump.BumpState) -> None:
        _render_double(state)
        raise KeyboardInterrupt

    stages = [(name, interrupted if name == "render-ci" else stage) for name, stage in _quick_stages()]
    monkeypatch.setattr(bump, "STAGES", tuple(stages))
    with pytest.raises(KeyboardInterrupt):
        bump.bump(scratch, next_release(), TEST_ONLY_SHA256, [DATA], PINNING)
    assert git_status(scratch) == []


# ---- bad input: one line, exit 1, nothing written ------------------------------------------------------


def _fixture_dir(tmp_path: Path, leave_out: str = "") -> Path:
    directory = tmp_path / "wheels"
    directory.mkdir()
    for path in FIXTURES.iterdir():
        if not leave_out or leave_out not in path.name:
            (directory / path.name).write_bytes(path.read_bytes())
    return directory


def _refused(capsys: pytest.CaptureFixture[str], root: Path, argv: list[str]) -> str:
    status = main(["bump", *argv, "--root", str(root), "--pinning", str(PINNING)])
    err = capsys.readouterr().err
    assert status == 1
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    assert git_status(root) == []
    return err


@pytest.mark.parametrize(
    ("version", "sha256", "words"),
    [
        ("2.15", TEST_ONLY_SHA256, "is not X.Y.Z"),
        ("v2.15.0", TEST_ONLY_SHA256, "is not X.Y.Z"),
        ("2.15.0-rc1", TEST_ONLY_SHA256, "is not X.Y.Z"),
        ("RELEASE", TEST_ONLY_SHA256[:63], "is not 64 lower-case hex digits"),
        ("RELEASE", TEST_ONLY_SHA256.upper(), "is not 64 lower-case hex digits"),
        ("CURRENT", TEST_ONLY_SHA256, "is not newer than the recipe's"),
    ],
)
def test_a_malformed_version_or_hash_is_one_line(
    capsys: pytest.CaptureFixture[str], scratch: Path, version: str, sha256: str, words: str
) -> None:
    version = {"RELEASE": next_release(), "CURRENT": recipe_version(scratch)}.get(version, version)
    err = _refused(capsys, scratch, [version, "--sha256", sha256, "--wheels", str(FIXTURES)])
    assert words in err


def test_a_missing_wheel_is_named_with_its_pip_download_line(
    capsys: pytest.CaptureFixture[str], scratch: Path, tmp_path: Path
) -> None:
    target = wheel_source.TARGETS[-1]
    wheels = _fixture_dir(tmp_path, leave_out=target.platform_tag)
    err = _refused(capsys, scratch, [next_release(), "--sha256", TEST_ONLY_SHA256, "--wheels", str(wheels)])
    assert target.pip_download(next_release()) in err


def _fake_wheel(path: Path, version: str, tag: str) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("torch/__init__.py", "")
        archive.writestr(
            f"torch-{version}.dist-info/METADATA", f"Metadata-Version: 2.4\nName: torch\nVersion: {version}\n"
        )
        archive.writestr(f"torch-{version}.dist-info/WHEEL", f"Tag: cp312-cp312-{tag}\n")


def test_a_wheel_of_another_version_than_its_name_is_refused(
    capsys: pytest.CaptureFixture[str], scratch: Path, tmp_path: Path
) -> None:
    target = wheel_source.TARGETS[-1]
    wheels = _fixture_dir(tmp_path, leave_out=target.platform_tag)
    current = recipe_version(scratch)
    _fake_wheel(wheels / target.wheel_name(next_release()), current, target.platform_tag)
    err = _refused(capsys, scratch, [next_release(), "--sha256", TEST_ONLY_SHA256, "--wheels", str(wheels)])
    assert f"METADATA says ['torch'] {current}" in err


def test_a_wheel_of_another_platform_than_its_name_is_refused(
    capsys: pytest.CaptureFixture[str], scratch: Path, tmp_path: Path
) -> None:
    target = wheel_source.TARGETS[-1]
    wheels = _fixture_dir(tmp_path, leave_out=target.platform_tag)
    _fake_wheel(wheels / target.wheel_name(next_release()), next_release(), "manylinux_2_28_x86_64")
    err = _refused(capsys, scratch, [next_release(), "--sha256", TEST_ONLY_SHA256, "--wheels", str(wheels)])
    assert f"not {target.platform_tag}" in err


def test_the_python_floor_edit_undoes_itself() -> None:
    meta = (REPO_ROOT / "recipe/meta.yaml").read_text()
    config = (REPO_ROOT / "recipe/conda_build_config.yaml").read_text()
    raised_meta, raised_config = recipe_edit.set_python_floor(meta, config, "3.12")
    assert python_floor.python_floor_skip(raised_meta) == "skip: true  # [py<312]"
    assert raised_config.endswith('python_min:\n  - "3.12"\n')
    assert recipe_edit.set_python_floor(raised_meta, raised_config, None) == (meta, config)
    # raising it again replaces the first floor instead of adding a second
    again = recipe_edit.set_python_floor(raised_meta, raised_config, "3.13")
    assert again[1].count("python_min:") == 1 and again[0].count("skip: true  # [py<") == 1


def test_a_run_requirement_line_is_edited_by_its_selector() -> None:
    """A name with a line per CUDA version: the edit names the selector and touches that line only."""
    meta = (REPO_ROOT / "recipe/meta.yaml").read_text()
    meta = re.sub(r"^        - cuda-bindings .*\n", "", meta, flags=re.M)  # a recipe that has them already
    twice = add_run_lines(
        meta,
        [
            '- cuda-bindings >=12.9.4,<13  # [linux and cuda_compiler_version == "12.9"]',
            '- cuda-bindings >=13.0.3,<14  # [linux and cuda_compiler_version == "13.0"]',
        ],
    )
    selector = 'linux and cuda_compiler_version == "13.0"'
    edited = recipe_edit.set_run_requirement(twice, "cuda-bindings", ">=13.2.0,<14", selector)
    lines = {
        line.selector: line.spec
        for line in recipe_edit.run_requirement_lines(edited)
        if line.name == "cuda-bindings"
    }
    assert lines == {'linux and cuda_compiler_version == "12.9"': ">=12.9.4,<13", selector: ">=13.2.0,<14"}
    with pytest.raises(
        bump.ToolError, match=r"cuda-bindings is not a run requirement .* with the selector \[win\]"
    ):
        recipe_edit.set_run_requirement(twice, "cuda-bindings", ">=1", "win")


def test_an_all_digit_hash_stays_a_string_in_the_v1_recipe() -> None:
    """The bump guide's former placeholder hash (64 zeros, docs/guides/bump-a-release.md) once became the
    integer 0 in recipe-v1 (unquoted YAML), and rattler-build's render failed after the recipe was written:
    the recipe the bump writes converts to a v1 recipe whose context keeps the version and the hash
    strings."""
    meta = recipe_edit.set_version((REPO_ROOT / recipe_edit.META).read_text(), next_release(), "0" * 64)
    context = yaml.safe_load(recipe_v1.convert(meta))["context"]
    assert context["sha256"] == "0" * 64 and context["version"] == next_release()
