"""Every subcommand of ``python -m feedstock_tools`` refuses bad input in one line with a non-zero exit
(issue 22): a path that does not exist, an empty file, a file of the wrong kind, contradictory options.
Formerly several of these printed an empty or misleading result with exit 0 (deps with a missing
--upstream/--wheel/--recipe, cache-diff of an empty cache, gpu-check reporting "no GPU" for a missing
wheel) or a traceback (rehearse --work-dir FILE, wheel-layout --work FILE, deps --json DIR)."""

from __future__ import annotations

from pathlib import Path

import pytest

from feedstock_tools.__main__ import main

REPO = Path(__file__).resolve().parents[1]
PINNING = REPO.parent / "shared" / "data" / "conda-forge-pinning"

# (subcommand and arguments, part of the one error line); the paths are made in tmp_path: {missing}
# absent, {void} an empty file, {empty} a directory of empty files beside empty .whl/.yaml files of its
# name, {text} a text file, {dir} an empty directory, {file} an empty zip named as a torch wheel.
CASES: dict[str, list[tuple[str, str]]] = {
    "missing path": [
        ("deps --upstream {missing}", "--upstream {missing} does not exist"),
        ("deps --wheel {missing}.whl", "--wheel {missing}.whl does not exist"),
        ("deps --recipe {missing}", "--recipe {missing} does not exist"),
        ("deps --pinning {missing}", "--pinning {missing}: no conda_build_config.yaml there"),
        ("deps --markdown {missing}/out.md", "directory {missing} does not exist; create it first"),
        ("graph {missing}", "{missing} is not a configured CMake build directory"),
        ("cache-diff {missing} {missing}", "{missing}: no CMakeCache.txt there"),
        ("check --root {missing} --pinning " + str(PINNING), "{missing}/recipe/meta.yaml not found"),
        ("rehearse {missing}.yaml", "no configuration file {missing}.yaml"),
        ("render {missing}.yaml", "no configuration file {missing}.yaml"),
        ("render --recipe {missing}", "--recipe {missing}: no meta.yaml there"),
        ("wheel-layout {missing}.whl --work {dir}/w", "wheel {missing}.whl does not exist"),
        ("wheel-layout {file} --file-list {missing}/list.txt", "directory {missing} does not exist"),
        ("wheel-layout {file} --needs-list {missing}/needs.txt", "directory {missing} does not exist"),
        ("wheel-layout {file} --work {dir}/w --config nope", "no configuration matches 'nope'"),
        ("gpu-check --wheel {missing}.whl --work {dir}/w", "--wheel {missing}.whl does not exist"),
        (
            "gpu-check --installed --python {missing} --work {dir}/w",
            "--python {missing} is not an executable",
        ),
        (
            "render-ci --check --root {missing} --pinning " + str(PINNING),
            "{missing}/conda-forge.yml not found",
        ),
    ],
    "empty file": [
        ("deps --upstream {void}", "--upstream {void} is empty"),
        ("deps --upstream {dir}", "--upstream {dir} is empty"),
        ("deps --wheel {empty}.whl", "--wheel {empty}.whl is empty"),
        ("cache-diff {empty}/CMakeCache.txt {empty}/CMakeCache.txt", "CMakeCache.txt is empty"),
        ("wheel-layout {empty}.whl --work {dir}/w", "wheel {empty}.whl is empty"),
        ("gpu-check --wheel {empty}.whl --work {dir}/w", "--wheel {empty}.whl is empty"),
        ("rehearse {empty}.yaml", "{empty}.yaml is empty: re-render it"),
        ("render {empty}.yaml", "{empty}.yaml is empty: re-render it"),
    ],
    "wrong kind": [
        ("deps --upstream {text}", "--upstream {text}: unreadable"),
        ("deps --wheel {text}", "--wheel {text} is not a .whl or METADATA or .whl.metadata file"),
        ("deps --recipe {dir}", "--recipe {dir}: no meta.yaml there"),
        ("deps --json {dir}", "--json {dir} is a directory"),
        ("graph {dir} --output-dir {text}", "--output-dir {text} is a file"),
        ("cache-diff {text} {text}", "malformed cache entry"),
        ("rehearse {text}", "is not a .yaml configuration file"),
        ("rehearse --work-dir {text} osx_arm64", "--work-dir {text} is a file"),
        ("rehearse --cache-dir {text} osx_arm64", "--cache-dir {text} is a file"),
        ("render {dir}", "{dir} is a directory"),
        ("wheel-layout {text} --work {dir}/w", "wheel {text} is not a .whl file"),
        ("wheel-layout {file} --work {text}", "--work {text} is a file"),
        ("gpu-check --installed --work {text}", "--work {text} is a file"),
        ("solve-check --recipe-dir {dir}", "--recipe-dir {dir}: no meta.yaml there"),
        ("solve-check --channel-dir {text}", "--channel-dir {text} is a file"),
        ("solve-check --ci-support {dir} --pinning " + str(PINNING), "no configurations in {dir}"),
    ],
    "contradictory options": [
        ("rehearse --list osx_arm64", "--list takes no CONFIG"),
        ("rehearse {ci}/osx_arm64_.yaml --cuda none", "names one file: --platform/--cuda/--blas apply"),
        ("rehearse --list --cuda 11.8", "--cuda 11.8: no configuration has it"),
        ("rehearse --list --platform osx-64 --cuda 12.9", "no configuration is platform osx-64, CUDA 12.9"),
        ("render osx_arm64 --subdir osx-64", "--subdir applies only without CONFIG"),
        ("wheel-layout {file} --provenance here --work {dir}/w", "--provenance describes a --file-list"),
        ("wheel-layout {file} --config osx_arm64 --file-list {dir}/l.txt", "--config chooses the recipe"),
        ("render-ci --check --list --pinning " + str(PINNING), "--check and --list do different things"),
    ],
}


@pytest.fixture
def paths(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "empty").mkdir()
    for name in ("empty.whl", "empty.yaml", "empty/CMakeCache.txt"):
        (tmp_path / name).touch()
    (tmp_path / "void").touch()
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "dir").mkdir()
    (tmp_path / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"PK\x05\x06" + bytes(18))
    return {
        "missing": str(tmp_path / "missing"),
        "void": str(tmp_path / "void"),
        "empty": str(tmp_path / "empty"),
        "text": str(tmp_path / "notes.txt"),
        "dir": str(tmp_path / "dir"),
        "file": str(tmp_path / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"),
        "ci": str(REPO / ".ci_support"),
    }


@pytest.mark.parametrize(
    ("arguments", "message"),
    [case for cases in CASES.values() for case in cases],
    ids=[
        f"{kind}: {arguments.split()[0]} {i}"
        for kind, cases in CASES.items()
        for i, (arguments, _) in enumerate(cases)
    ],
)
def test_bad_input_is_one_line_and_a_non_zero_exit(
    arguments: str, message: str, paths: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = arguments.format(**paths).split()
    before = sorted(path.relative_to(tmp_path) for path in tmp_path.rglob("*"))
    status = main(argv)
    out, err = capsys.readouterr()
    assert status != 0, out
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert message.format(**paths) in lines[0], lines[0]
    assert sorted(path.relative_to(tmp_path) for path in tmp_path.rglob("*")) == before  # nothing written
