"""``python -m feedstock_tools bump`` on a scratch copy of the feedstock, with the fixture sets cut from the
real 2.15.0 wheels (tests/data/bump, ``bump 2.15.0 --cut-fixtures``) and the 2.13.0 file lists beside them.

The expected rows are read from the fixtures and the recipe, not written here: the release's version is the
fixture sets' own, its Python floor and requirements their METADATA's, its bundled versions their headers'.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from rehearsal_outcome import assert_rehearsal_succeeded

from feedstock_tools.__main__ import main
from feedstock_tools.ci import ci_support
from feedstock_tools.common.recipe_imports import REPO_ROOT, import_megabuild
from feedstock_tools.conda import recipe_v1
from feedstock_tools.conda.recipe_render import load_variant_config
from feedstock_tools.maintainer import patch_hunks, render_v1
from feedstock_tools.maintainer.upstream_versions import parse_requirement
from feedstock_tools.proofs import solve_channel, solve_check
from feedstock_tools.release import bump, recipe_edit, wheel_source

DATA = Path(__file__).resolve().parent / "data"
FIXTURES = DATA / "bump"
PINNING = REPO_ROOT.parent / "shared" / "data" / "conda-forge-pinning"
# A syntactically valid sha256 that is no tarball's: the digest of this sentence. TEST VALUE ONLY.
TEST_ONLY_SHA256 = hashlib.sha256(b"TEST VALUE: not the sha256 of any PyTorch release tarball").hexdigest()
FEEDSTOCK = (
    "recipe",
    "recipe-v1",
    ".ci_support",
    "conda-forge.yml",
    "templates",
    ".github",
    ".scripts",
    ".circleci",
)
_staging = import_megabuild("staging")
_package_files = import_megabuild("package_files")


def release_version() -> str:
    """The version the fixture sets were cut from (their wheels' names), the newest if several."""
    names = [wheel_source.fixture_wheel_name(p) for p in FIXTURES.glob(f"*{wheel_source.FILES_SUFFIX}")]
    versions = {name.split("-")[1] for name in names if name}
    return max(versions, key=lambda v: tuple(int(x) for x in v.split(".")))


def copy_feedstock(destination: Path) -> Path:
    destination.mkdir()
    for name in FEEDSTOCK:
        source = REPO_ROOT / name
        if source.is_dir():
            shutil.copytree(source, destination / name)
        else:
            shutil.copy2(source, destination / name)
    return destination


@dataclass(frozen=True)
class BumpRun:
    root: Path
    status: int
    table: str
    version: str
    release: bump.Release


@pytest.fixture(scope="session")
def bumped(tmp_path_factory: pytest.TempPathFactory) -> BumpRun:
    root = copy_feedstock(tmp_path_factory.mktemp("bump") / "feedstock")
    version = release_version()
    capture = root.parent / "table.txt"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(
            [
                "bump",
                version,
                "--sha256",
                TEST_ONLY_SHA256,
                "--wheels",
                str(DATA),
                "--root",
                str(root),
                "--pinning",
                str(PINNING),
            ]
        )
    capture.write_text(out.getvalue())
    return BumpRun(root, status, out.getvalue(), version, bump.load_release([FIXTURES], version))


def test_the_bump_converts_the_v1_recipe_and_leaves_it_nothing_to_mirror(bumped: BumpRun) -> None:
    """The bump writes recipe-v1/ with convert-v1 (through render-ci) from the bumped meta.yaml: the
    committed conversion of the bumped recipe, its context the release's, and the real rattler-build
    renders it as meta.yaml for every configuration, so no row asks a person to mirror a change."""
    v1_dir = bumped.root / render_v1.V1_DIRNAME
    assert recipe_v1.stale(bumped.root) == []
    context = yaml.safe_load((v1_dir / "recipe.yaml").read_text())["context"]
    assert (str(context["version"]), context["sha256"], context["build"]) == (
        bumped.version,
        TEST_ONLY_SHA256,
        0,
    )
    assert not rows(bumped.table, "recipe-v1")
    assert "mirror" not in bumped.table
    differences = [
        difference.line()
        for config in sorted((bumped.root / ".ci_support").glob("*.yaml"))
        for difference in render_v1.compare_config(bumped.root / "recipe", config, v1_dir)[1]
    ]
    assert differences == []


def rows(table: str, area: str) -> list[list[str]]:
    found = []
    for line in table.splitlines():
        cells = [
            cell.strip().removeprefix("**").removesuffix("**")
            for cell in line.strip().strip("|").split(" | ")
        ]
        if len(cells) == 6 and cells[0] == area:
            found.append(cells)
    return found


def metadata_headers(release: bump.Release, key: str) -> set[str]:
    return {
        line.split(":", 1)[1].strip()
        for text in release.metadata.values()
        for line in text.splitlines()
        if line.startswith(f"{key}:")
    }


def test_the_bump_sets_version_hash_build_and_python_floor(bumped: BumpRun) -> None:
    meta = (bumped.root / "recipe/meta.yaml").read_text()
    assert recipe_edit.read_version(meta) == recipe_edit.RecipeVersion(bumped.version, TEST_ONLY_SHA256, 0)
    (requires_python,) = metadata_headers(bumped.release, "Requires-Python")
    floor = re.fullmatch(r">=(\d+\.\d+)", requires_python)[1]  # type: ignore[index]
    pinned = load_variant_config(next((REPO_ROOT / ".ci_support").glob("linux_64*.yaml")))["python_min"][0]
    if floor != str(pinned):
        assert recipe_edit.python_floor_skip(meta) == f"skip: true  # [py<{floor.replace('.', '')}]"
        for config in (bumped.root / ".ci_support").glob("*.yaml"):
            assert load_variant_config(config)["python_min"] == [floor], config.name
    else:
        assert recipe_edit.python_floor_skip(meta) is None
    # the other recipe text is the original one (only the lines the bump names change)
    original = (REPO_ROOT / "recipe/meta.yaml").read_text().splitlines()
    changed = [line for line in meta.splitlines() if line not in original]
    assert all(
        re.search(r"set (version|sha256|build) =|skip: true|^        - \w|^    \"pip\", ", line)
        for line in changed
    ), changed
    assert bumped.status == 2  # rows that need a person (below)
    assert "need a person" in bumped.table.splitlines()[-1]


def test_run_requirements_follow_the_wheels_metadata(bumped: BumpRun) -> None:
    recipe = recipe_edit.run_requirements((bumped.root / "recipe/meta.yaml").read_text())
    table_rows = {row[1]: row for row in rows(bumped.table, "run requirement")}
    for line in metadata_headers(bumped.release, "Requires-Dist"):
        name, spec, marker = parse_requirement(line)  # type: ignore[misc]
        if "extra" in marker or bump.CUDA_STACK.match(name):
            continue
        conda = next((n for n in recipe if n.replace("_", "-") == name), None)
        if conda is None:
            assert table_rows[name][4] == bump.PERSON, name
            continue
        wanted = spec[2:].rsplit(".", 1)[0] + ".*" if spec.startswith("~=") else spec.split(",")[0]
        assert wanted == "*" or wanted in recipe[conda][0], (conda, recipe[conda], spec)
        assert table_rows[conda][3] in (recipe[conda][0], "(any)")


def test_staging_rows_name_every_file_no_rule_claims(bumped: BumpRun) -> None:
    person = {row[1].split(":")[0] for row in rows(bumped.table, "staging") if row[4] == bump.PERSON}
    for subdir, source in bumped.release.wheels.items():
        shlib = {"linux": ".so", "osx": ".dylib", "win": ".dll"}[subdir.split("-")[0]]
        rules = _package_files.rules_for(shlib)
        unclaimed = [
            f"{tree}:{path}"
            for listed in source.files()
            for tree, path in bump.tree_paths(listed.path)
            if not any(_staging.rule_claims(rule, tree, path, shlib) for rule in rules)
        ]
        new_rows = [row for row in rows(bumped.table, "staging") if row[1] == f"{subdir}: new files"]
        if unclaimed:
            (row,) = new_rows
            assert row[3].startswith(f"{len(unclaimed)}: {unclaimed[0]}")
            assert subdir in person
        else:
            assert not new_rows


def test_bundled_versions_and_cuda_rows_come_from_the_wheels(bumped: BumpRun) -> None:
    configs = [load_variant_config(p) for p in (bumped.root / ".ci_support").glob("*.yaml")]
    bundled = {row[1]: row for row in rows(bumped.table, "bundled version")}
    for key, header, pattern, spelling in bump.BUNDLED_PINS:
        value = spelling(re.search(pattern, bumped.release.text(header)[1])[1])  # type: ignore[index]
        pins = {str(v) for config in configs for v in config[key]}
        assert bundled[key][3].startswith(value)
        assert bundled[key][4] == (bump.SAME if pins == {value} else bump.PERSON)
    cuda = {row[1]: row for row in rows(bumped.table, "CUDA")}
    for subdir, source in bumped.release.wheels.items():
        match = re.search(r"^cuda: Optional\[str\] = '([\d.]+)'", source.text("torch/version.py") or "", re.M)
        if match:
            built = {str(c["cuda_compiler_version"][0]) for c in configs if c["target_platform"] == [subdir]}
            assert cuda[f"{subdir}: PyPI's build"][3] == match[1]
            assert cuda[f"{subdir}: PyPI's build"][4] == (bump.SAME if match[1] in built else bump.PERSON)


def test_every_patch_hunk_is_judged_or_counted_unknown(bumped: BumpRun) -> None:
    hunks = [
        hunk
        for patch in sorted((bumped.root / "recipe/patches").glob("*.patch"))
        for diff in patch_hunks.parse_patch(patch.read_text())
        for hunk in diff.hunks
    ]
    judged = [row for row in rows(bumped.table, "patch") if row[2] in ("applies", "conflicts")]
    unknown = [row for row in rows(bumped.table, "patch") if row[2] == "unknown"]
    counted = int(unknown[0][1].split()[0]) if unknown else 0
    assert len(judged) + counted == len(hunks)
    assert all(row[4] == (bump.SAME if row[2] == "applies" else bump.PERSON) for row in judged)


def test_the_bumped_feedstock_renders_and_solves(bumped: BumpRun, monkeypatch: pytest.MonkeyPatch) -> None:
    """render-ci --check and solve-check pass on the bumped copy. solve-check's records of the dependencies
    are real conda-forge records of the 2.13.0 era; a run requirement the bump raised past its record (a
    "solve-check record" row) gets a TEST-ONLY record at the lowest version the new spec admits."""
    raised = {row[1]: row[3] for row in rows(bumped.table, "solve-check record")}
    real_load = solve_channel.load_metadata

    def with_test_records(path: Path = solve_channel.METADATA_FILE) -> dict:
        data = real_load(path)
        for entry in data["dependencies"]:
            if entry["name"] in raised:
                spec = raised[entry["name"]]
                entry["version"] = (
                    spec.removesuffix(".*") + ".0" if spec.endswith(".*") else spec.split(",")[0][2:]
                )
                entry["source"] = "TEST VALUE (tests/test_bump.py): a version the bumped spec admits"
        return data

    monkeypatch.setattr(solve_channel, "load_metadata", with_test_records)
    # the requests for a Python below the release's floor ("solve-check request" rows) are left out, as the
    # person the rows name would change them
    below_floor = {row[1] for row in rows(bumped.table, "solve-check request")}
    real_requests = solve_check.load_requests
    (requires_python,) = metadata_headers(bumped.release, "Requires-Python")
    floor = tuple(map(int, requires_python.removeprefix(">=").split(".")))
    assert below_floor == {
        request.name
        for request in real_requests()[1]
        for spec in request.specs
        if (match := re.fullmatch(r"python (\d+)\.(\d+)\.\*", spec))
        and (int(match[1]), int(match[2])) < floor
    }

    def without_requests_below_the_floor(path: Path = solve_check.REQUESTS_FILE) -> tuple:
        machines, requests = real_requests(path)
        return machines, [request for request in requests if request.name not in below_floor]

    monkeypatch.setattr(solve_check, "load_requests", without_requests_below_the_floor)
    assert ci_support.drift(bumped.root, PINNING) == []
    linkage = rows(bumped.table, "linkage")
    assert {row[1] for row in linkage} == set(bumped.release.wheels)
    status = main(
        [
            "solve-check",
            "--recipe-dir",
            str(bumped.root / "recipe"),
            "--ci-support",
            str(bumped.root / ".ci_support"),
            "--pinning",
            str(PINNING),
        ]
    )
    assert status == 0


# ---- bad input: one line, exit 1, nothing written ------------------------------------------------------


def _recipe_bytes(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for name in ("recipe", ".ci_support", ".github")
        for p in sorted((root / name).rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    return copy_feedstock(tmp_path / "feedstock")


def _fixture_dir(tmp_path: Path, leave_out: str = "") -> Path:
    directory = tmp_path / "wheels"
    directory.mkdir()
    for path in FIXTURES.iterdir():
        if not leave_out or leave_out not in path.name:
            shutil.copy2(path, directory / path.name)
    return directory


def _refused(capsys: pytest.CaptureFixture[str], root: Path, argv: list[str]) -> str:
    before = _recipe_bytes(root)
    status = main(["bump", *argv, "--root", str(root), "--pinning", str(PINNING)])
    err = capsys.readouterr().err
    assert status == 1
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    assert _recipe_bytes(root) == before
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
    current = recipe_edit.read_version((scratch / "recipe/meta.yaml").read_text()).version
    version = {"RELEASE": release_version(), "CURRENT": current}.get(version, version)
    sha256 = sha256.replace("RELEASE", release_version())
    err = _refused(capsys, scratch, [version, "--sha256", sha256, "--wheels", str(FIXTURES)])
    assert words in err


def test_a_missing_wheel_is_named_with_its_pip_download_line(
    capsys: pytest.CaptureFixture[str], scratch: Path, tmp_path: Path
) -> None:
    target = wheel_source.TARGETS[-1]
    wheels = _fixture_dir(tmp_path, leave_out=target.platform_tag)
    err = _refused(
        capsys, scratch, [release_version(), "--sha256", TEST_ONLY_SHA256, "--wheels", str(wheels)]
    )
    assert target.pip_download(release_version()) in err


def test_a_wheel_of_another_version_than_its_name_is_refused(
    capsys: pytest.CaptureFixture[str], scratch: Path, tmp_path: Path
) -> None:
    target = wheel_source.TARGETS[-1]
    wheels = _fixture_dir(tmp_path, leave_out=target.platform_tag)
    current = recipe_edit.read_version((scratch / "recipe/meta.yaml").read_text()).version
    with zipfile.ZipFile(wheels / target.wheel_name(release_version()), "w") as archive:
        archive.writestr("torch/__init__.py", "")
        archive.writestr(
            f"torch-{current}.dist-info/METADATA", f"Metadata-Version: 2.4\nName: torch\nVersion: {current}\n"
        )
        archive.writestr(f"torch-{current}.dist-info/WHEEL", f"Tag: cp312-cp312-{target.platform_tag}\n")
    err = _refused(
        capsys, scratch, [release_version(), "--sha256", TEST_ONLY_SHA256, "--wheels", str(wheels)]
    )
    assert f"METADATA says ['torch'] {current}" in err


def test_a_wheel_of_another_platform_than_its_name_is_refused(
    capsys: pytest.CaptureFixture[str], scratch: Path, tmp_path: Path
) -> None:
    target = wheel_source.TARGETS[-1]
    wheels = _fixture_dir(tmp_path, leave_out=target.platform_tag)
    version = release_version()
    with zipfile.ZipFile(wheels / target.wheel_name(version), "w") as archive:
        archive.writestr("torch/__init__.py", "")
        archive.writestr(
            f"torch-{version}.dist-info/METADATA", f"Metadata-Version: 2.4\nName: torch\nVersion: {version}\n"
        )
        archive.writestr(f"torch-{version}.dist-info/WHEEL", "Tag: cp312-cp312-manylinux_2_28_x86_64\n")
    err = _refused(capsys, scratch, [version, "--sha256", TEST_ONLY_SHA256, "--wheels", str(wheels)])
    assert f"not {target.platform_tag}" in err


def test_a_failure_while_rendering_puts_every_file_back(
    capsys: pytest.CaptureFixture[str], scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recipe is written before render-ci runs; a render that fails half-way leaves nothing behind."""

    def render_half_way(root: Path, pinning: Path) -> list[str]:
        (root / ".ci_support" / "half_written.yaml").write_text("python_min: ['3.99']\n")
        next(iter(sorted((root / ".ci_support").glob("linux_64*.yaml")))).write_text("broken\n")
        raise bump.ToolError("render-ci failed half-way (test double)")

    monkeypatch.setattr(bump.ci_support, "write_files", render_half_way)
    err = _refused(capsys, scratch, [release_version(), "--sha256", TEST_ONLY_SHA256, "--wheels", str(DATA)])
    assert "render-ci failed half-way" in err


def test_the_python_floor_edit_undoes_itself() -> None:
    meta = (REPO_ROOT / "recipe/meta.yaml").read_text()
    config = (REPO_ROOT / "recipe/conda_build_config.yaml").read_text()
    raised_meta, raised_config = recipe_edit.set_python_floor(meta, config, "3.12")
    assert recipe_edit.python_floor_skip(raised_meta) == "skip: true  # [py<312]"
    assert raised_config.endswith('python_min:\n  - "3.12"\n')
    assert recipe_edit.set_python_floor(raised_meta, raised_config, None) == (meta, config)
    # raising it again replaces the first floor instead of adding a second
    again = recipe_edit.set_python_floor(raised_meta, raised_config, "3.13")
    assert again[1].count("python_min:") == 1 and again[0].count("skip: true  # [py<") == 1


def test_needs_rows_compare_the_needs_lists_of_both_versions(bumped: BumpRun) -> None:
    current = recipe_edit.read_version((REPO_ROOT / "recipe/meta.yaml").read_text()).version
    needs = {row[1]: row for row in rows(bumped.table, "needs")}
    for target in wheel_source.TARGETS:
        old = wheel_source.find_wheel([DATA], current, target)
        new = bumped.release.wheels[target.subdir]
        if old is None:
            assert target.subdir not in needs
            continue
        old_needs, new_needs = bump.needed_libraries(old), bump.needed_libraries(new)
        assert needs[target.subdir][2] == f"{len(old_needs)} libraries"
        shown = needs[target.subdir][3]
        assert shown.startswith(f"{len(new_needs)}: ")
        assert all(f"+{name}" in shown for name in new_needs - old_needs)
        assert all(f"-{name}" in shown for name in old_needs - new_needs)


def test_the_build_backend_of_the_wheels_is_in_the_host(bumped: BumpRun) -> None:
    generators = set()
    for source in bumped.release.wheels.values():
        member = bump.dist_info_member(source, "WHEEL")
        generators |= set(re.findall(r"^Generator: (\S+) \(?([\d.]+)", source.text(member) or "", re.M))
    tools = recipe_edit.python_host_tools((bumped.root / "recipe/meta.yaml").read_text())
    if {name for name, _ in generators} == {bump.SKBUILD}:
        lowest = min((version for _, version in generators), key=lambda v: tuple(map(int, v.split("."))))
        assert f"{bump.SKBUILD} >={lowest}" in tools
    else:
        assert not any(tool.startswith(bump.SKBUILD) for tool in tools)


# ---- the bumped copy rehearses: STRICT, ratio 1.00, one configuration per platform ---------------------

# One configuration of each platform the release has a wheel for (a glob of the bumped copy's .ci_support),
# each rehearsed against the 2.15-shaped stand-in: linux-64 with CUDA and MAGMA, linux-aarch64 (cross, CUDA),
# osx-arm64 and win-64 (CUDA, no linalg library on Windows).
REHEARSED = {
    "linux-64": "linux_64_blas_implgeneric*cuda_compiler_version12.9*.yaml",
    "linux-aarch64": "linux_aarch64_arm_variant_typesbsa*cuda_compiler_version13.0*.yaml",
    "osx-arm64": "osx_arm64_*.yaml",
    "win-64": "win_64_cuda_compiler_version13.0.yaml",
}


@pytest.mark.rehearsal
@pytest.mark.parametrize("subdir", sorted(REHEARSED))
def test_the_bumped_feedstock_rehearses_strict_at_ratio_one(
    bumped: BumpRun, subdir: str, tmp_path: Path, host_pythons: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bumped recipe picks the 2.15-shaped stand-in by itself (scikit-build-core in its host), skips the
    Pythons below the release's floor, and every pass compiles only its own targets."""
    from feedstock_tools.proofs.rehearsal import report, standins
    from feedstock_tools.proofs.rehearsal.harness import DEFAULT_WORK_ROOT, Rehearsal

    (config,) = sorted((bumped.root / ".ci_support").glob(REHEARSED[subdir]))
    rehearsal = Rehearsal(
        config,
        work_root=tmp_path,
        cache_root=DEFAULT_WORK_ROOT / ".cache",
        recipe_dir=bumped.root / "recipe",
        progress=lambda _line: None,
    )
    monkeypatch.setenv("MEGABUILD_STRICT", "1")
    rehearsal.prepare()
    rehearsal.run()
    assert rehearsal.standin == standins.STANDINS[standins.SKBUILD]
    assert_rehearsal_succeeded(rehearsal)  # builds, import and linkage checks, ratio, exit status
    floor = recipe_edit.python_floor_skip((bumped.root / "recipe/meta.yaml").read_text())
    pythons = {r.step.python for r in rehearsal.results if r.step.name == "pytorch"}
    if floor:
        oldest = re.search(r"py<(\d)(\d+)", floor)
        assert all(tuple(map(int, p.split("."))) >= (int(oldest[1]), int(oldest[2])) for p in pythons), (
            pythons
        )
    ratio = report.work_ratio(rehearsal)
    assert ratio.ratio == 1.0, ratio.formula()
    assert ratio.extra_pythons >= 1
    checks = report.import_checks(rehearsal)
    assert checks and all(check.ok for check in checks), [c.detail for c in checks if not c.ok]
    assert {json.loads(c.detail)["version"] for c in checks} == {bumped.version}
