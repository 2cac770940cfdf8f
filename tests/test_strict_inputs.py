"""Every subcommand of ``python -m feedstock_tools`` refuses bad input in one line with a non-zero exit
(issue 22): a path that does not exist, an empty file, a file of the wrong kind, contradictory options.
Formerly several of these printed an empty or misleading result with exit 0 (deps with a missing
--upstream/--wheel/--recipe, cache-diff of an empty cache, gpu-check reporting "no GPU" for a missing
wheel) or a traceback (rehearse --work-dir FILE, wheel-layout --work FILE, deps --json DIR).

Issue 29 adds the recipe's own files broken as a maintainer breaks them (a YAML error in
conda_build_config.yaml, a byte that is not UTF-8, a selector typo), each in every command that reads them,
a closed standard output, PyPI's ``.whl.metadata`` name and where conda-forge's pinning is found."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from email.parser import Parser
from pathlib import Path

import pytest

from feedstock_tools.__main__ import main
from feedstock_tools.common.errors import ToolError
from feedstock_tools.conda.pinning import locate_pinning

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


# --- the recipe's own files broken (issue 29): one line naming the file and the line, in every command ------

# What the commands below read or write of a checkout (a scratch copy: a broken input is never committed).
CHECKOUT_DIRS = ("feedstock_tools", "recipe", ".ci_support", ".github", ".scripts", ".circleci", "templates")
CHECKOUT_FILES = ("conda-forge.yml", "build-locally.py")
OSX_ARM64 = next(path.stem for path in sorted((REPO / ".ci_support").glob("osx_arm64*.yaml")))


def copy_checkout(destination: Path) -> Path:
    for name in CHECKOUT_DIRS:
        shutil.copytree(REPO / name, destination / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in CHECKOUT_FILES:
        shutil.copy2(REPO / name, destination / name)
    return destination


def _line_index(lines: list[str], wanted: Callable[[str], bool]) -> int:
    return next(index for index, line in enumerate(lines) if wanted(line))


def break_variant_yaml(root: Path) -> list[str]:
    """An unclosed quote on a line no selector hides: PyYAML meets it only at the end of the file, in the
    text the selectors left (formerly a 71-line traceback naming a line of that text, not of the file)."""
    path = root / "recipe" / "conda_build_config.yaml"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    index = _line_index(lines, lambda line: line.startswith("  - ") and "#" not in line)
    lines[index] = lines[index].replace("- ", '- "', 1)
    path.write_text("".join(lines), encoding="utf-8")
    column = lines[index].index('"') + 1
    return [f"recipe/conda_build_config.yaml line {index + 1} column {column}: not valid YAML"]


def break_meta_encoding(root: Path) -> list[str]:
    """A Latin-1 byte at the end of the summary (formerly ``UnicodeDecodeError … position N``)."""
    path = root / "recipe" / "meta.yaml"
    lines = path.read_bytes().splitlines(keepends=True)
    index = next(i for i, line in enumerate(lines) if line.lstrip().startswith(b"summary:"))
    column = len(lines[index].rstrip(b"\n").decode("utf-8")) + 1
    lines[index] = lines[index].rstrip(b"\n") + b" caf\xe9\n"
    path.write_bytes(b"".join(lines))
    return [f"recipe/meta.yaml line {index + 1} column {column + 4}: byte 0xe9 is not UTF-8"]


def break_meta_selector(root: Path) -> list[str]:
    """``# [linux]`` mistyped: conda-build reads the unknown name as False and drops the line (formerly
    passed by render-ci --check, and 16 findings without the file in check)."""
    path = root / "recipe" / "meta.yaml"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    index = _line_index(lines, lambda line: line.rstrip().endswith("# [linux]"))
    lines[index] = lines[index].replace("# [linux]", "# [linx]")
    path.write_text("".join(lines), encoding="utf-8")
    return [f"recipe/meta.yaml line {index + 1}: selector [linx] names 'linx'", "(did you mean 'linux'?)"]


def break_variant_selector(root: Path) -> list[str]:
    """A selector typo in conda_build_config.yaml, which render-ci checks against the pinning's keys too."""
    path = root / "recipe" / "conda_build_config.yaml"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    index = _line_index(lines, lambda line: line.rstrip().endswith("# [osx]"))
    lines[index] = lines[index].replace("# [osx]", "# [osx and megbuild]")
    path.write_text("".join(lines), encoding="utf-8")
    return [f"recipe/conda_build_config.yaml line {index + 1}: selector [osx and megbuild] names 'megbuild'"]


def break_meta_yaml(root: Path) -> list[str]:
    """An unclosed quote in meta.yaml's summary: a YAML error after the selectors and Jinja, whose line of
    the file is found by its text (formerly the exception's several lines)."""
    path = root / "recipe" / "meta.yaml"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    index = _line_index(lines, lambda line: line.lstrip().startswith("summary:"))
    lines[index] = lines[index].replace("summary: ", 'summary: "', 1)
    path.write_text("".join(lines), encoding="utf-8")
    return [f"recipe/meta.yaml line {index + 1} {lines[index].strip()!r} is not valid YAML once rendered"]


BROKEN_INPUTS: dict[str, Callable[[Path], list[str]]] = {
    "YAML error in meta.yaml": break_meta_yaml,
    "YAML error in conda_build_config.yaml": break_variant_yaml,
    "byte not UTF-8 in meta.yaml": break_meta_encoding,
    "selector typo in meta.yaml": break_meta_selector,
    "selector typo in conda_build_config.yaml": break_variant_selector,
}
# Every command that reads the recipe (build-locally.py --list reads only .ci_support). None of them may get
# as far as a build, a rehearsal step or a written file.
RECIPE_COMMANDS: dict[str, list[str]] = {
    "render": ["-m", "feedstock_tools", "render", OSX_ARM64],
    "render (first pass)": ["-m", "feedstock_tools", "render"],
    "rehearse": ["-m", "feedstock_tools", "rehearse", OSX_ARM64],
    "render-ci": ["-m", "feedstock_tools", "render-ci"],
    "render-ci --check": ["-m", "feedstock_tools", "render-ci", "--check"],
    "check": ["-m", "feedstock_tools", "check"],
    "deps": ["-m", "feedstock_tools", "deps"],
    "build-locally.py": ["build-locally.py", OSX_ARM64],
    "build-locally.py --rehearse": ["build-locally.py", "--rehearse", OSX_ARM64],
}


@pytest.fixture(scope="module")
def broken_checkouts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[str]]]:
    """One scratch checkout per broken input, shared by the commands (none may write to it)."""
    checkouts = {}
    for index, (name, breaks) in enumerate(BROKEN_INPUTS.items()):
        root = copy_checkout(tmp_path_factory.mktemp(f"broken{index}") / "feedstock")
        checkouts[name] = (root, breaks(root))
    return checkouts


def tree_state(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its content (None for a directory): what "nothing written" compares."""
    return {
        str(path.relative_to(root)): path.read_bytes() if path.is_file() else None for path in root.rglob("*")
    }


def run_in(root: Path, command: list[str], environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A command as a maintainer runs it in that checkout (its own copy of the tools, no bytecode written)."""
    return subprocess.run(
        [sys.executable, *command], cwd=root, env={**environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


def assert_one_line(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert result.returncode != 0, result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("command", RECIPE_COMMANDS.values(), ids=RECIPE_COMMANDS.keys())
@pytest.mark.parametrize("broken", BROKEN_INPUTS, ids=BROKEN_INPUTS.keys())
def test_a_broken_recipe_file_is_one_line_in_every_command(
    broken: str, command: list[str], broken_checkouts: dict[str, tuple[Path, list[str]]]
) -> None:
    root, fragments = broken_checkouts[broken]
    before = tree_state(root)
    result = run_in(root, command, {**os.environ, "CONDA_FORGE_PINNING": str(PINNING)})
    line = assert_one_line(result, *fragments)
    assert "Traceback" not in result.stdout + result.stderr
    assert str(root / "recipe") in line or line.split(": ", 1)[1].startswith("recipe/"), line
    assert tree_state(root) == before  # nothing written: no rehearsal work tree, no CI file, no log


def break_ci_support_encoding(root: Path) -> list[str]:
    """A byte that is not UTF-8 in the osx-arm64 configuration (formerly a traceback in rehearse)."""
    path = root / ".ci_support" / f"{OSX_ARM64}.yaml"
    lines = path.read_bytes().splitlines(keepends=True)
    index = next(i for i, line in enumerate(lines) if line.startswith(b"target_platform:"))
    lines[index] = b"# caf\xe9\n" + lines[index]
    path.write_bytes(b"".join(lines))
    return [f".ci_support/{OSX_ARM64}.yaml line {index + 1} column 6: byte 0xe9 is not UTF-8"]


def break_forge_config(root: Path) -> list[str]:
    """conda-forge.yml cut in the middle of a quoted value (formerly a traceback in render-ci and check)."""
    path = root / "conda-forge.yml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text + 'extra_note: "unfinished\n', encoding="utf-8")
    return [f"conda-forge.yml line {len(text.splitlines()) + 1} column 13: not valid YAML"]


# Inputs other than the recipe, with the commands that read them.
OTHER_BROKEN_INPUTS: dict[str, tuple[Callable[[Path], list[str]], list[str]]] = {
    "byte not UTF-8 in a .ci_support file": (
        break_ci_support_encoding,
        ["render", "rehearse", "build-locally.py", "build-locally.py --rehearse", "build-locally.py --list"],
    ),
    "YAML error in conda-forge.yml": (break_forge_config, ["render-ci", "render-ci --check", "check"]),
}
OTHER_CASES = [(broken, command) for broken, (_, cases) in OTHER_BROKEN_INPUTS.items() for command in cases]


@pytest.mark.parametrize(("broken", "command"), OTHER_CASES, ids=[f"{b}-{c}" for b, c in OTHER_CASES])
def test_another_broken_input_is_one_line_in_every_command(
    broken: str, command: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    breaks, _ = OTHER_BROKEN_INPUTS[broken]
    root = copy_checkout(tmp_path_factory.mktemp("other") / "feedstock")
    fragments = breaks(root)
    before = tree_state(root)
    arguments = {**RECIPE_COMMANDS, "build-locally.py --list": ["build-locally.py", "--list"]}[command]
    result = run_in(root, arguments, {**os.environ, "CONDA_FORGE_PINNING": str(PINNING)})
    assert_one_line(result, *fragments)
    assert "Traceback" not in result.stdout + result.stderr
    assert tree_state(root) == before


@pytest.mark.parametrize(
    "command",
    [["build-locally.py", "--list"], ["-m", "feedstock_tools", "rehearse", "--list"]],
    ids=["build-locally.py --list", "rehearse --list"],
)
def test_a_closed_standard_output_is_a_quiet_exit(command: list[str]) -> None:
    """``--list | head -1``: the Python documentation's way (signal module, "Note on SIGPIPE"): no
    BrokenPipeError traceback, exit status 1 ("Python exits with error code 1 on EPIPE")."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line is written
    try:
        result = subprocess.run(
            [sys.executable, *command], cwd=REPO, stdout=write_end, stderr=subprocess.PIPE, check=False
        )
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (1, b"")


# --- PyPI's own file names (issue 29) ---------------------------------------------------------------------

# PyPI serves a wheel's METADATA at the wheel's URL + ".metadata" (PEP 658); this is that file of PyPI's
# CUDA build of torch (long description dropped), named as PyPI names it.
PYPI_METADATA = (
    REPO / "tests" / "test_deps_data" / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl.metadata"
)


def test_deps_takes_the_metadata_file_pypi_serves(tmp_path: Path) -> None:
    table = tmp_path / "deps.json"
    status = main(["deps", "--wheel", str(PYPI_METADATA), "--pinning", str(PINNING), "--json", str(table)])
    assert status == 0
    rows = {row["package"]: row for row in json.loads(table.read_text())["rows"]}
    metadata = Parser().parsestr(PYPI_METADATA.read_text(encoding="utf-8"))
    triton = next(r for r in metadata.get_all("Requires-Dist") if r.startswith("triton") and "extra" not in r)
    assert rows["triton"]["upstream"] == [triton.split(";")[0].split("triton", 1)[1].strip()]
    assert rows["triton"]["source"] == "wheel METADATA Requires-Dist"


# --- the real-graph benchmark's prerequisites (issue 29) ----------------------------------------------------


def test_real_graph_benchmark_names_the_package_of_a_missing_flatc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Formerly ``apt-get install cmake ninja-build g++ util-linux``, none of which holds flatc (Debian 12:
    flatbuffers-compiler 2.0.8+dfsg1-2 holds /usr/bin/flatc, ``dpkg -c``)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import megabuild_real_graph as benchmark
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    # every other tool present, whatever this machine has
    present = {tool: f"/usr/bin/{tool}" for tool in benchmark.TOOLS if tool != "flatc"}
    monkeypatch.setattr(benchmark.shutil, "which", present.get)
    with pytest.raises(benchmark.Failed, match=r"^missing flatc: apt-get install flatbuffers-compiler$"):
        benchmark.check_prerequisites()


# --- where conda-forge's pinning is found (issue 29) --------------------------------------------------------


def test_pinning_is_found_in_the_order_the_readme_gives(tmp_path: Path) -> None:
    """--pinning, $CONDA_FORGE_PINNING, ../shared/data/conda-forge-pinning beside the checkout,
    conda-smithy's cache, the conda-forge-pinning package in $CONDA_PREFIX."""
    checkout = tmp_path / "feedstock"
    shared = tmp_path / "shared" / "data" / "conda-forge-pinning"
    cache, prefix, named = tmp_path / "cache", tmp_path / "prefix", tmp_path / "named"
    places = (named, shared, cache / "conda-smithy", prefix)
    for directory in places:
        directory.mkdir(parents=True)
        (directory / "conda_build_config.yaml").write_text("python:\n- 3.12\n")
    environ = {"CONDA_FORGE_PINNING": str(named), "XDG_CACHE_HOME": str(cache), "CONDA_PREFIX": str(prefix)}
    assert locate_pinning(prefix, environ, checkout) == prefix
    for expected in places:
        assert locate_pinning(None, environ, checkout) == expected
        if expected == named:
            del environ["CONDA_FORGE_PINNING"]
        else:
            (expected / "conda_build_config.yaml").unlink()
    with pytest.raises(ToolError, match=f"pinning not found \\(looked in {shared}, {cache / 'conda-smithy'}"):
        locate_pinning(None, environ, checkout)


@pytest.mark.parametrize(
    ("explicit", "environ", "message"),
    [
        (None, {"XDG_CACHE_HOME": "/nonexistent"}, "pinning not found .* pass --pinning DIR, set"),
        (
            None,
            {"CONDA_FORGE_PINNING": "/nonexistent"},
            "CONDA_FORGE_PINNING=/nonexistent: no conda_build_config",
        ),
        (Path("/nonexistent"), {}, "--pinning /nonexistent: no conda_build_config.yaml there"),
    ],
)
def test_missing_pinning_names_the_fix(
    explicit: Path | None, environ: dict[str, str], message: str, tmp_path: Path
) -> None:
    with pytest.raises(ToolError, match=message):
        locate_pinning(explicit, environ, checkout=tmp_path / "feedstock")


PINNING_COMMANDS: dict[str, list[str]] = {
    name: command for name, command in RECIPE_COMMANDS.items() if name in ("render-ci", "render-ci --check")
} | {"check": RECIPE_COMMANDS["check"], "deps": RECIPE_COMMANDS["deps"]}


def environ_without_pinning(home: Path) -> dict[str, str]:
    """No --pinning, no $CONDA_FORGE_PINNING, an empty conda-smithy cache, no $CONDA_PREFIX."""
    skipped = ("CONDA_FORGE_PINNING", "CONDA_PREFIX", "XDG_CACHE_HOME")
    return {**{k: v for k, v in os.environ.items() if k not in skipped}, "HOME": str(home)}


@pytest.mark.parametrize("command", PINNING_COMMANDS.values(), ids=PINNING_COMMANDS.keys())
def test_every_command_finds_the_pinning_beside_the_checkout(command: list[str], tmp_path: Path) -> None:
    """A fresh clone with shared/ beside it: the command takes ../shared/data/conda-forge-pinning. A whole
    run takes up to half a minute (check), so the checkout's meta.yaml is broken: the same command on the
    same checkout without shared/ stops at the pinning (the test below), so reaching the recipe's error here
    shows the pinning was found. deps, quick, runs to its table in the next test; the other three, run whole
    by hand from such a copy, exit 0."""
    root = copy_checkout(tmp_path / "feedstock")
    fragments = break_meta_encoding(root)
    (tmp_path / "shared").symlink_to(PINNING.parents[1], target_is_directory=True)
    result = run_in(root, command, environ_without_pinning(tmp_path))
    assert_one_line(result, *fragments)


def test_deps_takes_the_pinning_beside_the_checkout(tmp_path: Path) -> None:
    root = copy_checkout(tmp_path / "feedstock")
    (tmp_path / "shared").symlink_to(PINNING.parents[1], target_is_directory=True)
    result = run_in(root, ["-m", "feedstock_tools", "deps"], environ_without_pinning(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "pinning" not in result.stdout.split("Notes:")[-1]  # no note of a pinning left out
    protobuf = next(line for line in result.stdout.splitlines() if line.startswith("| protobuf |"))
    assert protobuf.split(" | ")[3] != ""  # the Conda-forge column


@pytest.mark.parametrize("command", PINNING_COMMANDS.values(), ids=PINNING_COMMANDS.keys())
def test_every_command_without_a_pinning_says_where_it_looked(command: list[str], tmp_path: Path) -> None:
    """The pinning is looked for first: even a broken recipe is not read before it (see above)."""
    root = copy_checkout(tmp_path / "feedstock")
    break_meta_encoding(root)
    before = tree_state(root)
    result = run_in(root, command, environ_without_pinning(tmp_path))
    assert_one_line(
        result,
        f"conda-forge's pinning not found (looked in {tmp_path / 'shared' / 'data' / 'conda-forge-pinning'}, "
        f"{tmp_path / '.cache' / 'conda-smithy'}); pass --pinning DIR, set $CONDA_FORGE_PINNING",
    )
    assert tree_state(root) == before
