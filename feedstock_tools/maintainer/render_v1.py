"""``render-v1``: recipe-v1/recipe.yaml (rattler-build, v1) against recipe/meta.yaml, output by output.

meta.yaml is the recipe conda-forge builds; recipe.yaml says the same in v1, generated from it by
``convert-v1`` (:mod:`feedstock_tools.conda.recipe_v1`, docs/reference/recipe-v1.md). This command, the proof
that the conversion is faithful, renders both for every .ci_support configuration — recipe.yaml with the
REAL rattler-build (py-rattler-build, :mod:`feedstock_tools.conda.rattler_render`), meta.yaml with the
project's conda-build emulation (:mod:`feedstock_tools.conda.recipe_render`) — and names every difference
in an output's name,
version, build number, build string (the hash aside: the two builders hash different inputs), requirements,
run-exports, run constraints, the script's environment from the recipe (script_env: the GPU architecture
list the driver builds with) and tests, and in the release tarball's url, sha256 and patches. Exit status
1 on any difference (``check`` runs it).

Normalisation, each forced by the formats (docs/reference/recipe-v1.md lists them):

* a host/build spec whose version is exactly the variant's value for that name is compared as the bare
  name: conda-build writes the pin into the rendered spec, rattler-build applies it when it resolves;
* ``pin_subpackage`` is rendered by conda-build, kept as a call by rattler-build's stage 1: it is compared
  as the spec conda-build renders (``exact``: ``name version build``; ``upper_bound x.x``: ``>=v,<next``);
* script environment: a variable with an empty value is left out on both sides (rattler-build 0.73.0 drops
  an empty ``script.env`` entry, measured; conda-build sets it empty; the driver reads both alike); a name
  meta.yaml passes through takes this process's value, as rattler-build's ``env.get`` does at render;
* test scripts: rattler-build renders their ``${{ ... }}`` when it runs them, so they are rendered here with
  Jinja over the output's context and variant; a v1 ``python: imports`` test is compared with meta.yaml's
  ``imports``; meta.yaml names a test's recipe files in ``files`` and its source files in ``source_files``,
  v1 brings recipe/'s test files in as sources (a ``path`` source with a ``target_directory``, because
  rattler-build copies ``files.recipe`` from its own directory only), so a v1 source file under such a
  target directory is compared as a recipe file.

The v1 recipe lives in its own directory, ``recipe-v1/`` (conda-smithy's linter refuses a recipe
directory holding both meta.yaml and recipe.yaml: lint R-051, docs/reference/recipe-v1.md); its scripts and
patches are recipe/'s, reached as ``../recipe/...``.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from feedstock_tools.common.config_selector import configuration_files
from feedstock_tools.common.configuration import BLAS_KEY, Configuration, read_configuration
from feedstock_tools.common.feedstock import Feedstock
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.conda import rattler_render, recipe_render, recipe_v1
from feedstock_tools.conda.script_env import script_environment

# the v1 recipe's directory, beside recipe/ (conda-forge.yml's recipe_dir once the feedstock switches)
V1_DIRNAME = recipe_v1.V1_DIRNAME
_HASH = re.compile(r"(?<![0-9A-Za-z])h[0-9a-f]{7}(?![0-9a-f])")
_SCRIPT_JINJA = jinja2.Environment(
    variable_start_string="${{", variable_end_string="}}", undefined=jinja2.StrictUndefined
)


@dataclass(frozen=True)
class Difference:
    config: str
    output: str  # "pytorch cpu_generic_py312_h<hash>_0"
    field: str
    meta: Any
    v1: Any

    def line(self) -> str:
        return (
            f"{self.config}: {self.output}: {self.field}: meta.yaml {self.meta!r} / recipe.yaml {self.v1!r}"
        )


def mask_hash(text: str) -> str:
    return _HASH.sub("h<hash>", text)


def _canonical(spec: str) -> str:
    """conda's meaning spelled one way: ``name 1.2`` is ``name 1.2.*`` and ``name 1.2 build`` is
    ``name ==1.2 build`` (conda-build writes the short forms; rattler-build's strict parser refuses them)."""
    words = spec.split()
    if len(words) >= 2 and words[1][:1].isdigit() and not any(c in words[1] for c in "*,<>=!|"):
        words[1] = f"=={words[1]}" if len(words) == 3 else f"{words[1]}.*"
    return " ".join(words)


def _unpin(spec: str, variant: Mapping[str, Any], siblings: Mapping[str, Any]) -> str:
    words = spec.split()
    if len(words) < 2 or words[0] in siblings:
        return spec
    value = variant.get(words[0]) or variant.get(words[0].replace("-", "_"))
    if value is None:
        return spec
    rest = " ".join(words[1:])
    return (
        words[0] if rest in (str(value), f"{value}.*") or rest == f"{value}".replace(" ", ".* ", 1) else spec
    )


def _bump(version: str, parts: int) -> str:
    numbers = version.split(".")[:parts]
    numbers[-1] = str(int(numbers[-1]) + 1)
    return ".".join(numbers) + ".0a0"


def _v1_spec(item: Any, siblings: Mapping[str, tuple[str, str]]) -> str:
    """A stage-1 requirement as conda-build would render it (strings stay; pin_subpackage is resolved)."""
    if isinstance(item, str):
        return item
    pin = item["pin_subpackage"]
    version, build = siblings[pin["name"]]
    if pin.get("exact"):
        return f"{pin['name']} {version} {build}"
    upper = pin.get("upper_bound")
    if upper:
        return f"{pin['name']} >={version},<{_bump(version, upper.count('x'))}"
    return pin["name"]


def _specs(
    items: Iterable[Any], variant: Mapping[str, Any], siblings: Mapping[str, tuple[str, str]]
) -> list[str]:
    return [_canonical(mask_hash(_unpin(_v1_spec(item, siblings), variant, siblings))) for item in items]


def _meta_specs(items: Iterable[str], variant: Mapping[str, Any], siblings: Mapping[str, Any]) -> list[str]:
    return [_canonical(mask_hash(_unpin(spec, variant, siblings))) for spec in items]


def _recipe_file_dirs(recipe: Mapping[str, Any]) -> set[str]:
    """The target directories of the v1 ``path`` sources (the output's own or its staging output's):
    recipe/'s test files, brought in as sources."""
    sources = [
        *(recipe.get("source") or []),
        *(s for c in recipe.get("staging_caches", []) for s in c.get("source") or []),
    ]
    return {
        str(s["target_directory"]).strip("/") for s in sources if "path" in s and s.get("target_directory")
    }


def _v1_tests(
    recipe: Mapping[str, Any], variant: Mapping[str, Any], siblings: Mapping[str, tuple[str, str]]
) -> dict[str, list[str]]:
    recipe_dirs = _recipe_file_dirs(recipe)
    namespace = {**variant, **recipe.get("context", {})}
    out: dict[str, list[str]] = {
        "requires": [],
        "imports": [],
        "commands": [],
        "files": [],
        "source_files": [],
    }
    for test in recipe.get("tests", []):
        if "python" in test:
            out["imports"] += test["python"].get("imports", [])
            continue
        script = test.get("script", [])
        lines = script.get("content", []) if isinstance(script, dict) else script
        out["commands"] += [_SCRIPT_JINJA.from_string(line).render(namespace) for line in lines]
        out["requires"] += _specs(test.get("requirements", {}).get("run", []), variant, siblings)
        out["files"] += test.get("files", {}).get("recipe", [])
        for path in test.get("files", {}).get("source", []):
            out["files" if path.split("/")[0] in recipe_dirs else "source_files"].append(path)
    return out


def _meta_tests(
    test: Mapping[str, Any], variant: Mapping[str, Any], siblings: Mapping[str, Any]
) -> dict[str, list[str]]:
    return {
        "requires": _meta_specs(test.get("requires", []), variant, siblings),
        "imports": list(test.get("imports", [])),
        "commands": list(test.get("commands", [])),
        "files": list(test.get("files", [])),
        "source_files": list(test.get("source_files", [])),
    }


def _v1_run_exports(recipe: Mapping[str, Any], siblings: Mapping[str, tuple[str, str]]) -> list[str]:
    exports = recipe.get("requirements", {}).get("run_exports", {})
    items = exports.get("weak", []) if isinstance(exports, dict) else exports
    return [_v1_spec(item, siblings) for item in items]


def _meta_script_env(build: Mapping[str, Any]) -> dict[str, str]:
    """What meta.yaml's script_env gives the script, as conda-build passes it (the caller: this process)."""
    given = script_environment(build.get("script_env") or (), os.environ)
    return {name: value for name, value in given.items() if value}


def _v1_script_env(recipe: Mapping[str, Any]) -> dict[str, str]:
    script = recipe.get("build", {}).get("script")
    env = script.get("env", {}) if isinstance(script, dict) else {}
    return {str(name): str(value) for name, value in env.items() if value}


def _tarball(sources: Any) -> Mapping[str, Any]:
    """The source entry with a ``url`` (the release tarball), or an empty mapping."""
    entries = sources if isinstance(sources, list) else [sources or {}]
    return next((s for s in entries if isinstance(s, Mapping) and "url" in s), {})


def _source_differences(
    config: str,
    meta: recipe_render.RenderedRecipe,
    v1: Sequence[rattler_render.V1Output],
    dirs: tuple[Path, Path],
) -> list[Difference]:
    """url, sha256 and patches of the tarball: meta.yaml's top level against the v1 staging output's (v1
    names the patches ``../recipe/patches/...``: compared as paths inside recipe/)."""
    if meta.top_level is None or not v1:
        return []
    recipe_dir, v1_dir = (d.resolve() for d in dirs)
    staged = [s for c in v1[0].recipe.get("staging_caches", []) for s in c.get("source") or []]
    m, r = _tarball(meta.top_level.source), _tarball(v1[0].recipe.get("source") or staged)
    v1_patches = [
        (v1_dir / p).resolve().relative_to(recipe_dir).as_posix()
        if (v1_dir / p).resolve().is_relative_to(recipe_dir)
        else p
        for p in r.get("patches", [])
    ]
    pairs = {
        "url": (m.get("url"), r.get("url")),
        "sha256": (m.get("sha256"), r.get("sha256")),
        "patches": (list(m.get("patches", [])), v1_patches),
    }
    return [Difference(config, "source", f, a, b) for f, (a, b) in pairs.items() if a != b]


def compare_config(
    recipe_dir: Path,
    ci_support: Path,
    v1_dir: Path | None = None,
    meta: recipe_render.RenderedRecipe | None = None,
    configuration: Configuration | None = None,
) -> tuple[list[str], list[Difference]]:
    """The outputs both recipes build for this configuration, and every difference between them
    (``v1_dir``: the v1 recipe's directory, by default ``recipe-v1`` beside ``recipe_dir``; ``meta``:
    meta.yaml's render of this very configuration where the caller has made it already; ``configuration``:
    the file as the caller read it already)."""
    v1_dir = v1_dir or recipe_dir.parent / V1_DIRNAME
    configuration = configuration or read_configuration(ci_support)
    if meta is None:
        meta = recipe_render.render_recipe(recipe_dir, configuration)
    names: list[str] = []
    differences: list[Difference] = []
    # one BLAS at a time where the job builds both: pin_subpackage names a sibling of the same BLAS
    for part_config, part_meta in _per_top_level(configuration, meta):
        part_names, part_differences = _compare(recipe_dir, ci_support, v1_dir, part_meta, part_config)
        names += part_names
        # a difference of the top level's own text (its source) shows in every BLAS's part: named once
        differences += [d for d in part_differences if d not in differences]
    return sorted(names), differences


def _per_top_level(
    configuration: Configuration, meta: recipe_render.RenderedRecipe
) -> list[tuple[Configuration, recipe_render.RenderedRecipe]]:
    """The configuration and meta.yaml's render cut to each BLAS of a job that builds several; else whole."""
    if len(configuration.blases) < 2:
        return [(configuration, meta)]
    return [
        (configuration.for_blas(str(top.variant[BLAS_KEY])), meta.only(top))
        for top in meta.top_levels
        if BLAS_KEY in top.variant
    ]


def _compare(
    recipe_dir: Path,
    ci_support: Path,
    v1_dir: Path,
    meta: recipe_render.RenderedRecipe,
    configuration: Configuration,
) -> tuple[list[str], list[Difference]]:
    v1 = rattler_render.render(v1_dir / "recipe.yaml", configuration)
    siblings = {o.name: (o.recipe["package"]["version"], o.build_string) for o in v1}
    config = ci_support.stem
    meta_by_key = {(o.name, mask_hash(o.build_string)): o for o in meta.outputs}
    v1_by_key = {(o.name, mask_hash(o.build_string)): o for o in v1}
    differences = _source_differences(config, meta, v1, (recipe_dir, v1_dir))
    for key in sorted(set(meta_by_key) ^ set(v1_by_key)):
        side = "meta.yaml only" if key in meta_by_key else "recipe.yaml only"
        differences.append(
            Difference(config, " ".join(key), "output", side == "meta.yaml only", side == "recipe.yaml only")
        )
    for key in sorted(set(meta_by_key) & set(v1_by_key)):
        m, r = meta_by_key[key], v1_by_key[key]
        label = " ".join(key)
        variant = {**m.variant, **r.variant}
        requirements = r.recipe.get("requirements", {})
        pairs = {
            "version": (m.version, r.recipe["package"]["version"]),
            "build number": (m.build_number, r.recipe.get("build", {}).get("number", 0)),
            "build": (
                _meta_specs(m.requirements.build, variant, siblings),
                _specs(requirements.get("build", []), variant, siblings),
            ),
            "host": (
                _meta_specs(m.requirements.host, variant, siblings),
                _specs(requirements.get("host", []), variant, siblings),
            ),
            "run": (
                _meta_specs(m.requirements.run, variant, siblings),
                _specs(requirements.get("run", []), variant, siblings),
            ),
            "run_constrained": (
                _meta_specs(m.requirements.run_constrained, variant, siblings),
                _specs(requirements.get("run_constraints", []), variant, siblings),
            ),
            "run_exports": (list(m.run_exports), _v1_run_exports(r.recipe, siblings)),
            "script env": (_meta_script_env(m.build), _v1_script_env(r.recipe)),
            "build string": (mask_hash(m.build_string), mask_hash(r.build_string)),
        }
        meta_tests, v1_tests = _meta_tests(m.test, variant, siblings), _v1_tests(r.recipe, variant, siblings)
        for name in meta_tests:
            pairs[f"test {name}"] = (meta_tests[name], v1_tests[name])
        for field, (left, right) in pairs.items():
            if left != right:
                differences.append(Difference(config, label, field, left, right))
    return sorted(f"{o.name} {mask_hash(o.build_string)}" for o in v1), differences


@dataclass(frozen=True)
class Drift:
    """One difference between the recipes, grouped over the configurations that show it: an item one
    recipe lists and the other lacks, or a value each recipe gives differently."""

    output: str  # the output's name ("source" for the tarball)
    field: str
    what: str
    configs: tuple[str, ...]

    def line(self) -> str:
        where = (
            self.configs[0]
            if len(self.configs) == 1
            else f"{len(self.configs)} configurations, e.g. {self.configs[0]}"
        )
        return f"{self.output} {self.field}: {self.what} ({where})"


def _items(value: Any) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []


def drifts(differences: Iterable[Difference]) -> list[Drift]:
    """The differences of any number of configurations as one :class:`Drift` per missing or extra item
    (or per differing value), each naming the configurations it shows in."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for d in differences:
        output = d.output.split()[0]
        if isinstance(d.meta, list) and isinstance(d.v1, list):
            whats = [
                f"{item!r} is in meta.yaml, missing from {V1_DIRNAME}/recipe.yaml"
                for item in _items(d.meta)
                if item not in _items(d.v1)
            ]
            whats += [
                f"{item!r} is in {V1_DIRNAME}/recipe.yaml only"
                for item in _items(d.v1)
                if item not in _items(d.meta)
            ]
            whats = whats or ["the same items in another order"]
        elif isinstance(d.meta, bool) and isinstance(d.v1, bool):
            whats = ["built by meta.yaml only" if d.meta else f"built by {V1_DIRNAME}/recipe.yaml only"]
        else:
            whats = [f"meta.yaml {d.meta!r} / recipe.yaml {d.v1!r}"]
        for what in whats:
            configs = grouped.setdefault((output, d.field, what), [])
            if d.config not in configs:
                configs.append(d.config)
    return [Drift(output, field, what, tuple(configs)) for (output, field, what), configs in grouped.items()]


def compare_all(
    recipe_dir: Path, ci_support_dir: Path, configs: Sequence[Path] | None = None, v1_dir: Path | None = None
) -> dict[str, tuple[list[str], list[Difference]]]:
    return {
        path.stem: compare_config(recipe_dir, path, v1_dir)
        for path in (configs or configuration_files(ci_support_dir))
    }


# ---- where the v1 recipe lives ------------------------------------------------------------------------

# conda-smithy's linter refuses a recipe directory holding both recipe formats, whatever conda-forge.yml's
# conda_build_tool: lint R-051 "DuplicateRecipes" (conda-forge/conda-smithy 081ec6b,
# conda_smithy/lint_recipe.py:178-181 lintify_meta_yaml; conda_smithy/linter/messages/recipe.py:1037,
# added in 2026.6.14).
DUPLICATE_RECIPES_LINT = "R-051"


def layout_problems(root: Path) -> list[tuple[str, str]]:
    """(where, what) for a directory holding both meta.yaml and recipe.yaml (R-051). (Whether recipe-v1/'s
    files are what convert-v1 writes, its variant file included, is ``recipe_v1.stale``.)"""
    problems = []
    for directory in (root / "recipe", root / V1_DIRNAME):
        if (directory / "meta.yaml").is_file() and (directory / "recipe.yaml").is_file():
            problems.append(
                (
                    f"{directory.name}/",
                    f"holds both meta.yaml and recipe.yaml, which conda-forge's linter refuses "
                    f"(conda-smithy lint {DUPLICATE_RECIPES_LINT}); keep the v1 recipe in {V1_DIRNAME}/",
                )
            )
    return problems


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "render-v1",
        help="compare the real rattler-build render of recipe.yaml with meta.yaml's, output by output",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--recipe-dir", type=Path, default=REPO_ROOT / "recipe", help="default: recipe/")
    parser.add_argument("--v1-dir", type=Path, default=REPO_ROOT / V1_DIRNAME, help=f"default: {V1_DIRNAME}/")
    parser.add_argument(
        "--ci-support", type=Path, default=Feedstock(REPO_ROOT).ci_support, help="default: .ci_support/"
    )
    parser.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    problems = layout_problems(args.v1_dir.parent)
    for where, what in problems:
        print(f"{where}: {what}")
    results = compare_all(args.recipe_dir, args.ci_support, v1_dir=args.v1_dir)
    print("| configuration | outputs | differences |")
    print("|---|---|---|")
    failed = 0
    for config, (outputs, differences) in results.items():
        print(f"| `{config}` | {len(outputs)} | {len(differences)} |")
        failed += len(differences)
    for _, differences in results.values():
        for difference in differences:
            print(difference.line())
    return 1 if failed or problems else 0
