"""``python -m feedstock_tools bump`` on a scratch copy of the feedstock, with the fixture sets cut from the
real wheels (tests/data/bump, ``bump VERSION --cut-fixtures``) and the 2.13.0 file lists beside them; then
the rows worked through as docs/guides/bump-a-release.md says, and the suite's checks on the result.

The expected rows are read from the fixtures and the recipe, not written here: the release is the next
fixture release after the recipe's version (:mod:`bump_fixtures`), its Python floor and requirements their
METADATA's, its bundled versions their headers'.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from dataclasses import dataclass
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
    fixture_versions,
    next_release,
)
from rehearsal_outcome import assert_rehearsal_succeeded, two_pythons
from run_once import made_once_per_run

from feedstock_tools.__main__ import main
from feedstock_tools.common import user_cache
from feedstock_tools.common.configuration import read_configuration
from feedstock_tools.common.feedstock import Feedstock
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.conda import python_floor, recipe_v1
from feedstock_tools.maintainer import check, patch_hunks, render_v1
from feedstock_tools.maintainer.upstream_versions import parse_requirement
from feedstock_tools.maintainer.version_compare import satisfies, version_numbers
from feedstock_tools.proofs.solve import solve_channel, solve_check
from feedstock_tools.release import (
    backend_rows,
    bundled_rows,
    linkage_rows,
    recipe_edit,
    requirement_rows,
    staging_rows,
    wheel_source,
)
from feedstock_tools.release.release_metadata import Release, dist_info_member, load_release, release_cuda
from feedstock_tools.release.rows import PERSON, SAME
from megabuild import package_files, staging


@dataclass(frozen=True)
class BumpRun:
    root: Path
    status: int
    table: str
    version: str
    release: Release


def run_bump(root: Path, version: str) -> tuple[int, str]:
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
    return status, out.getvalue()


@pytest.fixture(scope="session")
def bumped(tmp_path_factory: pytest.TempPathFactory) -> BumpRun:
    """The bump run on a copy of the feedstock, once for every xdist worker (its tests are not grouped)."""
    version = next_release()

    def bump(directory: Path) -> None:
        status, table = run_bump(copy_feedstock(directory / "feedstock"), version)
        (directory / "table.txt").write_text(table)
        (directory / "status.txt").write_text(f"{status}\n")

    directory = made_once_per_run(tmp_path_factory, "bump", bump)
    status = int((directory / "status.txt").read_text())
    table = (directory / "table.txt").read_text()
    return BumpRun(directory / "feedstock", status, table, version, load_release([FIXTURES], version))


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


def metadata_headers(release: Release, key: str) -> set[str]:
    return {
        line.split(":", 1)[1].strip()
        for text in release.metadata.values()
        for line in text.splitlines()
        if line.startswith(f"{key}:")
    }


# ---- the rows of the bump -------------------------------------------------------------------------------


def test_the_bump_converts_the_v1_recipe_and_leaves_it_nothing_to_mirror(bumped: BumpRun) -> None:
    """The bump writes recipe-v1/ with convert-v1 (render-ci's writer) from the bumped meta.yaml: what the
    command writes for the bumped recipe, its context the release's (the hash quoted: YAML reads an
    all-digit hash as a number), and no row asks a person to mirror a change (the real rattler-build's
    render of it against meta.yaml's: check, on the worked copy below)."""
    v1_dir = bumped.root / render_v1.V1_DIRNAME
    assert recipe_v1.stale(bumped.root) == []
    text = (v1_dir / "recipe.yaml").read_text()
    assert f'  sha256: "{TEST_ONLY_SHA256}"\n' in text
    context = yaml.safe_load(text)["context"]
    assert (str(context["version"]), context["sha256"], context["build"]) == (
        bumped.version,
        TEST_ONLY_SHA256,
        0,
    )
    assert (v1_dir / "conda_build_config.yaml").read_text() == (
        bumped.root / "recipe/conda_build_config.yaml"
    ).read_text()
    assert not rows(bumped.table, "recipe-v1")
    assert "mirror" not in bumped.table
    (ci_row,) = rows(bumped.table, "ci")
    assert ci_row[1] == ".ci_support, workflow and recipe-v1"


def test_the_bump_sets_version_hash_build_and_python_floor(bumped: BumpRun) -> None:
    meta = (bumped.root / "recipe/meta.yaml").read_text()
    assert recipe_edit.read_version(meta) == recipe_edit.RecipeVersion(bumped.version, TEST_ONLY_SHA256, 0)
    (requires_python,) = metadata_headers(bumped.release, "Requires-Python")
    floor = re.fullmatch(r">=(\d+\.\d+)", requires_python)[1]  # type: ignore[index]
    pinned = read_configuration(next((REPO_ROOT / ".ci_support").glob("linux_64*.yaml"))).python_min
    if floor != pinned:
        assert python_floor.python_floor_skip(meta) == f"skip: true  # [py<{floor.replace('.', '')}]"
        for config in (bumped.root / ".ci_support").glob("*.yaml"):
            assert read_configuration(config).python_min == floor, config.name
    else:
        assert python_floor.python_floor_skip(meta) is None
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
    """Every requirement of one line takes the wheels' bound (a CUDA-series package's lines: the test
    below)."""
    meta = (bumped.root / "recipe/meta.yaml").read_text()
    recipe = recipe_edit.run_requirements(meta)
    per_cuda = {line.name for line in per_cuda_version_lines(meta)}
    table_rows = {row[1].split(" [")[0]: row for row in rows(bumped.table, "run requirement")}
    for line in metadata_headers(bumped.release, "Requires-Dist"):
        name, spec, marker = parse_requirement(line)  # type: ignore[misc]
        if "extra" in marker or requirement_rows.CUDA_STACK.match(name) or name in per_cuda:
            continue
        conda = next((n for n in recipe if n.replace("_", "-") == name), None)
        if conda is None:
            assert table_rows[name][4] == PERSON, name
            continue
        wanted = spec[2:].rsplit(".", 1)[0] + ".*" if spec.startswith("~=") else spec.split(",")[0]
        assert wanted == "*" or wanted in recipe[conda][0], (conda, recipe[conda], spec)
        assert table_rows[conda][3] in (recipe[conda][0], "(any)")


def test_a_requirement_of_the_cuda_series_gets_a_line_per_cuda_version(bumped: BumpRun) -> None:
    """The CUDA wheel's cuda-bindings spec is its CUDA major's series: for a recipe without it, the row
    quotes one line per CUDA version of the Linux configurations, the wheel's spec for its major, the other
    major's series for the rest; for a recipe with those lines, each keeps its own row, and only the line
    of the wheel's major takes the wheel's spec."""
    cuda = release_cuda(bumped.release)
    assert cuda, "PyPI's Linux wheel of the release is a CUDA build"
    series = {}
    for line in metadata_headers(bumped.release, "Requires-Dist"):
        parsed = parse_requirement(line)
        if parsed and "extra" not in parsed[2] and requirement_rows.cuda_series(parsed[1], cuda):
            series[parsed[0]] = parsed[1]
    assert series, "the release's CUDA wheel names no package of its CUDA series"
    linux_cuda = sorted(
        {
            c.cuda
            for c in map(read_configuration, (bumped.root / ".ci_support").glob("linux_*.yaml"))
            if c.cuda is not None
        }
    )
    table = rows(bumped.table, "run requirement")
    for name, spec in series.items():
        missing = [row for row in table if row[1] == name and row[2] == "(not in the recipe)"]
        if missing:
            lines = re.findall(r"`(- [^`]+)`", missing[0][5])
            shown = {re.search(r'cuda_compiler_version == "([\d.]+)"', line)[1]: line for line in lines}  # type: ignore[index]
        else:
            shown = {
                re.search(r'cuda_compiler_version == "([\d.]+)"', row[1])[1]: f"- {name} {row[3]}"  # type: ignore[index]
                for row in table
                if row[1].startswith(f"{name} [")
            }
        assert sorted(shown) == linux_cuda
        for version, line in shown.items():
            if version.split(".")[0] == cuda.split(".")[0]:
                assert f" {requirement_rows.conda_spec(spec, '')}" in line
            else:
                assert "<its" not in line and cuda.split(".")[0] + "." not in line.split()[2], line


def test_staging_rows_name_every_file_no_rule_claims(bumped: BumpRun) -> None:
    person = {row[1].split(":")[0] for row in rows(bumped.table, "staging") if row[4] == PERSON}
    for subdir, source in bumped.release.wheels.items():
        shlib = staging_rows.shlib(subdir)
        rules = package_files.rules_for(shlib)
        unclaimed = [
            f"{tree}:{path}"
            for listed in source.files()
            for tree, path in staging_rows.tree_paths(listed.path)
            if not any(staging.rule_claims(rule, tree, path, shlib) for rule in rules)
        ]
        new_rows = [row for row in rows(bumped.table, "staging") if row[1] == f"{subdir}: new files"]
        if unclaimed:
            (row,) = new_rows
            assert row[3].startswith(f"{len(unclaimed)}: {unclaimed[0]}")
            assert subdir in person
        else:
            assert not new_rows


def test_bundled_versions_and_cuda_rows_come_from_the_wheels(bumped: BumpRun) -> None:
    configs = [read_configuration(p) for p in (bumped.root / ".ci_support").glob("*.yaml")]
    bundled = {row[1]: row for row in rows(bumped.table, "bundled version")}
    for pin in bundled_rows.BUNDLED_PINS:
        value = pin.spelling(re.search(pin.pattern, bumped.release.text(pin.header)[1])[1])  # type: ignore[index]
        pins = {value for config in configs for value in config.values_of(pin.key)}
        assert bundled[pin.key][3].startswith(value)
        assert bundled[pin.key][4] == (SAME if pins == {value} else PERSON)
        if pins != {value}:  # the row says what the difference means for this recipe, with both versions
            assert value in bundled[pin.key][5] and "recipe/" in bundled[pin.key][5]
    cuda = {row[1]: row for row in rows(bumped.table, "CUDA")}
    for subdir, source in bumped.release.wheels.items():
        match = re.search(r"^cuda: Optional\[str\] = '([\d.]+)'", source.text("torch/version.py") or "", re.M)
        if match:
            built = {c.cuda for c in configs if c.target_platform == subdir}
            assert cuda[f"{subdir}: PyPI's build"][3] == match[1]
            assert (match[1] in built) == (cuda[f"{subdir}: PyPI's build"][5] == "")


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
    assert all(row[4] == (SAME if row[2] == "applies" else PERSON) for row in judged)


def test_needs_rows_compare_the_needs_lists_of_both_versions(bumped: BumpRun) -> None:
    current = recipe_edit.read_version((REPO_ROOT / "recipe/meta.yaml").read_text()).version
    needs = {row[1]: row for row in rows(bumped.table, "needs")}
    for target in wheel_source.TARGETS:
        old = wheel_source.find_wheel([DATA], current, target)
        new = bumped.release.wheels[target.subdir]
        if old is None:
            assert target.subdir not in needs
            continue
        old_needs, new_needs = linkage_rows.needed_libraries(old), linkage_rows.needed_libraries(new)
        assert needs[target.subdir][2] == f"{len(old_needs)} libraries"
        shown = needs[target.subdir][3]
        assert shown.startswith(f"{len(new_needs)}: ")
        assert all(f"+{name}" in shown for name in new_needs - old_needs)
        assert all(f"-{name}" in shown for name in old_needs - new_needs)


def test_the_build_backend_of_the_wheels_is_in_the_host(bumped: BumpRun) -> None:
    generators = set()
    for source in bumped.release.wheels.values():
        member = dist_info_member(source, "WHEEL")
        generators |= set(re.findall(r"^Generator: (\S+) \(?([\d.]+)", source.text(member) or "", re.M))
    tools = recipe_edit.python_host_tools((bumped.root / "recipe/meta.yaml").read_text())
    if {name for name, _ in generators} == {backend_rows.SKBUILD}:
        lowest = min((version for _, version in generators), key=version_numbers)
        assert f"{backend_rows.SKBUILD} >={lowest}" in tools
    else:
        assert not any(tool.startswith(backend_rows.SKBUILD) for tool in tools)


# ---- the rows worked through as docs/guides/bump-a-release.md says, then the suite's checks ----------


@dataclass(frozen=True)
class Worked:
    root: Path
    version: str
    added_lines: list[str]  # run requirement lines the rows named
    test_records: dict[str, str]  # name -> the TEST-ONLY record version the record rows needed


@pytest.fixture(scope="session")
def worked(bumped: BumpRun, tmp_path_factory: pytest.TempPathFactory) -> Worked:
    """The bumped copy after the rows docs/guides/bump-a-release.md tells a person to work through here: the
    run requirements a row names, each line as the row writes it; the solve-check records a row asks for
    (TEST-ONLY records at the lowest version the spec admits: the real ones are conda-forge's,
    docs/guides/bump-a-release.md), the requests below the floor dropped. Rows that need the tarball, a real
    build or a decision (patches, bundled versions, the staging of Windows' static libraries) change nothing
    these checks read. meta.yaml is the one recipe edited: convert-v1 then carries the lines to recipe-v1."""
    root = tmp_path_factory.mktemp("worked") / "feedstock"
    shutil.copytree(bumped.root, root)
    lines = [
        line
        for row in rows(bumped.table, "run requirement")
        if row[4] == PERSON and row[2] == "(not in the recipe)"
        for line in re.findall(r"`(- [^`]+)`", row[5])
    ]
    meta = root / "recipe/meta.yaml"
    meta.write_text(add_run_lines(meta.read_text(), lines))
    assert main(["convert-v1", "--root", str(root)]) == 0
    records = {}
    for row in rows(bumped.table, "solve-check record"):
        if row[4] == PERSON:
            spec = row[3].split(",")[0]
            records[row[1].split()[0]] = spec.removesuffix(".*") + ".0" if spec.endswith(".*") else spec[2:]
    return Worked(root, bumped.version, lines, records)


@pytest.fixture
def test_records(worked: Worked, bumped: BumpRun, monkeypatch: pytest.MonkeyPatch) -> None:
    """solve-check with the worked copy's TEST-ONLY records and without the requests below the floor."""
    real_load = solve_channel.load_metadata

    def with_test_records(path: Path = solve_channel.METADATA_FILE) -> dict:
        data = real_load(path)
        for entry in data["dependencies"]:
            if entry["name"] in worked.test_records:
                entry["version"] = worked.test_records[entry["name"]]
                entry["source"] = "TEST VALUE (tests/release/test_bump.py): a version the bumped spec admits"
        return data

    monkeypatch.setattr(solve_channel, "load_metadata", with_test_records)
    below_floor = {row[1] for row in rows(bumped.table, "solve-check request")}
    real_requests = solve_check.load_requests

    def without_requests_below_the_floor(facts: object, path: Path = solve_check.REQUESTS_FILE) -> tuple:
        machines, requests = real_requests(facts, path)
        return machines, [request for request in requests if request.name not in below_floor]

    monkeypatch.setattr(solve_check, "load_requests", without_requests_below_the_floor)


def test_the_worked_copy_renders_and_solves(worked: Worked, bumped: BumpRun, test_records: None) -> None:
    """render-ci --check and solve-check pass on the worked copy: the run requirements the rows added solve
    for every configuration they select (a record of each CUDA series), and every other record meets its
    spec."""
    assert {row[1] for row in rows(bumped.table, "linkage")} == set(bumped.release.wheels)
    status = main(
        [
            "solve-check",
            "--recipe-dir",
            str(worked.root / "recipe"),
            "--ci-support",
            str(worked.root / ".ci_support"),
            "--pinning",
            str(PINNING),
        ]
    )
    assert status == 0


def test_check_passes_on_the_worked_copy_with_the_bumps_patch_verdicts(
    worked: Worked, bumped: BumpRun
) -> None:
    """check finds nothing (render-ci's drift, recipe-v1 against meta.yaml with the real rattler-build for
    every configuration, the lines the rows added included, and anchor parity); its patch table gives every
    hunk the bump judged the bump's verdict and detail (one evidence: the file the bump wrote)."""
    reports = []
    findings = check.run_checks(worked.root, PINNING, reports.append)
    assert [f.line() for f in findings] == []
    (report,) = reports
    assert report.evidence.name == f"pytorch-{bumped.version}-from-wheels.txt"
    by_hunk = {(Path(row.patch).name[:4], row.hunk): row for row in report.rows}
    for row in rows(bumped.table, "patch"):
        if row[2] in ("applies", "conflicts"):
            number, hunk = row[1].split(" ", 1)
            assert by_hunk[(number, hunk)].verdict.value == row[2]
            assert row[3].startswith(by_hunk[(number, hunk)].detail)


def per_cuda_version_lines(meta: str) -> list[recipe_edit.RunLine]:
    """The run requirement lines selected by one CUDA version each (a CUDA-series package's)."""
    return [
        line
        for line in recipe_edit.run_requirement_lines(meta)
        if re.search(r'cuda_compiler_version == "[\d.]+"', line.selector or "")
    ]


def test_the_next_bump_keeps_each_cuda_series(worked: Worked, bumped: BumpRun) -> None:
    """Bumping the worked copy again (to the next fixture release, else the same one) rewrites only the line
    of PyPI's CUDA series and keeps the other series' line as it is, without a row for a person."""
    later = [v for v in fixture_versions() if version_numbers(v) > version_numbers(bumped.version)]
    release = load_release([FIXTURES], later[0] if later else bumped.version)
    meta = (worked.root / "recipe/meta.yaml").read_text()
    new_meta, found = requirement_rows.requirement_changes(release, meta, Feedstock(worked.root))
    cuda = release_cuda(release)
    lines = per_cuda_version_lines(meta)
    assert lines, "the worked recipe has a line per CUDA version (cuda-bindings)"
    for line in lines:
        (after,) = [n for n in recipe_edit.run_requirement_lines(new_meta) if n.selector == line.selector]
        major = re.search(r'== "(\d+)\.', line.selector or "")[1]  # type: ignore[index]
        if major == cuda.split(".")[0]:  # type: ignore[union-attr]
            spec = requirement_rows.requirements(release)[line.name][0]
            assert after.spec == requirement_rows.conda_spec(spec, line.spec)
        else:
            assert after.spec == line.spec
    names = {line.name for line in lines}
    assert not [row for row in found if row.status == PERSON and row.item.split()[0].rstrip(":") in names]


def test_the_records_of_each_cuda_series_are_conda_forges(worked: Worked) -> None:
    """solve_metadata.yaml has a real record (with its source) of every CUDA version's line."""
    records = solve_channel.load_metadata()["dependencies"]
    for line in per_cuda_version_lines((worked.root / "recipe/meta.yaml").read_text()):
        meeting = [r for r in records if r["name"] == line.name and satisfies(str(r["version"]), line.spec)]
        assert meeting and all("conda-forge/" in r["source"] for r in meeting), line


# ---- the bumped copy rehearses: STRICT, ratio 1.00, one configuration per platform ---------------------

# One configuration of each platform the release has a wheel for (a glob of the bumped copy's .ci_support),
# each rehearsed against the 2.15-shaped stand-in: linux-64 with CUDA and MAGMA, linux-aarch64 (cross, CUDA),
# osx-arm64 and win-64 (CUDA, no linalg library on Windows).
REHEARSED = {
    "linux-64": "linux_64_*cuda_compiler_version12.9*.yaml",
    "linux-aarch64": "linux_aarch64_arm_variant_typesbsa*cuda_compiler_version13.0*.yaml",
    "osx-arm64": "osx_arm64_*.yaml",
    "win-64": "win_64_cuda_compiler_version13.0.yaml",
}


@pytest.mark.rehearsal
@pytest.mark.parametrize("subdir", sorted(REHEARSED))
def test_the_worked_copy_rehearses_strict_at_ratio_one(
    worked: Worked,
    subdir: str,
    tmp_path: Path,
    host_pythons: dict,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bumped recipe picks the 2.15-shaped stand-in by itself (scikit-build-core in its host), skips the
    Pythons below the release's floor, and every pass compiles only its own targets."""
    from feedstock_tools.proofs.rehearsal import report, standins
    from feedstock_tools.proofs.rehearsal.harness import Rehearsal

    (config,) = sorted((worked.root / ".ci_support").glob(REHEARSED[subdir]))
    # one BLAS of a job that builds both (the bumped recipe's passes are the point; both BLAS of a job:
    # tests/proofs/rehearsal/test_rehearsal.py)
    configuration = read_configuration(config)
    if len(configuration.blases) > 1:
        configuration = configuration.for_blas("generic")
    rehearsal = Rehearsal(
        config,
        configuration=configuration,
        work_root=tmp_path,
        cache_root=user_cache.rehearsal_cache(),
        recipe_dir=worked.root / "recipe",
        progress=lambda _line: None,
        pythons=two_pythons(config, worked.root / "recipe"),
    )
    monkeypatch.setenv("MEGABUILD_STRICT", "1")
    rehearsal.prepare()
    rehearsal.run()
    assert rehearsal.standin == standins.STANDINS[standins.SKBUILD]
    assert_rehearsal_succeeded(rehearsal)  # builds, import and linkage checks, ratio, exit status
    floor = python_floor.python_floor_skip((worked.root / "recipe/meta.yaml").read_text())
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
    assert {json.loads(c.detail)["version"] for c in checks} == {worked.version}
