"""What ``conda smithy rerender`` writes to ``.ci_support/``, computed from the recipe and the pinning.

For every platform that ``conda-forge.yml`` gives a CI provider, conda-smithy

1. sets ``BUILD_PLATFORM`` (the build machine of that platform, ``linux-64`` for a cross-compiled
   ``linux-aarch64``), ``DEFAULT_LINUX_VERSION`` (``os_version``) and, once ``meta.yaml`` calls
   ``compiler('cuda')`` on a non-comment line, ``CF_CUDA_ENABLED=True`` -- the names the global
   pinning's selectors read;
2. combines conda-build's defaults, the global pinning and ``recipe/conda_build_config.yaml``, then
   applies the migrations of ``.ci_support/migrations/`` in ``migrator_ts`` order;
3. renders the recipe for every variant and collects the keys each output *uses*
   (:mod:`feedstock_tools.conda.used_vars`); the keys used by the top level (the recipe without ``outputs:``
   plus its first output) that take more than one value become separate CI jobs, everything else stays
   inside a job as a list;
4. writes one file per job, named ``<platform>_<arch>_`` + the sorted job-splitting keys and their
   values, with every value list sorted and the YAML dumped by PyYAML.

``python -m feedstock_tools render-ci`` writes the files (and the job matrix of
``.github/workflows/conda-build.yml``) and the ``templates/`` that make conda-smithy write this
project's own workflow, build scripts and CircleCI file instead of its stock ones, and recipe-v1/ (the v1
recipe generated from meta.yaml, :mod:`feedstock_tools.conda.recipe_v1`); ``--check`` reports missing, extra
and stale files, scripts that lost their executable bits and files ``skip_render`` does not protect,
instead.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import yaml

from feedstock_tools.ci.ci_config import CiConfig
from feedstock_tools.ci.ci_workflow import TIMEOUT_LINE, WORKFLOW, render_workflow_matrix, splice_matrix
from feedstock_tools.ci.forge_config import ForgeSettings, read_forge_settings
from feedstock_tools.ci.smithy_templates import (
    TEMPLATES,
    executable_paths,
    is_executable,
    skip_render_gaps,
    smithy_templates,
)
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.feedstock import CI_SUPPORT, Feedstock, configuration_files
from feedstock_tools.common.inputs import read_text
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.conda import cuda_arch, meta_render, recipe_v1, used_vars
from feedstock_tools.conda.first_pass import render_first_pass
from feedstock_tools.conda.pinning import add_pinning_argument, locate_pinning
from feedstock_tools.conda.recipe_files import read_recipe_file
from feedstock_tools.conda.selectors import SelectorError, select_lines, selector_namespace
from feedstock_tools.conda.variants import SPECIAL_KEYS as SPECIAL
from feedstock_tools.conda.variants import (
    Spec,
    Variant,
    VariantError,
    as_list,
    combine_specs,
    default_variant,
    explode,
    migration_timestamp,
    parse_variant_text,
    squish,
    variant_add,
)
from megabuild import atomic_file

# Keys conda-smithy keeps in every CI file whether or not the recipe mentions them (conda-smithy 2026.8.5
# configure_feedstock.py: _collapse_subpackage_variants, always_keep_keys; target_platform for a recipe
# that is not noarch, github_actions_labels when the github_actions provider is enabled).
ALWAYS_KEEP = frozenset(
    {
        "zip_keys",
        "pin_run_as_build",
        "MACOSX_DEPLOYMENT_TARGET",
        "MACOSX_SDK_VERSION",
        "macos_min_version",
        "macos_machine",
        "channel_sources",
        "channel_targets",
        "docker_image",
        "build_number_decrement",
    }
)
# conda-smithy adds python_min to the used keys when a line of meta.yaml matches this
# (_collapse_subpackage_variants: pm_pat), whatever the scan found.
PYTHON_MIN_LINE = re.compile(r".*\{\{ python_min \}\}")

# A configuration name this long gets a hashed short form for CI job labels (conda-smithy 2026.8.5
# dump_subspace_config_files: len >= 49 -> first 40 characters, "_h", 8 hex digits of its SHA-256).
SHORT_NAME_LIMIT = 49
SHORT_NAME_PREFIX = 40
SHORT_NAME_HASH = 8


@dataclass
class RecipeScan:
    """What the used-variable scan found for one platform."""

    all_used: set[str]
    top_level_used: set[str]
    rendered_variants: list[Variant]


# --- reading the inputs -----------------------------------------------------------------------------------


def migration_files(root: Path) -> list[Path]:
    """The feedstock's migrations, in the order conda-smithy applies them (timestamp, then path)."""
    files = configuration_files(Feedstock(root).migrations)
    return sorted(files, key=lambda path: (migration_timestamp(read_text(path)), str(path)))


def combined_spec(
    root: Path, pinning_dir: Path, subdir: str, environ: Mapping[str, str], recipe_dir: str = "recipe"
) -> Spec:
    """conda-build defaults + global pinning + recipe config, then the feedstock's migrations."""
    pinning_file = pinning_dir / "conda_build_config.yaml"
    if not pinning_file.is_file():
        raise ToolError(f"{pinning_file} not found: pass --pinning with conda-forge-pinning's directory")
    recipe_cbc = root / recipe_dir / "conda_build_config.yaml"
    try:
        pinning = parse_variant_text(read_text(pinning_file), subdir, environ, source=pinning_file)
        specs = [default_variant(subdir), pinning]
        if recipe_cbc.is_file():
            # the recipe's own file: its selectors may name the pinning's keys, and nothing else
            text = read_recipe_file(recipe_cbc, known=pinning)
            specs.append(parse_variant_text(text, subdir, environ, source=recipe_cbc))
        spec = combine_specs(specs)
        for path in migration_files(root):
            migration = parse_variant_text(read_text(path), subdir, environ, source=path)
            spec = variant_add(spec, migration)
    except (VariantError, SelectorError) as exc:
        raise ToolError(f"{subdir}: {exc}") from exc
    return spec


# --- rendering the recipe just far enough to see outputs, skips and force_use_keys --------------------------


def _jinja_context(variant: Mapping[str, Any], namespace: Mapping[str, Any]) -> dict[str, Any]:
    def passthrough(name: str, *args: Any, **kwargs: Any) -> str:
        return str(name)

    context: dict[str, Any] = {key: value for key, value in namespace.items() if key not in ("os", "environ")}
    context.update({key: value for key, value in variant.items() if isinstance(value, str)})
    context.update(
        compiler=lambda language: f"{language}_compiler_stub",
        stdlib=lambda language: f"{language}_stdlib_stub",
        pin_subpackage=passthrough,
        pin_compatible=passthrough,
        cdt=lambda name: f"{name}-cdt-stub",
        PKG_HASH="0",
        PKG_BUILDNUM="0",
        CONDA_PY="0",
        environ={},
    )
    return context


def render_meta(selected: str, variant: Mapping[str, Any], namespace: Mapping[str, Any]) -> dict[str, Any]:
    """The recipe (selectors already applied) rendered with Jinja and read as YAML (through the one way
    into meta.yaml, :mod:`feedstock_tools.conda.meta_render`); a name the context lacks renders as empty
    text."""
    context = _jinja_context(variant, namespace)
    try:
        loaded = meta_render.load(meta_render.template(selected, jinja2.Undefined).render(**context))
    except (jinja2.TemplateError, yaml.YAMLError) as exc:
        raise ToolError(f"meta.yaml does not render for {context.get('target_platform')}: {exc}") from exc
    return loaded if isinstance(loaded, dict) else {}


def _is_true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "yes", "1"))


@dataclass(frozen=True)
class _Output:
    name: str
    selected: str
    unselected: str
    skipped: bool
    script: str | None
    force_use: frozenset[str]
    force_ignore: frozenset[str]
    requirements: dict[str, list[str]]


def _outputs(meta: Mapping[str, Any], selected: str, unselected: str) -> list[_Output]:
    rendered = meta.get("outputs") or []
    selected_blocks = used_vars.output_blocks(selected)
    unselected_blocks = used_vars.output_blocks(unselected)
    outputs = []
    for index, output in enumerate(rendered):
        build = output.get("build") or {}
        outputs.append(
            _Output(
                name=str(output.get("name", "")),
                selected=selected_blocks[index] if index < len(selected_blocks) else "",
                unselected=unselected_blocks[index] if index < len(unselected_blocks) else "",
                skipped=_is_true(build.get("skip", False)),
                script=output.get("script"),
                force_use=frozenset(str(k) for k in as_list(build.get("force_use_keys") or [])),
                force_ignore=frozenset(str(k) for k in as_list(build.get("force_ignore_keys") or [])),
                requirements=used_vars.rendered_requirements(output.get("requirements")),
            )
        )
    return outputs


def _output_used(
    keys: tuple[str, ...],
    output: _Output,
    *,
    variant: Mapping[str, Any],
    recipe_path: Path,
    selected: str,
    unselected: str,
) -> set[str]:
    used = used_vars.used_in_meta_yaml(keys, selected, unselected, output.requirements, variant)
    if output.script and output.script.endswith(".sh"):
        used |= used_vars.find_used_in_shell_script(keys, recipe_path / output.script)
    # conda-build always counts these two when the variant has them (the recipe is not noarch).
    used |= {key for key in ("target_platform", "channel_targets") if key in variant}
    return (used - output.force_ignore) | output.force_use


def scan_recipe(recipe_path: Path, subdir: str, build_subdir: str, variants: Sequence[Variant]) -> RecipeScan:
    """Render ``meta.yaml`` for every variant and collect the keys its outputs use (conda-smithy's view)."""
    meta_text = read_text(recipe_path / "meta.yaml")
    all_used: set[str] = set()
    top_level_used: set[str] | None = None
    rendered: list[Variant] = []
    for variant in variants:
        keys = tuple(sorted(variant))
        namespace = selector_namespace(subdir, variant, environ={}, build_subdir=build_subdir)
        try:
            selected = select_lines(meta_text, namespace)
        except SelectorError as exc:
            raise ToolError(f"recipe/meta.yaml: {exc}") from exc
        meta = render_meta(selected, variant, namespace)
        if _is_true((meta.get("build") or {}).get("skip", False)):
            continue
        outputs = [o for o in _outputs(meta, selected, meta_text) if not o.skipped]
        if not meta.get("outputs"):
            # A single-output recipe: the top level is the package (scripts: build.sh).
            script = "build.sh" if (recipe_path / "build.sh").is_file() else None
            build = meta.get("build") or {}
            outputs = [
                _Output(
                    name=str((meta.get("package") or {}).get("name", "")),
                    selected=selected,
                    unselected=meta_text,
                    skipped=False,
                    script=script,
                    force_use=frozenset(as_list(build.get("force_use_keys") or [])),
                    force_ignore=frozenset(as_list(build.get("force_ignore_keys") or [])),
                    requirements=used_vars.rendered_requirements(meta.get("requirements")),
                )
            ]
        if not outputs:
            continue
        rendered.append(variant)
        for output in outputs:
            all_used |= _output_used(
                keys,
                output,
                variant=variant,
                recipe_path=recipe_path,
                selected=output.selected,
                unselected=output.unselected,
            )
        # conda-smithy asks every output of every variant for its "top-level" variables (the recipe text
        # without outputs, plus that output's own block) and keeps those all of them use
        # (_collapse_subpackage_variants: set.intersection of get_used_vars(force_top_level=True)).
        for output in outputs:
            used_here = _output_used(
                keys,
                output,
                variant=variant,
                recipe_path=recipe_path,
                selected=used_vars.top_level_text(selected) + output.selected,
                unselected=used_vars.top_level_text(meta_text) + output.unselected,
            )
            top_level_used = used_here if top_level_used is None else top_level_used & used_here
    return RecipeScan(all_used=all_used, top_level_used=top_level_used or set(), rendered_variants=rendered)


# --- conda-smithy's collapse of the variants into CI files ------------------------------------------------


def relevant_keys(spec: Spec, recipe_path: Path) -> set[str]:
    """Keys whose value can change what the scan sees: those the recipe's text mentions at all.

    The global pinning has a few multi-valued keys no PyTorch recipe mentions (``r_base``,
    ``libarrow``, ``nodejs``, ...). Their values cannot change a selector, a Jinja expression or a used
    variable, so the scan renders the recipe with only their first value instead of the full product
    (which would be thousands of renders); the keys still count as loop keys from the full spec.
    """
    texts = [read_text(path) for path in sorted(recipe_path.glob("*.sh"))]
    texts.append(read_text(recipe_path / "meta.yaml"))
    text = "\n".join(texts).replace("-", "_")
    relevant = set()
    for key in spec:
        function = re.match(r"(.*?)_(compiler|stdlib)(_version)?$", key)
        if key in text or (
            function and re.search(rf"{function.group(2)}\(['\"]{re.escape(function.group(1))}['\"]", text)
        ):
            relevant.add(key)
    return relevant


def reduce_spec(spec: Spec, relevant: set[str]) -> Spec:
    """``spec`` with every key (or zip group) that no relevant key belongs to cut to its first value."""
    reduced = dict(spec)
    groups = [list(group) for group in as_list(spec.get("zip_keys", []))]
    zipped = {key for group in groups for key in group}
    for key, value in spec.items():
        if key in SPECIAL or key in zipped or key in relevant or not isinstance(value, list):
            continue
        reduced[key] = value[:1]
    for group in groups:
        present = [key for key in group if key in spec]
        if present and not relevant & set(present):
            for key in present:
                reduced[key] = as_list(spec[key])[:1]
    return reduced


def spec_loop_keys(spec: Spec) -> set[str]:
    """The keys that take more than one value in the full matrix of ``spec`` (conda-build loop vars)."""
    return {
        key
        for key, value in spec.items()
        if key not in SPECIAL and isinstance(value, list) and len(set(map(str, value))) > 1
    }


def _merge_deployment_target(variants: Iterable[Variant]) -> list[Variant]:
    """On macOS conda-smithy sets MACOSX_DEPLOYMENT_TARGET (and raises MACOSX_SDK_VERSION) to
    ``max(c_stdlib_version, MACOSX_DEPLOYMENT_TARGET)`` in every variant."""
    from feedstock_tools.conda.variants import version_order

    result = []
    for variant in variants:
        if not str(variant.get("target_platform", "")).startswith("osx") or "c_stdlib_version" not in variant:
            result.append(variant)
            continue
        stdlib = variant["c_stdlib_version"]
        deployment = variant.get("MACOSX_DEPLOYMENT_TARGET", stdlib)
        stdlib = max(stdlib, deployment, key=version_order)
        sdk = variant.get("MACOSX_SDK_VERSION", stdlib)
        sdk = max(sdk, stdlib, key=version_order)
        result.append(
            {
                **variant,
                "c_stdlib_version": stdlib,
                "MACOSX_DEPLOYMENT_TARGET": stdlib,
                "MACOSX_SDK_VERSION": sdk,
            }
        )
    return result


def _trim_zip_keys(values: Spec) -> None:
    groups = [[key for key in group if key in values] for group in as_list(values.get("zip_keys", []))]
    groups = [group for group in groups if len(group) > 1]
    if groups:
        values["zip_keys"] = groups
    else:
        values.pop("zip_keys", None)


def _trim_pin_run_as_build(values: Spec) -> None:
    pins = values.get("pin_run_as_build") or {}
    used = {package: pin for package, pin in pins.items() if package.replace("-", "_") in values}
    if used:
        values["pin_run_as_build"] = used
    else:
        values.pop("pin_run_as_build", None)


def _used_values_in_input_order(squished_input: Spec, squished_used: Spec, all_used: set[str]) -> Spec:
    values = {key: squished_input[key] for key in all_used if key in squished_input}
    zipped: set[str] = set()
    for group in as_list(squished_input.get("zip_keys", [])):
        present = [key for key in group if key in squished_input]
        zipped |= set(group)
        used_group = [key for key in present if key in squished_used]
        if not used_group:
            continue
        input_rows = list(zip(*(squished_input[key] for key in used_group), strict=True))
        used_rows = set(zip(*(squished_used[key] for key in used_group), strict=True))
        kept = [row for row in input_rows if row in used_rows]
        for index, key in enumerate(used_group):
            if key in all_used:
                values[key] = [row[index] for row in kept]
    for key, value in squished_used.items():
        if key in all_used and key not in zipped:
            values[key] = value
    return values


def _dedupe(values: Spec) -> Spec:
    unique = {yaml.safe_dump(variant, sort_keys=True): variant for variant in explode(values)}
    return squish(unique.values())


def _sort_config(config: Spec, zip_groups: Sequence[Sequence[str]]) -> None:
    """conda-smithy ``sort_config``: zipped keys sorted row-wise, every other list sorted."""
    order: dict[str, list[int]] = {}
    for group in zip_groups:
        present = [key for key in group if key in config]
        if not present:
            continue
        rows = list(zip(*(config[key] for key in present), strict=True))
        indices = sorted(range(len(rows)), key=rows.__getitem__)
        for key in present:
            order[key] = indices
    for key, value in list(config.items()):
        if isinstance(value, list | set | tuple):
            items = list(value)
            config[key] = [items[i] for i in order[key]] if key in order else sorted(items)
        if key == "pin_run_as_build":
            config[key] = _Ordered(
                (
                    package,
                    _Ordered((pin, value[package][pin]) for pin in sorted(value[package], reverse=True)),
                )
                for package in sorted(value)
            )


class _Ordered(dict):
    """A mapping dumped in insertion order (conda-smithy represents its OrderedDicts that way)."""


def _break_up(top_level: Iterable[str], values: Spec) -> list[Spec]:
    """conda-smithy ``break_up_top_level_values``: one config per combination of the job-splitting keys."""
    values = {key: (list(v) if isinstance(v, list | tuple | set) else v) for key, v in values.items()}
    groups = [list(group) for group in as_list(values.get("zip_keys", []))]
    accounted: set[str] = set()
    dimensions: list[list[Spec]] = []
    zipped_dimensions: list[list[Spec]] = []
    for key in sorted(top_level):
        if key in accounted or key not in values:
            continue
        group = next((g for g in groups if key in g), None)
        if group is None:
            dimensions.append([{key: [value]} for value in values.pop(key)])
            continue
        accounted |= set(group)
        chunks: dict[tuple[Any, ...], list[Spec]] = {}
        for index in range(len(values[key])):
            top_row = tuple(values[k][index] for k in group if k in top_level)
            chunks.setdefault(top_row, []).append({k: [values[k][index]] for k in group})
        merged_chunks = []
        for rows in chunks.values():
            merged: Spec = {}
            for row in rows:
                for k, v in row.items():
                    merged.setdefault(k, []).extend(v)
            merged_chunks.append(merged)
        zipped_dimensions.append(merged_chunks)
        for k in group:
            values.pop(k, None)
    _sort_config(values, values.get("zip_keys", []))
    for chunk in itertools.chain.from_iterable(zipped_dimensions):
        _sort_config(chunk, groups)
    all_dimensions = dimensions + zipped_dimensions + ([[values]] if values else [])
    configs = []
    for combination in itertools.product(*all_dimensions):
        config: Spec = {}
        for part in combination:
            config.update(part)
        configs.append(config)
    return configs


def config_name(platform_arch: str, config: Mapping[str, Any], top_level: Iterable[str]) -> str:
    """``<platform>_<arch>_`` + each job-splitting key and its value, sorted by key."""
    key = "".join(f"{k}{config[k][0]}" for k in sorted(top_level) if k != "target_platform")
    # conda-smithy 2026.8.5 package_key, then dump_subspace_config_files drops characters that are not
    # legal in paths everywhere.
    return re.sub(r"[<>:?*,\"\/\|\\]", "", f"{platform_arch}_" + key.replace("*", "_").replace(" ", "_"))


def short_config_name(name: str) -> str:
    """The name conda-smithy uses for CI job labels when the full name is long."""
    if len(name) < SHORT_NAME_LIMIT:
        return name
    return (
        name[:SHORT_NAME_PREFIX] + "_h" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:SHORT_NAME_HASH]
    )


class _Dumper(yaml.Dumper):
    pass


def _represent_str(dumper: yaml.Dumper, data: str) -> yaml.Node:
    # conda-smithy 2026.8.5 _yaml_represent_str: conda-build reads every variant value as text, and
    # conda-smithy writes the texts "true"/"false" back as YAML booleans.
    if data in ("true", "false"):
        return dumper.represent_bool(data == "true")
    return dumper.represent_str(data)


_Dumper.add_representer(_Ordered, lambda dumper, data: dumper.represent_dict(data.items()))
_Dumper.add_representer(str, _represent_str)


def dump_config(config: Mapping[str, Any]) -> str:
    """The YAML text conda-smithy writes (PyYAML, block style, keys sorted, pins in their own order)."""
    return yaml.dump(dict(config), Dumper=_Dumper, default_flow_style=False)


def render_platform(
    root: Path,
    pinning_dir: Path,
    platform_arch: str,
    settings: ForgeSettings,
    environ: dict[str, str],
) -> list[CiConfig]:
    """The CI files of one target platform (``linux_64``, ``osx_arm64``, ...)."""
    subdir = platform_arch.replace("_", "-")
    build_subdir = settings.build_platform.get(platform_arch, platform_arch).replace("_", "-")
    recipe_path = root / settings.recipe_dir
    environ["BUILD_PLATFORM"] = build_subdir
    if platform_arch.startswith("linux") and settings.os_version.get(platform_arch):
        environ["DEFAULT_LINUX_VERSION"] = str(settings.os_version[platform_arch])
    meta_text = read_text(recipe_path / "meta.yaml")
    if used_vars.recipe_has_cuda_compiler(meta_text):
        environ["CF_CUDA_ENABLED"] = "True"
    # conda-smithy renders through conda-build's MetaData, whose first pass has no variant.
    render_first_pass(recipe_path, subdir, environ)
    spec = combined_spec(root, pinning_dir, subdir, environ, settings.recipe_dir)
    # A selector naming neither a platform nor a key of this spec is a typo conda-smithy would read as
    # False (recipe_files.py): it stops here, not as a silently different set of CI files.
    read_recipe_file(recipe_path / "meta.yaml", known=spec)
    loops = spec_loop_keys(spec)
    try:
        relevant = (
            relevant_keys(spec, recipe_path) | ALWAYS_KEEP | {"github_actions_labels", "target_platform"}
        )
        input_variants = explode(reduce_spec(spec, relevant))
    except ValueError as exc:
        raise ToolError(f"{subdir}: zip_keys groups of unequal length after migrations: {exc}") from exc
    scan = scan_recipe(recipe_path, subdir, build_subdir, input_variants)
    if not scan.rendered_variants:
        return []
    top_level = scan.top_level_used & loops
    if "target_platform" in scan.all_used:
        top_level.add("target_platform")
    squished_input = squish(_merge_deployment_target(input_variants))
    squished_used = squish(_merge_deployment_target(scan.rendered_variants))
    preserve = top_level - scan.all_used
    # render_all renders the github_actions provider only, so its labels are always kept.
    keep = set(ALWAYS_KEEP) | {"target_platform", "github_actions_labels"}
    if any(PYTHON_MIN_LINE.match(line) for line in meta_text.splitlines()):
        keep.add("python_min")
    all_used = scan.all_used | keep | scan.top_level_used
    values = _used_values_in_input_order(squished_input, squished_used, all_used)
    zipped_input = {key for group in as_list(squished_input.get("zip_keys", [])) for key in group}
    for key in preserve - zipped_input:
        values[key] = squished_input[key]
    _trim_zip_keys(values)
    _trim_pin_run_as_build(values)
    values = _dedupe(values)
    _trim_zip_keys(values)
    _trim_pin_run_as_build(values)
    configs = []
    for config in _break_up(top_level, values):
        if build_subdir.startswith("linux"):
            config["docker_image"] = (
                [config["docker_image"][0]] if "docker_image" in config else [settings.fallback_image]
            )
        name = config_name(platform_arch, config, top_level)
        configs.append(
            CiConfig(
                name=name,
                short_name=short_config_name(name),
                platform_arch=platform_arch,
                build_platform=build_subdir,
                data=config,
                text=dump_config(config),
            )
        )
    return sorted(configs, key=lambda c: c.name)


def render_all(root: Path, pinning_dir: Path, provider: str = "github_actions") -> list[CiConfig]:
    """Every CI file conda-smithy would write for ``provider``, in platform order."""
    settings = read_forge_settings(Feedstock(root).forge_yml)
    if not (root / settings.recipe_dir / "meta.yaml").is_file():
        raise ToolError(f"{root / settings.recipe_dir / 'meta.yaml'} not found: nothing to render")
    # conda-smithy sets these in its own process and never resets them between platforms.
    environ: dict[str, str] = {}
    configs: list[CiConfig] = []
    for platform_arch in settings.build_platform:
        if provider in settings.provider_of(platform_arch):
            configs.extend(render_platform(root, pinning_dir, platform_arch, settings, environ))
    return configs


# --- writing and checking -------------------------------------------------------------------------------


def expected_files(root: Path, pinning_dir: Path) -> dict[Path, str]:
    """Relative path -> text of every file this generator owns."""
    settings = read_forge_settings(Feedstock(root).forge_yml)
    configs = render_all(root, pinning_dir)
    files = {Path(CI_SUPPORT) / f"{config.name}.yaml": config.text for config in configs}
    workflow = root / WORKFLOW
    if workflow.is_file():
        text = splice_matrix(read_text(workflow), render_workflow_matrix(configs))
        # The job timeout comes from conda-forge.yml (github_actions.timeout_minutes), as with conda-smithy.
        files[WORKFLOW] = TIMEOUT_LINE.sub(rf"\g<1>{settings.timeout_minutes}", text, count=1)
    files.update(smithy_templates(root, files))
    return files


SKIP_RENDER_GAP = "not in skip_render:"


def _owned_files(root: Path) -> list[Path]:
    """The files present in the folders this generator owns entirely (relative paths)."""
    present = Feedstock(root).configuration_files()
    if (root / TEMPLATES).is_dir():
        present += sorted(path for path in (root / TEMPLATES).iterdir() if path.is_file())
    return [path.relative_to(root) for path in present]


def holds(path: Path, text: str) -> bool:
    """Whether a file a rerender writes holds ``text`` already; one that is not UTF-8 does not (a rerender
    replaces it, so it is out of date, not unreadable)."""
    try:
        return path.read_text(encoding="utf-8") == text
    except UnicodeDecodeError:
        return False


def drift(root: Path, pinning_dir: Path, expected: Mapping[Path, str] | None = None) -> list[str]:
    """One line per file a rerender would add, remove or change (empty when up to date); ``expected``: what
    :func:`expected_files` returned for these inputs, when the caller has it already."""
    expected = expected_files(root, pinning_dir) if expected is None else expected
    problems = []
    for path in sorted(set(expected) | set(_owned_files(root))):
        actual = root / path
        if path not in expected and path.parent == TEMPLATES:
            problems.append(f"extra: {path} (conda-smithy would render it in place of its own template)")
        elif path not in expected:
            problems.append(f"extra: {path} (no configuration of the recipe produces it)")
        elif not actual.is_file():
            problems.append(f"missing: {path}")
        elif not holds(actual, expected[path]):
            problems.append(f"out of date: {path}")
    for path in executable_paths():
        if (root / path).is_file() and not is_executable(root / path):
            problems.append(f"not executable: {path} (a rerender sets its executable bits)")
    settings = read_forge_settings(Feedstock(root).forge_yml)
    for path in skip_render_gaps(settings):
        problems.append(f"{SKIP_RENDER_GAP} {path} (a rerender would write it)")
    # the v1 recipe is generated from meta.yaml too (each line names convert-v1)
    return problems + recipe_v1.stale(root)


def write_files(root: Path, pinning_dir: Path) -> list[str]:
    """Write what a rerender writes; remove CI files no configuration produces. Returns the changes."""
    expected = expected_files(root, pinning_dir)
    changes = []
    for path in _owned_files(root):
        if path not in expected:
            (root / path).unlink()
            changes.append(f"removed {path}")
    for path, text in expected.items():
        target = root / path
        if not target.is_file() or not holds(target, text):
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_file.write_text(target, text)
            changes.append(f"wrote {path}")
    for path in executable_paths():
        target = root / path
        if target.is_file() and not is_executable(target):
            target.chmod(target.stat().st_mode | 0o111)
            changes.append(f"made {path} executable")
    return changes + recipe_v1.write(root)  # recipe-v1/ from meta.yaml: convert-v1


def arch_list_problems(root: Path) -> list[str]:
    """meta.yaml's GPU architecture lists the build driver would refuse, one line each: no CI file holds
    them, but every CUDA job builds with one (:mod:`feedstock_tools.conda.cuda_arch`)."""
    settings = read_forge_settings(Feedstock(root).forge_yml)
    meta = root / settings.recipe_dir / "meta.yaml"
    return [
        f"{ARCH_LIST_PROBLEM} {problem.line()}"
        for problem in cuda_arch.problems(read_text(meta), f"{settings.recipe_dir}/meta.yaml")
    ]


ARCH_LIST_PROBLEM = "refused by the build driver:"


def _check_failure(problems: Sequence[str]) -> str:
    """The one-line summary of ``render-ci --check``: what fixes the problems it listed."""
    gaps = sum(problem.startswith(SKIP_RENDER_GAP) for problem in problems)
    lists = sum(problem.startswith(ARCH_LIST_PROBLEM) for problem in problems)
    fixes = []
    if gaps + lists < len(problems):
        fixes.append("run: python -m feedstock_tools render-ci")
    if gaps:
        # conda-forge.yml is written by hand; the generator does not rewrite it.
        fixes.append("add the files not in skip_render to skip_render in conda-forge.yml")
    if lists:
        fixes.append("fix the cuda_arch_list line(s) of meta.yaml named above")
    drifted = len(problems) - lists
    counts = [f"{drifted} CI file(s) differ from a rerender"] if drifted else []
    counts += [f"{lists} GPU architecture list(s) refused"] if lists else []
    return "; ".join(counts + fixes)


def _run(args: argparse.Namespace) -> int:
    if args.check and args.list:
        raise ToolError("--check and --list do different things: give one of them")
    args.pinning = locate_pinning(args.pinning)
    if args.check:
        problems = drift(args.root, args.pinning) + arch_list_problems(args.root)
        for problem in problems:
            print(problem)
        if problems:
            raise ToolError(_check_failure(problems))
        print("CI files are up to date")
        return 0
    if args.list:
        rows = [(c.name, c.subdir, c.build_platform) for c in render_all(args.root, args.pinning)]
        width = max((len(name) for name, _, _ in rows), default=6)
        print(f"{'config':<{width}}  target         build")
        for name, target, build in rows:
            print(f"{name:<{width}}  {target:<13}  {build}")
        return 0
    for change in write_files(args.root, args.pinning) or ["nothing to change"]:
        print(change)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "render-ci",
        help="write .ci_support/*.yaml and the workflow matrix the way conda smithy rerender would",
        description=(
            "Compute the CI configurations conda-smithy renders from recipe/meta.yaml, "
            "recipe/conda_build_config.yaml, conda-forge's global pinning and .ci_support/migrations/, "
            "and write them to .ci_support/ (one file per CI job) and to the job matrix of "
            ".github/workflows/conda-build.yml; write templates/, which makes conda-smithy render this "
            "project's workflow, build scripts and CircleCI file unchanged; write recipe-v1/ from "
            "recipe/meta.yaml (convert-v1). --check only reports files "
            "that are missing, extra or out of date, lost executable bits, files skip_render does not "
            "protect and GPU architecture lists of meta.yaml the build driver would refuse (exit 1 if any)."
        ),
    )
    parser.add_argument("--check", action="store_true", help="report drift instead of writing")
    parser.add_argument("--list", action="store_true", help="print the configurations and their platforms")
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="feedstock root (default: %(default)s)")
    add_pinning_argument(parser)
    parser.set_defaults(func=_run)
