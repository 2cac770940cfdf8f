"""The .ci_support generator: conda-build/conda-smithy semantics, and the repository's files up to date."""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from bump_fixtures import copy_feedstock

from feedstock_tools.__main__ import main
from feedstock_tools.ci import ci_support, ci_workflow, forge_config, smithy_templates
from feedstock_tools.common.configuration import parse_configuration, read_configuration
from feedstock_tools.common.errors import ToolError
from feedstock_tools.conda import cuda_arch, used_vars, variants
from feedstock_tools.conda.recipe_render import render_recipe

REPO = ci_support.REPO_ROOT
# This project's copy of conda-forge's pinning, named explicitly (the tools look elsewhere by default).
PINNING = REPO.parent / "shared" / "data" / "conda-forge-pinning"
MEGABUILD_LOOPS = ("python", "magma_variant", "blas_impl")


@pytest.fixture(scope="module")
def rendered() -> list[ci_support.CiConfig]:
    return ci_support.render_all(REPO, PINNING)


# --- the repository's CI files ------------------------------------------------------------------------------


def test_ci_files_match_a_rerender() -> None:
    """The drift a rerender would fix: any missing, extra or stale .ci_support file (or workflow matrix)."""
    assert ci_support.drift(REPO, PINNING) == []


def test_configurations_are_the_recipe_issue_matrix(rendered: list[ci_support.CiConfig]) -> None:
    seen = {
        (
            c.subdir,
            tuple(c.data.get("blas_impl", ["-"])),
            c.data.get("cuda_compiler_version", ["None"])[0],
            c.data.get("arm_variant_type", ["-"])[0],
        )
        for c in rendered
    }
    cuda_versions = {"12.9", "13.0"}
    # linux-64 and osx-64 build both BLAS in one job (docs/reference/recipe.md, "What splits CI jobs")
    both = ("generic", "mkl")
    expected = {("linux-64", both, cuda, "-") for cuda in cuda_versions | {"None"}}
    # linux-aarch64: ARM servers (sbsa, the key in every file of the platform) and Jetson (tegra, 12.9 only)
    expected |= {("linux-aarch64", ("generic",), cuda, "sbsa") for cuda in cuda_versions | {"None"}}
    expected |= {("linux-aarch64", ("generic",), "12.9", "tegra")}
    expected |= {("osx-64", both, "None", "-")}
    expected |= {("osx-arm64", ("generic",), "None", "-")}
    # Windows: MKL only, CUDA held at 12.8 (recipe/conda_build_config.yaml, docs/reference/windows.md)
    expected |= {("win-64", ("mkl",), cuda, "-") for cuda in ("None", "12.8", "13.0")}
    assert seen == expected
    assert len(rendered) == len(expected) == 12


def test_megabuild_loops_stay_inside_one_job(rendered: list[ci_support.CiConfig]) -> None:
    pinned = variants.parse_variant_text(
        (PINNING / "conda_build_config.yaml").read_text(), "linux-64", {"BUILD_PLATFORM": "linux-64"}
    )
    python314 = yaml.safe_load((REPO / ".ci_support/migrations/python314.yaml").read_text())["python"]
    all_pythons = sorted(pinned["python"] + python314)
    for config in rendered:
        assert config.data["python"] == all_pythons, config.name
        for key in MEGABUILD_LOOPS:
            assert key not in config.name, config.name
        # linux CUDA builds both linalg variants; Windows has no separate linalg library
        # (docs/reference/windows.md)
        if config.data["cuda_compiler_version"] != ["None"] and config.subdir.startswith("linux"):
            assert config.data["magma_variant"] == ["magma", "nomagma"], config.name


def test_one_output_that_ignores_blas_keeps_both_blas_in_one_job(tmp_path: Path) -> None:
    """conda-smithy splits jobs on the keys every output uses at top level: the generic metapackage's
    force_ignore_keys is what keeps blas_impl out of that intersection (docs/reference/recipe.md, "What
    splits CI jobs"). Without it, osx-64 is two jobs again, one per BLAS."""
    root = _copy_feedstock(tmp_path)
    settings = forge_config.read_forge_settings(root / "conda-forge.yml")

    def osx_64_jobs() -> list[tuple[str, list[str]]]:
        configs = ci_support.render_platform(root, PINNING, "osx_64", settings, {})
        return [(config.name, config.data["blas_impl"]) for config in configs]

    assert osx_64_jobs() == [("osx_64_", ["generic", "mkl"])]
    merged = packages(root, ci_support.render_platform(root, PINNING, "osx_64", settings, {}))
    meta = root / "recipe" / "meta.yaml"
    ignoring = "      force_ignore_keys:\n        - blas_impl\n"
    assert meta.read_text().count(ignoring) == 1
    meta.write_text(meta.read_text().replace(ignoring, ""))
    assert osx_64_jobs() == [("osx_64_blas_implgeneric", ["generic"]), ("osx_64_blas_implmkl", ["mkl"])]
    # the one job makes the packages the two made, but for the generic metapackage's hash (blas_impl left
    # its hash input); the real conda-build render agrees, every job (docs/records/2026-12-07-merged-blas.md)
    separate = packages(root, ci_support.render_platform(root, PINNING, "osx_64", settings, {}))
    assert sorted(merged) == sorted(separate) and len(merged) == len(set(merged)) > 4


def packages(root: Path, configs: list[ci_support.CiConfig]) -> list[tuple]:
    """What a package is, less its hash: name, version, build string, number, run requirements, run_exports,
    for every output of every job (the recipe as it is in ``root`` at the call)."""
    rendered = []
    for config in configs:
        configuration = parse_configuration(ci_support.dump_config(config.data), root / f"{config.name}.yaml")
        for output in render_recipe(root / "recipe", configuration).outputs:
            build_string = re.sub(r"_h[0-9a-f]{7}_", "_h*_", output.build_string)
            run = (output.requirements.run, output.requirements.run_constrained)
            rendered.append(
                (output.name, output.version, build_string, output.build_number, run, output.run_exports)
            )
    return rendered


def test_cross_compiled_targets_use_their_build_platform(rendered: list[ci_support.CiConfig]) -> None:
    by_target = {c.subdir: c.build_platform for c in rendered}
    assert by_target["linux-aarch64"] == "linux-64"
    # macOS runs on Apple silicon (conda-forge.yml, as pytorch-cpu-feedstock 74dd3d46)
    assert by_target["osx-64"] == "osx-arm64"
    assert by_target["osx-arm64"] == "osx-arm64"
    aarch64 = next(c for c in rendered if c.subdir == "linux-aarch64")
    assert aarch64.data["docker_image"] == ["quay.io/condaforge/linux-anvil-x86_64:alma10"]


def test_migrations_are_the_shared_pinnings_files() -> None:
    for path in (REPO / ".ci_support" / "migrations").glob("*.yaml"):
        assert path.read_bytes() == (PINNING / "migrations" / path.name).read_bytes(), path.name


def test_skip_render_lists_every_file_this_project_writes() -> None:
    settings = forge_config.read_forge_settings(REPO / "conda-forge.yml")
    skipped = set(settings.raw["skip_render"])

    def is_skipped(path: str) -> bool:
        # conda-smithy skips a path when it or any parent folder is listed
        return bool({path, *(str(parent) for parent in Path(path).parents)} & skipped)

    own_files = ["README.md", "LICENSE.txt", ".gitignore", ".gitattributes", "build-locally.py"]
    own_files += [
        ".ci_support/README",
        ".github/workflows/conda-build.yml",
        ".github/workflows/automerge.yml",
    ]
    own_files += [str(path.relative_to(REPO)) for path in (REPO / ".scripts").iterdir()]
    assert [path for path in own_files if not is_skipped(path)] == []


def test_workflow_matrix_has_one_job_per_configuration(rendered: list[ci_support.CiConfig]) -> None:
    workflow = yaml.safe_load((REPO / ci_workflow.WORKFLOW).read_text())
    include = workflow["jobs"]["build"]["strategy"]["matrix"]["include"]
    assert [entry["CONFIG"] for entry in include] == [c.name for c in rendered]
    for entry in include:
        if entry["os"] == "ubuntu":
            assert entry["runs_on"][0].startswith("cirun-openstack-gpu-2xlarge--${{ github.run_id }}-")
            assert entry["CONDA_FORGE_DOCKER_RUN_ARGS"] == "--gpus all"
        elif entry["CONFIG"].startswith("win_64_"):
            # conda-smithy's Windows entry: a Namespace runner keeps Miniforge and the build on D:
            assert entry["os"] == "windows"
            assert entry["runs_on"] == ["namespace-profile-16cpu-4x-on-windows-64"]
            assert entry["build_platform"] == "win-64"
            assert (entry["build_workspace_dir"], entry["tools_install_dir"]) == (
                "D:\\\\bld\\\\",
                "D:\\Miniforge",
            )
            assert "CONDA_FORGE_DOCKER_RUN_ARGS" not in entry
        else:
            # conda-forge's 12-CPU Apple-silicon Namespace runner (osx-64 cross-compiled there;
            # docs/reference/ci.md)
            assert entry["runs_on"] == ["namespace-profile-12cpu-on-osx-arm64"], entry["CONFIG"]
            assert "CONDA_FORGE_DOCKER_RUN_ARGS" not in entry


def test_windows_folders_are_on_d_where_conda_smithy_puts_them() -> None:
    """conda-smithy 2026.8.5: D: on GitHub's hosted Windows images and Namespace runners, C: elsewhere."""
    assert ci_workflow.windows_drive(["windows-2022"]) == "D:"
    assert ci_workflow.windows_drive(["namespace-profile-16cpu-4x-on-windows-64"]) == "D:"
    assert ci_workflow.windows_drive(["windows", "x64", "self-hosted"]) == "C:"


def test_macos_jobs_ask_for_the_12_cpu_runner(rendered: list[ci_support.CiConfig]) -> None:
    for config in rendered:
        macos = ["namespace-profile-12cpu-on-osx-arm64"]
        expected = macos if config.subdir.startswith("osx") else ["cirun-openstack-gpu-2xlarge"]
        if config.subdir == "win-64":
            expected = ["namespace-profile-16cpu-4x-on-windows-64"]
        assert config.data["github_actions_labels"] == expected, config.name


def _copy_feedstock(tmp_path: Path) -> Path:
    """The parts of the repository a rerender reads or writes, in a scratch folder."""
    names = ("recipe", ".ci_support", ".github", ".scripts", ".circleci", "templates")
    return copy_feedstock(tmp_path / "feedstock", REPO, (*names, "conda-forge.yml", "build-locally.py"))


def _render_ci(
    capsys: pytest.CaptureFixture[str], root: Path, *options: str
) -> subprocess.CompletedProcess[str]:
    """``python -m feedstock_tools render-ci`` on a copy of the feedstock, through the command's own entry
    point (``feedstock_tools.__main__.main``: its arguments, exit status and error line) in this process,
    where the renders other tests made are cached (a fresh process renders everything again: 10 s of CPU)."""
    arguments = ["render-ci", *options, "--root", str(root), "--pinning", str(PINNING)]
    status = main(arguments)
    output = capsys.readouterr()
    return subprocess.CompletedProcess(arguments, status, output.out, output.err)


def test_render_ci_check_cli_reports_drift(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy_feedstock(tmp_path)
    configs = sorted((root / ".ci_support").glob("*.yaml"))
    configs[0].unlink()
    (root / ".ci_support" / "linux_64_stale.yaml").write_text("python:\n- '2.7'\n")
    floor = read_configuration(configs[1]).python_min  # the oldest Python, one minor older
    older = f"{floor.split('.')[0]}.{int(floor.split('.')[1]) - 1}"
    configs[1].write_text(configs[1].read_text().replace(f"- '{floor}'", f"- '{older}'"))
    result = _render_ci(capsys, root, "--check")
    assert result.returncode == 1
    assert f"missing: .ci_support/{configs[0].name}" in result.stdout
    assert "extra: .ci_support/linux_64_stale.yaml" in result.stdout
    assert f"out of date: .ci_support/{configs[1].name}" in result.stdout
    assert result.stderr.strip() == (
        "error: 3 CI file(s) differ from a rerender; run: python -m feedstock_tools render-ci"
    )
    fixed = _render_ci(capsys, root)
    assert fixed.returncode == 0
    assert not (root / ".ci_support" / "linux_64_stale.yaml").exists()
    assert ci_support.drift(root, PINNING) == []


def test_render_ci_check_names_a_mistyped_architecture_list_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A GPU architecture list of meta.yaml the build driver would refuse is one line of --check beside the
    drift (none here: the lists reach no CI file), never a traceback, and the summary names the fix."""
    root = _copy_feedstock(tmp_path)
    meta = root / "recipe" / "meta.yaml"
    (line,) = [arch for arch in cuda_arch.arch_lines(meta.read_text()) if arch.value][-1:]
    first, second, *rest = line.value.split(";")
    lines = meta.read_text().split("\n")
    lines[line.line - 1] = lines[line.line - 1].replace(line.value, ";".join([second, first, *rest]))
    meta.write_text("\n".join(lines))
    result = _render_ci(capsys, root, "--check")
    assert result.returncode == 1
    (refused,) = result.stdout.splitlines()
    assert refused.startswith(f"refused by the build driver: recipe/meta.yaml:{line.line}: cuda_arch_list '")
    assert "not ordered oldest first" in refused
    assert result.stderr.strip() == (
        "error: 1 GPU architecture list(s) refused; fix the cuda_arch_list line(s) of meta.yaml named above"
    )


# --- the files conda-smithy renders from its templates whatever skip_render says --------------------------


def test_templates_render_to_the_committed_files() -> None:
    """conda-smithy's Jinja environment (feedstock templates first) renders each file unchanged."""
    environment = smithy_templates.smithy_jinja_environment(REPO)
    # A few of the variables conda-smithy renders its templates with: the raw block must ignore them.
    forge_config = {"configs": [], "github_actions": {"timeout_minutes": 360}, "upload_on_branch": "main"}
    for item in smithy_templates.SMITHY_RENDERED:
        rendered_text = environment.get_template(item.template).render(**forge_config)
        assert rendered_text == (REPO / item.path).read_text(encoding="utf-8"), item.path


@pytest.mark.parametrize(
    "text",
    [
        "no trailing newline",
        "two trailing newlines\n\n",
        "#!/bin/bash\necho ${{ github.run_id }} {{ not_a_variable }} {% if x %}{# c #}\n",
        "{% raw %} nested opening tags are text\n",
        "",
    ],
)
def test_template_renders_exactly_the_text(tmp_path: Path, text: str) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "x.tmpl").write_text(smithy_templates.template_for(Path("x"), text))
    rendered_text = smithy_templates.smithy_jinja_environment(tmp_path).get_template("x.tmpl").render()
    assert rendered_text == text


@pytest.mark.parametrize(
    ("text", "message"),
    [("a\r\nb\n", "carriage returns"), ("x {%- endraw %} y\n", "endraw"), ("{% endraw\n%}", "endraw")],
)
def test_template_refuses_text_a_raw_block_cannot_hold(text: str, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        smithy_templates.template_for(Path("x"), text)


def test_every_file_smithy_renders_has_a_template() -> None:
    templates = {path.name for path in (REPO / smithy_templates.TEMPLATES).iterdir()}
    assert templates == {item.template for item in smithy_templates.SMITHY_RENDERED}
    for item in smithy_templates.SMITHY_RENDERED:
        mode = (REPO / item.path).stat().st_mode
        assert bool(mode & 0o111) == item.executable, item.path


def test_check_reports_template_drift_lost_exec_bits_and_skip_render_gaps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _copy_feedstock(tmp_path)
    script = root / ".scripts" / "build_steps.sh"
    script.write_text(script.read_text() + "echo edited without render-ci\n")
    script.chmod(0o644)
    (root / "templates" / "README.md.tmpl").write_text("stray\n")
    forge = root / "conda-forge.yml"
    forge.write_text(forge.read_text().replace("  - .github ", "  - .github/workflows/conda-build.yml "))
    (root / ".circleci" / "config.yml").write_text("version: 2\n")

    assert ci_support.drift(root, PINNING) == [
        "extra: templates/README.md.tmpl (conda-smithy would render it in place of its own template)",
        "out of date: templates/build_steps.sh.tmpl",
        "out of date: templates/circle.yml.tmpl",
        "not executable: .scripts/build_steps.sh (a rerender sets its executable bits)",
        "not in skip_render: .github/PULL_REQUEST_TEMPLATE.md (a rerender would write it)",
        "not in skip_render: .github/workflows/automerge.yml (a rerender would write it)",
        "not in skip_render: .github/workflows/webservices.yml (a rerender would write it)",
    ]
    ci_support.write_files(root, PINNING)
    # render-ci regenerates templates and exec bits; skip_render is conda-forge.yml's, edited by hand.
    assert [p for p in ci_support.drift(root, PINNING) if not p.startswith("not in skip_render")] == []
    environment = smithy_templates.smithy_jinja_environment(root)
    assert environment.get_template("build_steps.sh.tmpl").render() == script.read_text()
    assert environment.get_template("circle.yml.tmpl").render() == "version: 2\n"
    result = _render_ci(capsys, root, "--check")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "error: 3 CI file(s) differ from a rerender; "
        "add the files not in skip_render to skip_render in conda-forge.yml"
    )


def test_a_missing_smithy_rendered_file_is_a_one_line_error(tmp_path: Path) -> None:
    root = _copy_feedstock(tmp_path)
    (root / ".circleci" / "config.yml").unlink()
    with pytest.raises(ToolError, match=r"^\.circleci/config\.yml is missing: conda-smithy writes it"):
        ci_support.drift(root, PINNING)


def test_readme_skip_is_the_exact_entry() -> None:
    settings = forge_config.read_forge_settings(REPO / "conda-forge.yml")
    without_readme = [entry for entry in settings.raw["skip_render"] if entry != "README.md"]
    changed = forge_config.ForgeSettings(**{**settings.__dict__, "raw": {"skip_render": without_readme}})
    assert smithy_templates.skip_render_gaps(changed) == ["README.md", ".github/CODEOWNERS"]


# --- conda-build's variant algebra ------------------------------------------------------------------------


def test_base_loader_keeps_every_value_as_text() -> None:
    spec = variants.parse_variant_text("a:\n  - 12.0\n  - true  # [linux]\n  - None\n", "osx-64", {})
    assert spec == {"a": ["12.0", "None"]}


def test_unknown_selector_names_are_false() -> None:
    text = "k:\n  - x  # [magma_variant == 'magma']\n  - y  # [not magma_variant]\n"
    assert variants.parse_variant_text(text, "linux-64", {}) == {"k": ["y"]}


def test_selectors_read_the_given_environment() -> None:
    text = 'k:\n  - 1\n  - 2  # [os.environ.get("CF_CUDA_ENABLED", "False") == "True"]\n'
    assert variants.parse_variant_text(text, "linux-64", {"CF_CUDA_ENABLED": "True"})["k"] == ["1", "2"]
    assert variants.parse_variant_text(text, "linux-64", {})["k"] == ["1"]


def test_combine_replaces_whole_zip_groups_and_merges_extend_keys() -> None:
    base = {
        "a": ["1", "2"],
        "b": ["x", "y"],
        "zip_keys": [["a", "b"]],
        "pin_run_as_build": {"p": {"max_pin": "x"}},
    }
    override = {"a": ["3"], "b": ["z"], "pin_run_as_build": {"q": {"max_pin": "x.x"}}}
    combined = variants.combine_specs([base, override])
    assert combined["a"] == ["3"] and combined["b"] == ["z"]
    assert set(combined["pin_run_as_build"]) == {"p", "q"}
    with pytest.raises(variants.VariantError, match="zip group"):
        variants.combine_specs([base, {"a": ["9"]}])


def test_explode_moves_zipped_keys_together_and_squish_inverts_it() -> None:
    spec = {"a": ["1", "2"], "b": ["x", "y"], "c": ["p", "q"], "zip_keys": [["a", "b"]]}
    exploded = variants.explode(spec)
    assert len(exploded) == 4
    assert {(v["a"], v["b"]) for v in exploded} == {("1", "x"), ("2", "y")}
    squished = variants.squish(exploded)
    assert sorted(squished["c"]) == ["p", "q"]
    assert sorted(zip(squished["a"], squished["b"], strict=True)) == [("1", "x"), ("2", "y")]


def test_key_add_migration_appends_a_zip_row_in_ordering_order() -> None:
    base = {
        "cuda_compiler_version": ["None", "12.9"],
        "c_compiler_version": ["15", "14"],
        "zip_keys": [["c_compiler_version", "cuda_compiler_version"]],
    }
    migration = {
        "__migrator": {
            "operation": "key_add",
            "primary_key": "cuda_compiler_version",
            "ordering": {"cuda_compiler_version": ["12.8", "None", "12.9", "13.0"]},
        },
        "cuda_compiler_version": ["13.0"],
        "c_compiler_version": ["15"],
        "migrator_ts": 1.0,
    }
    result = variants.variant_add(base, migration)
    assert result["cuda_compiler_version"] == ["None", "12.9", "13.0"]
    assert result["c_compiler_version"] == ["15", "14", "15"]


def test_version_migration_takes_the_higher_pin() -> None:
    base = {"libtorch": ["2.12"], "pybind11_abi": ["4"], "c_stdlib_version": ["11.0"]}
    migration = {"__migrator": {"kind": "version"}, "libtorch": ["2.13"], "pybind11_abi": ["11"]}
    result = variants.variant_add(base, migration)
    assert result == {"libtorch": ["2.13"], "pybind11_abi": ["11"], "c_stdlib_version": ["11.0"]}


def test_migrations_apply_in_timestamp_order() -> None:
    stamps = [variants.migration_timestamp(p.read_text()) for p in ci_support.migration_files(REPO)]
    assert stamps == sorted(stamps) and len(stamps) >= 3


# --- conda-build's used-variable scan -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("{{ python }}", {"python"}),
        ("{{ python_min }}", {"python_min"}),
        ("    - python {{ python_min }}.*", {"python_min"}),
        ("{{ python|lower }}", {"python"}),
        ("{{ pin_compatible('python', max_pin='x.x') }}", {"python"}),
        ("    - python", {"python"}),
        ("    - python >=3.10", set()),
        ('{% set tools = ["python >=3.10"] %}', {"python"}),
        ('{% set x = "python_min" %}', {"python_min"}),
        # conda-build's {% if %} pattern matches a key anywhere after "if", inside a longer name too
        ('{% if python_min != "" %}', {"python", "python_min"}),
        ('{% if cuda_compiler_version != "None" %}', {"cuda_compiler"}),
        ("{% for v in python %}", {"python"}),
        ("{%- if python %}", set()),
    ],
)
def test_used_variable_scan(text: str, found: set[str]) -> None:
    # Expected sets: what conda-build 26.7.1's find_used_variables_in_text returns for the same text
    # and keys (run on this machine, docs/records/2026-11-29-real-conda-tools.md).
    keys = ("python", "python_min", "cuda_compiler")
    assert set(used_vars.find_used_in_text(keys, text)) == found


def test_compiler_and_stdlib_calls_use_their_keys() -> None:
    keys = ("c_compiler", "c_compiler_version", "c_stdlib", "c_stdlib_version", "cuda_compiler_version")
    text = "    - {{ compiler('c') }}\n    - {{ stdlib('c') }}\n"
    assert set(used_vars.find_used_in_text(keys, text)) == set(keys) - {"cuda_compiler_version"}


def test_selectors_are_scanned_separately() -> None:
    line = '    - patch  # [cuda_compiler_version != "None"]'
    assert used_vars.find_used_in_text(("cuda_compiler_version",), line, selectors_only=True)
    assert not used_vars.find_used_in_text(("cuda_compiler_version",), line)


def test_run_only_requirements_do_not_count() -> None:
    block = "  - name: x\n    requirements:\n      host:\n        - zlib\n      run:\n        - libpng\n"
    used = used_vars.used_in_meta_yaml(
        ("zlib", "libpng"), block, block, used_vars.requirement_names(block), {}
    )
    assert used == {"zlib"}
    # the rendered requirements decide: a host entry generated by a loop still counts
    rendered = used_vars.rendered_requirements({"host": ["libpng 1.6"], "run": ["libpng >=1.6"]})
    assert used_vars.used_in_meta_yaml(("zlib", "libpng"), block, block, rendered, {}) == {"zlib", "libpng"}


def test_run_only_trim_follows_conda_build() -> None:
    # conda-build's trim_build_only_deps: a run requirement counts only as a whole rendered entry
    assert used_vars.trim_run_only({"libpng"}, {"run": ["libpng >=1.6"]}, {}) == {"libpng"}
    assert used_vars.trim_run_only({"libpng"}, {"run": ["libpng"]}, {}) == set()
    # ... and a key only in build is dropped when ignore_build_only_deps lists it
    variant = {"ignore_build_only_deps": ["python", "numpy"]}
    assert used_vars.trim_run_only({"numpy", "zlib"}, {"build": ["numpy", "zlib"]}, variant) == {"zlib"}
    assert used_vars.trim_run_only({"numpy"}, {"build": ["numpy"], "host": ["numpy 2"]}, variant) == {"numpy"}


def test_outputs_are_cut_like_conda_build() -> None:
    # metadata.py: the outputs section ends at test/extra/about; an output starts at "- name:" or "- type:"
    text = (
        "package:\n  name: a\noutputs:\n  - name: x\n    script: x.sh\n  - type: conda\n    name: y\n"
        "build:\n  number: 0\nabout:\n  home: h\n"
    )
    assert used_vars.outputs_text(text).endswith("build:\n  number: 0\n")
    assert used_vars.output_blocks(text) == [
        "  - name: x\n    script: x.sh\n",
        "  - type: conda\n    name: y\n",
    ]


def test_cuda_detection_ignores_commented_lines() -> None:
    assert used_vars.recipe_has_cuda_compiler("    - {{ compiler('cuda') }}  # [linux]\n")
    assert not used_vars.recipe_has_cuda_compiler("    # - {{ compiler('cuda') }}\n")


# --- names and the YAML conda-smithy writes ---------------------------------------------------------------


def test_config_name_and_short_name() -> None:
    config = {"python": ["3.12"], "b": ["x y*"], "target_platform": ["linux-64"]}
    name = ci_support.config_name("linux_64", config, {"b", "target_platform"})
    assert name == "linux_64_bx_y_"
    long_name = "linux_64_" + "x" * 60
    short = ci_support.short_config_name(long_name)
    # conda-smithy 2026.8.5 dump_subspace_config_files: 40 characters, "_h", 8 hex digits of the SHA-256
    assert short == long_name[:40] + "_h" + hashlib.sha256(long_name.encode()).hexdigest()[:8]
    assert ci_support.short_config_name(name) == name
    # characters not legal in paths everywhere are dropped from the name
    assert ci_support.config_name("linux_64", {"b": ["<1,2>|a/b"]}, {"b"}) == "linux_64_b12ab"


def test_dump_sorts_keys_quotes_numbers_and_orders_pins(rendered: list[ci_support.CiConfig]) -> None:
    text = next(c for c in rendered if c.subdir == "linux-64").text
    lines = text.splitlines()
    top_keys = [line[:-1] for line in lines if line.endswith(":") and not line.startswith((" ", "-"))]
    assert top_keys == sorted(top_keys)
    assert "- '2.17'" in lines
    assert lines[lines.index("  python:") + 1 : lines.index("  python:") + 3] == [
        "    min_pin: x.x",
        "    max_pin: x.x",
    ]
    assert yaml.safe_load(text)["zip_keys"][0][-1] == "cuda_compiler_version"


def test_missing_pinning_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="pass --pinning"):
        ci_support.render_all(REPO, tmp_path)


def test_break_up_splits_on_top_level_keys_and_keeps_the_rest_as_lists() -> None:
    values = {
        "cuda_compiler_version": ["None", "12.9"],
        "c_compiler_version": ["15", "14"],
        "blas_impl": ["mkl", "generic"],
        "python": ["3.11.* *_cpython", "3.10.* *_cpython"],
        "zip_keys": [["c_compiler_version", "cuda_compiler_version"]],
    }
    configs = ci_support._break_up({"cuda_compiler_version", "c_compiler_version", "blas_impl"}, values)
    assert len(configs) == 4
    rows = {(c["blas_impl"][0], c["cuda_compiler_version"][0], c["c_compiler_version"][0]) for c in configs}
    assert rows == {
        (b, cuda, cc) for b in ("mkl", "generic") for cuda, cc in (("None", "15"), ("12.9", "14"))
    }
    for config in configs:
        assert config["python"] == ["3.10.* *_cpython", "3.11.* *_cpython"]
        assert config["zip_keys"] == [["c_compiler_version", "cuda_compiler_version"]]
