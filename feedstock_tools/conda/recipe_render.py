"""An EMULATION of ``conda render`` for this feedstock's ``recipe/meta.yaml`` (real builds use conda-build).

It exists so the project's tests, the consistency check and the rehearsal harness can see what conda-build
would make of the recipe for one ``.ci_support/*.yaml`` file without conda installed. It follows
conda-build's order: line selectors on the source (its Jinja loader filters them, so a dropped line's Jinja
never runs), Jinja (with conda-build's Jinja context), selectors again
(:mod:`feedstock_tools.conda.selectors`), then YAML.

API::

    from feedstock_tools.conda.recipe_render import render_recipe
    rendered = render_recipe(Path("recipe"), Path(".ci_support/linux_64_....yaml"))
    for output in rendered.outputs:          # conda-build's build order
        output.name, output.version, output.build_string, output.build_number
        output.requirements.host, output.requirements.run_constrained, output.run_exports
        output.test, output.script, output.variant   # variant: the used keys and their values

Also public: :func:`render_variant_data` (one partial variant, leniently, as data: ``deps``),
:func:`expand_variants` (the zip_keys product conda-build loops over),
:func:`find_used_variables_in_text` (which keys a recipe text uses), and
``python -m feedstock_tools render CONFIG``.

How close it is to conda-build (conda_build/metadata.py, variants.py, utils.py, jinja_context.py):

* Used variables: conda-build 26.7.1's text scan (:mod:`feedstock_tools.conda.used_vars`, the same regular
  expressions as ``find_used_variables_in_text``): plain requirement names, ``{{ key }}`` expressions,
  ``{% set/for/if %}`` statements, selectors; ``<lang>_compiler`` keys through ``compiler('lang')`` and
  ``<lang>_stdlib`` keys through ``stdlib('lang')``. Each output is scanned on its own block of the raw
  recipe, plus ``$key`` in its ``.sh`` script, ``target_platform``, ``channel_targets`` and
  ``build/force_use_keys``; the top level on the recipe without its ``outputs`` section plus ``build.sh``.
* Hash: ``h`` + the first 7 hex digits of sha1 over ``json.dumps`` (sorted keys) of the used keys' values,
  leaving out python/r_base/perl/lua (unless the value has a space, as ``3.12.* *_cpython`` does), numpy when
  pinned via ``x.x``, ``ignore_version`` keys, and adding ``__virtual`` run requirements; the same rule as
  ``MetaData.get_hash_contents``. The ``h{{ PKG_HASH }}`` part of a build string is replaced by it.
* Requirements: a plain name that is a variant key gets the pinned version (``insert_variant_versions``),
  and a bare ``name version`` becomes ``name version.*`` (``ensure_valid_spec``) in build, host and run.
  NOT emulated: anything needing a solver or package metadata: run_exports of dependencies,
  ``pin_run_as_build`` and ``pin_compatible`` versions (``pin_compatible`` renders the bare name), the
  compiler packages' own run_exports.
* Output order: conda's ``_toposort`` over output names (dependencies among outputs in build/host/run,
  alphabetical within a level); outputs of the same name in variant-loop order. Outputs are deduplicated on
  (name, used variant values), as ``get_output_metadata_set`` does.
* Top-level builds: one per distinct value of the keys the top level uses and the configuration loops over
  (``RenderedRecipe.top_levels``; a job that builds both BLAS has two), each output tied to the first it
  was rendered with (``top_level_of``), as conda-build runs a top-level build and its outputs per variant.
* Selectors: unknown names are an error here (conda-build treats them as False), so typos surface.
* ``PKG_BUILDNUM``/``PKG_NAME``/``PKG_VERSION`` inside an output are the *top level's*: conda-build's
  final render of an output re-renders the outputs section in the parent's context
  (``render.py: finalize_metadata``, 26.7.1). Only its non-final render (``conda render`` when the
  dependencies cannot be solved) uses the output's own number. Build strings should therefore compute
  their number in Jinja, as this recipe does; ``environ`` is empty unless given (deterministic rendering).
* The first pass: before any variant, conda-build renders the recipe with every variant key undefined
  (:mod:`feedstock_tools.conda.first_pass`); :func:`render_recipe` runs it first, as conda-build does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jinja2
import yaml

from feedstock_tools.common import config_selector
from feedstock_tools.common.configuration import PythonVersion, read_configuration
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.feedstock import Feedstock
from feedstock_tools.common.inputs import read_text
from feedstock_tools.conda import meta_render, used_vars
from feedstock_tools.conda.first_pass import render_first_pass
from feedstock_tools.conda.recipe_files import check_recipe
from feedstock_tools.conda.selectors import KNOWN_SUBDIRS, SelectorError, select_lines, selector_namespace
from feedstock_tools.conda.variants import SPECIAL_KEYS, VariantError, explode
from feedstock_tools.conda.yaml_errors import rendered_yaml_error

HASH_LENGTH = 7
# conda-build renders PKG_HASH as a placeholder and substitutes the real hash into the final string.
PKG_HASH_PLACEHOLDER = "1234567"
# Keys of a variant config that are settings, not dimensions of the build matrix.
PASS_THROUGH_KEYS = SPECIAL_KEYS
# Compiler names conda-build uses when a variant does not set <lang>_compiler.
DEFAULT_COMPILERS: dict[str, dict[str, str]] = {
    "linux": {"c": "gcc", "cxx": "gxx", "fortran": "gfortran", "cuda": "cuda-nvcc"},
    "osx": {"c": "clang", "cxx": "clangxx", "fortran": "gfortran", "cuda": "cuda-nvcc"},
}
REQUIREMENT_SECTIONS = ("build", "host", "run", "run_constrained")

_PKG_HASH_IN_STRING = re.compile(r"h\{\{\s*PKG_HASH\s*\}\}")
_NUMPY_XX = re.compile(r"(numpy\s*x\.x)|pin_compatible\([\'\"]numpy.*max_pin=[\'\"]x\.x[\'\"]")
_NUMPY_COMPATIBLE = re.compile(r"pin_\w+\([\'\"]numpy[\'\"]")
_NUMPY_COMPATIBLE_X = re.compile(r"pin_\w+\([\'\"]numpy[\'\"].*((?<=x_pin=[\'\"])[x\.]*(?=[\'\"]))")
_SPEC_NEEDING_STAR = re.compile(r"([\w\d\.\-\_]+)\s+((?<![><=])[\w\d\.\-\_]+?(?!\*))(\s+[\w\d\.\_]+)?$")


# ---- variant configurations --------------------------------------------------------------------------------


Variant = dict[str, Any]


def expand_variants(config: Mapping[str, Any]) -> list[Variant]:
    """The variants conda-build loops over: the product of every key, zip_keys groups moving together
    (:func:`feedstock_tools.conda.variants.explode`, shared with the CI generator)."""
    try:
        return explode(dict(config))
    except VariantError as exc:
        raise ToolError(str(exc)) from None


# ---- used variables: feedstock_tools.conda.used_vars --------------------------------------------------


def find_used_variables_in_text(
    variant_keys: Iterable[str], recipe_text: str, selectors_only: bool = False
) -> set[str]:
    """The keys ``recipe_text`` uses, by conda-build's text rules (:func:`used_vars.find_used_in_text`)."""
    return set(used_vars.find_used_in_text(tuple(variant_keys), recipe_text, selectors_only))


# ---- the Jinja context (conda_build.jinja_context) ---------------------------------------------------------


def _ensure_valid_spec(spec: str) -> str:
    """conda-build's ensure_valid_spec: ``name 2`` becomes ``name 2.*``; exact pins stay."""
    match = _SPEC_NEEDING_STAR.match(spec)
    if match and not match.group(3):
        if match.group(1) in ("python", "numpy") and match.group(2) == "x.x":
            return _SPEC_NEEDING_STAR.sub(r"\1 \2", spec)
        if "*" not in spec:
            return _SPEC_NEEDING_STAR.sub(r"\1 \2.*", spec)
    return spec


def _version_parts(version: str) -> list[int | str]:
    """A flat list of a conda version's components (numbers and letter runs, 0 before a leading letter)."""
    parts: list[int | str] = []
    for segment in version.replace("-", ".").replace("_", ".").split("."):
        pieces = re.findall(r"\d+|[A-Za-z]+", segment)
        if pieces and not pieces[0].isdigit():
            pieces.insert(0, "0")
        parts.extend(int(p) if p.isdigit() else p.lower() for p in pieces)
    return parts


def apply_pin_expressions(
    version: str, min_pin: str | None = "x.x.x.x.x.x.x", max_pin: str | None = "x"
) -> str:
    """``>=lower,<upper`` from ``version`` and ``x.x``-style pins (conda_build.utils.apply_pin_expressions).

    Exact for dotted numeric versions; versions with letters (``2.14.0.rc1``) are flattened like conda's
    VersionOrder, with letters joined to the preceding number.
    """
    flat = _version_parts(version)
    pins = [len(pin.split(".")) if pin else None for pin in (min_pin, max_pin)]
    if max_pin and pins[1] and pins[1] > len(flat):
        pins[1] = len(flat)
    bounds = ["", ""]
    for index, pin in enumerate(pins):
        if not pin:
            continue
        pieces: list[str] = []
        for position, value in enumerate(flat[:pin]):
            text = str(value)
            if index == 1 and position == pin - 1:
                following_alpha = str(flat[min(pin, len(flat) - 1)]).isalpha()
                try:
                    text = str(int(value) + 1) + ("a" if following_alpha else ".0a0")
                except ValueError:
                    text = chr(ord(str(value)[0]) + 1)
            pieces.append(text)
        bounds[index] = ".".join(pieces)
    if bounds[0]:
        lower_parts = _version_parts(bounds[0])
        if _conda_order(flat) < _conda_order(lower_parts):
            bounds[0] = ">=" + version  # a pre-release is below its own truncation
        else:
            bounds[0] = ">=" + bounds[0]
    if bounds[1]:
        bounds[1] = "<" + bounds[1]
    return ",".join(bound for bound in bounds if bound)


def _conda_order(parts: Sequence[int | str]) -> tuple[tuple[int, int | str], ...]:
    # conda orders letter runs below numbers ("2.14.0rc1" < "2.14.0")
    return (*((1, p) if isinstance(p, int) else (0, p) for p in parts), (0, ""))


def _compiler_spec(lang: str, variant: Mapping[str, Any], subdir: str, component: str = "compiler") -> str:
    platform = subdir.split("-", 1)[0]
    default = DEFAULT_COMPILERS.get(platform, {}).get(lang, lang)
    name = str(variant.get(f"{lang}_{component}", default))
    if isinstance(variant.get(f"{lang}_{component}"), list):
        name = str(variant[f"{lang}_{component}"][0])
    target = str(variant.get("target_platform", subdir))
    spec = f"{name}_{target}"
    version = variant.get(f"{lang}_{component}_version")
    if version:
        spec = _ensure_valid_spec(f"{spec} {version}")
    return spec


@dataclass
class _OutputIdentity:
    """What pin_subpackage needs of an output; the build string is known after the first pass."""

    name: str
    version: str
    build_string: str | None = None


class _AnySibling(dict[str, _OutputIdentity]):
    """Before the outputs are known, pin_subpackage of any name renders a placeholder."""

    def get(self, name: str, default: Any = None) -> _OutputIdentity:  # type: ignore[override]
        return super().get(name) or _OutputIdentity(name, "0")


@dataclass(frozen=True)
class _VariantScope:
    """One variant being rendered: its values and the selector namespace built from them."""

    variant: Mapping[str, Any]
    namespace: Mapping[str, Any]

    @property
    def keys(self) -> list[str]:
        return [key for key in self.variant if key not in PASS_THROUGH_KEYS]


def _conda_py(variant: Mapping[str, Any]) -> dict[str, str]:
    python = variant.get("python")
    if not python:
        return {}
    version = PythonVersion.parse(str(python))
    return {"CONDA_PY": version.nodot, "PY_VER": version.version}


# ---- rendering ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Requirements:
    build: tuple[str, ...] = ()
    host: tuple[str, ...] = ()
    run: tuple[str, ...] = ()
    run_constrained: tuple[str, ...] = ()

    def names(self, section: str) -> list[str]:
        """Package names of one section, in order."""
        return [spec.split()[0] for spec in getattr(self, section)]


@dataclass(frozen=True)
class RenderedOutput:
    """One package conda-build would build, as the emulation sees it."""

    name: str
    version: str
    build_string: str
    build_number: int
    requirements: Requirements
    run_exports: tuple[str, ...]
    test: Mapping[str, Any]
    script: str | None
    variant: Mapping[str, Any]  # the used variant keys and their values
    build: Mapping[str, Any]  # the whole rendered build section, with the final build string
    hash_contents: Mapping[str, Any]
    # TopLevel.variant of the top-level build whose work directory this output is built from
    top_level_variant: Mapping[str, Any] = field(default_factory=dict)

    @property
    def dist(self) -> str:
        return f"{self.name}-{self.version}-{self.build_string}"


@dataclass(frozen=True)
class TopLevel:
    """The top-level (``package:``) build: never packaged itself when the recipe has outputs."""

    name: str
    version: str
    requirements: Requirements
    build: Mapping[str, Any]
    source: Mapping[str, Any]
    used_variables: frozenset[str]
    script: str | None  # build/script, else recipe/build.sh when it exists (what conda-build runs first)
    # the used keys of more than one value in the configuration, with this build's values: conda-build
    # runs one top-level build per distinct set (one per BLAS where a job builds both), {} for one build
    variant: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RenderedRecipe:
    subdir: str
    # one per distinct top-level variant, in variant-loop order; () when the configuration skips the recipe
    top_levels: tuple[TopLevel, ...]
    outputs: tuple[RenderedOutput, ...]
    about: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def top_level(self) -> TopLevel | None:
        """The first top-level build (the only one unless the configuration loops over a key it uses);
        None when the top-level build is skipped for this configuration."""
        return self.top_levels[0] if self.top_levels else None

    def by_name(self, name: str) -> list[RenderedOutput]:
        return [output for output in self.outputs if output.name == name]

    def top_level_of(self, output: RenderedOutput) -> TopLevel:
        """The top-level build ``output`` is built from (its pass 1)."""
        return next(top for top in self.top_levels if top.variant == output.top_level_variant)

    def outputs_of(self, top: TopLevel) -> list[RenderedOutput]:
        """The outputs built from the top-level build ``top``, in build order."""
        return [output for output in self.outputs if output.top_level_variant == top.variant]

    def only(self, top: TopLevel) -> RenderedRecipe:
        """The part built from the top-level build ``top``: what the configuration cut to its values (one
        BLAS of a job that builds both) renders."""
        return replace(self, top_levels=(top,), outputs=tuple(self.outputs_of(top)))


def _select(text: str, namespace: Mapping[str, Any], source: Path) -> str:
    try:
        # strict: an unknown name in our own recipe is a typo (conda-build would read it as False)
        return select_lines(text, namespace, strict=True)
    except SelectorError as exc:
        raise ToolError(f"{source} {exc}; fix the selector or add the key to the variant config") from None


def _string_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(item) for item in value if item is not None]


def insert_variant_versions(
    requirements: dict[str, list[str]], variant: Mapping[str, Any], section: str
) -> None:
    """Give plain-name requirements that are variant keys the pinned version (conda-build's rule).

    conda-build matches ``^key$`` with ``_`` in the key standing for ``-`` or ``_`` in the name; in run, only
    names also listed (as bare names) in build/host qualify.
    """
    build_deps = requirements.get("build", []) + requirements.get("host", [])
    specs = requirements.get(section, [])
    for index, spec in enumerate(specs):
        name = spec.rstrip()
        if not name or " " in name:
            continue
        key = name.replace("-", "_")
        if key not in variant or key in PASS_THROUGH_KEYS:
            continue
        if section in ("build", "host") or name in build_deps:
            value = variant[key]
            pinned = value[0] if isinstance(value, list) else value
            specs[index] = _ensure_valid_spec(f"{name} {pinned}")
    if specs:
        requirements[section] = specs


def _requirements(section: Mapping[str, Any], variant: Mapping[str, Any]) -> Requirements:
    requirements = {name: _string_list(section.get(name)) for name in REQUIREMENT_SECTIONS}
    for name in ("build", "host", "run"):
        insert_variant_versions(requirements, variant, name)
        # conda-build's finalization turns "name 1.2" into "name 1.2.*" (exact pins with a build stay)
        requirements[name] = [_ensure_valid_spec(spec) for spec in requirements.get(name, [])]
    return Requirements(**{name: tuple(requirements.get(name, [])) for name in REQUIREMENT_SECTIONS})


def _hash_contents(
    used: Iterable[str],
    variant: Mapping[str, Any],
    requirements_text: str,
    run: Sequence[str],
) -> dict[str, Any]:
    dependencies = set(used)
    excludes = ["python", "r_base", "perl", "lua", *_string_list(variant.get("ignore_version"))]
    if "numpy" in dependencies:
        compatible = bool(_NUMPY_COMPATIBLE.search(requirements_text))
        pins_xx = _NUMPY_COMPATIBLE_X.search(requirements_text) if compatible else None
        not_xx = pins_xx.group(1).count("x") != 2 if pins_xx else True
        if _NUMPY_XX.search(requirements_text) or (compatible and not not_xx):
            excludes.append("numpy")
    exclude = re.compile("|".join(rf"{name}[\s$]?.*" for name in excludes))
    kept = {
        key
        for key in dependencies
        if not exclude.match(key) or (isinstance(variant[key], str) and " " in variant[key])
    }
    contents: dict[str, Any] = {} if kept == {"target_platform"} else {key: variant[key] for key in kept}
    contents.update({spec.split(" ")[0]: spec for spec in run if spec.startswith("__")})
    return contents


def hash_of(contents: Mapping[str, Any]) -> str:
    """``h`` + 7 hex digits, or "" when nothing contributes (conda-build's _hash_dependencies)."""
    if not contents:
        return ""
    digest = hashlib.sha1(json.dumps(contents, sort_keys=True).encode()).hexdigest()
    return f"h{digest}"[: HASH_LENGTH + 1]


def _default_build_string(
    number: int, hash_: str, requirements: Requirements, variant: Mapping[str, Any]
) -> str:
    prefix = ""
    build_names = set(requirements.names("build")) | set(requirements.names("host"))
    if "python" in requirements.names("run") and "python" in build_names and variant.get("python"):
        prefix = "py" + PythonVersion.parse(str(variant["python"])).nodot
    string = f"{prefix}{hash_}" if prefix else hash_
    return f"{string}_{number}" if string else str(number)


def _subdir_of(config: Mapping[str, Any], subdir: str | None) -> str:
    if subdir:
        chosen = subdir
    else:
        target = config.get("target_platform")
        chosen = (target[0] if isinstance(target, list) else target) if target else ""
    if chosen not in KNOWN_SUBDIRS:
        raise ToolError(
            f"unknown or missing target platform {chosen!r}; give a .ci_support file with target_platform "
            f"or pass subdir= one of {', '.join(KNOWN_SUBDIRS)}"
        )
    return chosen


def _used_or_error(used: Iterable[str], variant: Mapping[str, Any], what: str) -> dict[str, Any]:
    missing = sorted(key for key in used if key not in variant)
    if missing:
        raise ToolError(
            f"{what} uses variant key(s) {', '.join(missing)} that the variant config lacks; "
            "add them (conda-smithy writes every used key into .ci_support)"
        )
    return {key: variant[key] for key in sorted(used)}


def _always_used(variant: Mapping[str, Any]) -> set[str]:
    return {key for key in ("target_platform", "channel_targets") if key in variant}


def _forced(used: set[str], build: Mapping[str, Any]) -> set[str]:
    """build/force_use_keys and build/force_ignore_keys applied to a set of used keys."""
    ignored = set(_string_list(build.get("force_ignore_keys")))
    return (used - ignored) | set(_string_list(build.get("force_use_keys")))


def _run_exports(value: Any) -> list[str]:
    if isinstance(value, Mapping):
        return [spec for kind in ("strong", "weak") for spec in _string_list(value.get(kind))]
    return _string_list(value)


class _LenientUndefined(jinja2.ChainableUndefined):
    """Lenient rendering (:func:`render_variant_data`): a name the partial variant lacks, its attributes and
    calls of it render as empty text."""

    def __call__(self, *args: Any, **kwargs: Any) -> _LenientUndefined:
        return self


class _RecipeRenderer:
    """Renders one recipe for one target subdir; the methods take the variant being rendered."""

    def __init__(
        self,
        recipe_dir: Path,
        subdir: str,
        environ: Mapping[str, str],
        build_subdir: str | None = None,
        lenient: bool = False,
    ) -> None:
        self.lenient = lenient
        self.recipe_dir = recipe_dir
        self.meta_path = recipe_dir / "meta.yaml"
        if not self.meta_path.is_file():
            raise ToolError(f"no meta.yaml in {recipe_dir}; pass the recipe directory")
        self.raw = read_text(self.meta_path)  # checked by render_recipe (check_recipe)
        self.blocks = used_vars.output_blocks(self.raw)
        self.subdir = subdir
        self.build_subdir = build_subdir or subdir
        self.environ = dict(environ)
        self.template_for(self.raw)  # a syntax error is reported before any variant is rendered

    def template_for(self, text: str) -> jinja2.Template:
        """The compiled template of ``text`` (the recipe after one variant's selectors)."""
        try:
            return meta_render.template(text, _LenientUndefined if self.lenient else jinja2.StrictUndefined)
        except jinja2.TemplateSyntaxError as exc:
            raise ToolError(
                f"Jinja syntax error in {self.meta_path} line {exc.lineno}: {exc.message}"
            ) from None

    def scope(self, variant: Mapping[str, Any]) -> _VariantScope:
        return _VariantScope(
            variant, selector_namespace(self.subdir, variant, self.environ, build_subdir=self.build_subdir)
        )

    # -- Jinja, selectors, YAML --

    def context(
        self,
        scope: _VariantScope,
        package: _OutputIdentity,
        build_number: int,
        siblings: Mapping[str, _OutputIdentity],
    ) -> dict[str, Any]:
        variant, subdir = scope.variant, self.subdir

        def compiler(lang: str) -> str:
            return _compiler_spec(lang, variant, subdir)

        def stdlib(lang: str) -> str:
            return _compiler_spec(lang, variant, subdir, component="stdlib")

        def cdt(name: str) -> str:
            arch = {"linux-64": "x86_64", "linux-aarch64": "aarch64", "linux-ppc64le": "ppc64le"}.get(
                subdir, ""
            )
            return f"{name}-{variant.get('cdt_name', 'conda')}-{variant.get('cdt_arch', arch)}"

        def pin_subpackage(
            name: str,
            min_pin: str | None = "x.x.x.x.x.x",
            max_pin: str | None = "x",
            exact: bool = False,
            **_: Any,
        ) -> str:
            sibling = siblings.get(name)
            if sibling is None:
                raise ToolError(f"pin_subpackage('{name}') names no output of the recipe; fix meta.yaml")
            if exact:
                return f"{name} {sibling.version} {sibling.build_string or PKG_HASH_PLACEHOLDER}"
            return f"{name} {apply_pin_expressions(sibling.version, min_pin, max_pin)}"

        def pin_compatible(name: str, *_: Any, **__: Any) -> str:
            # needs the solved host environment: not emulated (module docstring)
            return name

        context: dict[str, Any] = dict(scope.namespace)
        context.update({key: value for key, value in variant.items() if key not in PASS_THROUGH_KEYS})
        context.update(_conda_py(variant))
        context.update(
            PKG_NAME=package.name,
            PKG_VERSION=package.version,
            PKG_BUILDNUM=str(build_number),
            PKG_HASH=PKG_HASH_PLACEHOLDER,
            CONDA_BUILD_STATE="RENDER",
            target_platform=str(variant.get("target_platform", subdir)),
            environ=dict(self.environ),
            compiler=compiler,
            stdlib=stdlib,
            cdt=cdt,
            pin_subpackage=pin_subpackage,
            pin_compatible=pin_compatible,
        )
        return context

    def parse(self, scope: _VariantScope, context: Mapping[str, Any]) -> dict[str, Any]:
        """Selectors, Jinja, selectors again, then YAML: the whole recipe as a dict.

        conda-build applies the selectors to the source before Jinja sees it (jinja_context.FilteredLoader,
        26.7.1), so a dropped line's Jinja never runs (``{{ key }}`` of a key this variant lacks, a
        ``{% set %}`` for another platform); the second pass is for selectors Jinja wrote.
        """
        try:
            text = self.template_for(_select(self.raw, scope.namespace, self.meta_path)).render(**context)
        except jinja2.TemplateError as exc:
            raise ToolError(
                f"Jinja error in {self.meta_path}: {exc}; fix the template or add the key to the variant"
            ) from None
        selected = _select(text, scope.namespace, self.meta_path)
        try:
            data = meta_render.load(selected)  # the callers' own copy
        except yaml.YAMLError as exc:
            raise rendered_yaml_error(self.meta_path, exc, selected) from None
        if not isinstance(data, dict):
            raise ToolError(f"{self.meta_path} does not render to a mapping")
        return data

    def top_level(self, scope: _VariantScope) -> dict[str, Any]:
        probe = self.parse(scope, self.context(scope, _OutputIdentity("", ""), 0, _AnySibling()))
        package = probe.get("package") or {}
        identity = _OutputIdentity(str(package.get("name", "")), str(package.get("version", "")))
        number = int((probe.get("build") or {}).get("number") or 0)
        return self.parse(scope, self.context(scope, identity, number, _AnySibling()))

    # -- used variables --

    def used_in_text(
        self, scope: _VariantScope, raw_text: str, requirements: Mapping[str, list[str]]
    ) -> set[str]:
        """conda-build's _get_used_vars_meta_yaml for one piece of raw recipe text."""
        selected = _select(raw_text, scope.namespace, self.meta_path)
        return used_vars.used_in_meta_yaml(scope.keys, selected, raw_text, requirements, scope.variant)

    def top_level_used(self, scope: _VariantScope, top: Mapping[str, Any]) -> set[str]:
        top_text = used_vars.top_level_text(self.raw)
        requirements = {k: _string_list(v) for k, v in (top.get("requirements") or {}).items()}
        used = self.used_in_text(scope, top_text, requirements)
        used |= used_vars.find_used_in_shell_script(scope.keys, self.recipe_dir / "build.sh")
        return _forced(used | _always_used(scope.variant), top.get("build") or {})

    def reduce(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """conda-build's get_reduced_variant_set: keys the recipe never uses keep only their first value.

        Used here means anywhere in the recipe (``force_global``), judged on the first variant.
        """
        first = {
            key: (value[0] if isinstance(value, list) and value else value)
            for key, value in config.items()
            if key not in PASS_THROUGH_KEYS
        }
        first.setdefault("target_platform", self.subdir)
        scope = self.scope(first)
        keys = tuple(scope.keys)
        used = set(used_vars.find_used_in_text(keys, self.raw, selectors_only=True))
        used |= used_vars.find_used_in_text(keys, _select(self.raw, scope.namespace, self.meta_path))
        used |= used_vars.find_used_in_shell_script(scope.keys, self.recipe_dir / "build.sh")
        used = _forced(used | _always_used(first), self.top_level(scope).get("build") or {})
        zip_groups = config.get("zip_keys") or []
        if zip_groups and isinstance(zip_groups[0], str):
            zip_groups = [zip_groups]
        kept = used | {key for group in zip_groups if set(group) & used for key in group}
        return {
            key: value
            if key in kept or key in PASS_THROUGH_KEYS or not isinstance(value, list)
            else value[:1]
            for key, value in config.items()
        }

    # -- outputs --

    def output(
        self,
        scope: _VariantScope,
        index: int,
        identity: _OutputIdentity,
        number: int,
        siblings: Mapping[str, _OutputIdentity],
    ) -> dict[str, Any]:
        """Output ``index`` as conda-build finalizes it: the recipe's outputs re-rendered in the top level's
        context (conda-build 26.7.1 ``render.py: finalize_metadata`` calls
        ``parent_metadata.get_rendered_output``), so PKG_NAME/PKG_VERSION/PKG_BUILDNUM are the top level's
        (``identity``, ``number``) even for an output with a build number of its own."""
        data = self.parse(scope, self.context(scope, identity, number, siblings))
        output = dict((data.get("outputs") or [])[index])
        build = dict(output.get("build") or {})
        build.setdefault("number", output.get("number", (data.get("build") or {}).get("number", 0)))
        output["build"] = build
        return output

    def outputs(self, scope: _VariantScope, top: Mapping[str, Any]) -> list[RenderedOutput]:
        version = str((top.get("package") or {}).get("version"))
        declared = list(top.get("outputs") or [])
        if len(declared) != len(self.blocks):
            raise ToolError(
                f"{self.meta_path}: {len(declared)} rendered outputs but {len(self.blocks)} output blocks; "
                "start every output with '  - name:' and do not generate outputs with Jinja loops"
            )
        top_number = int((top.get("build") or {}).get("number") or 0)
        top_identity = _OutputIdentity(str((top.get("package") or {}).get("name")), version)
        identities = {
            str(out["name"]): _OutputIdentity(str(out["name"]), str(out.get("version") or version))
            for out in declared
        }
        # pass 1: used variables, hash and final build string of every output that is not skipped
        kept: list[tuple[int, int, set[str], dict[str, Any]]] = []
        for index, first in enumerate(declared):
            name = str(first["name"])
            output = self.output(scope, index, top_identity, top_number, identities)
            build = output["build"]
            if build.get("skip"):
                continue
            number = int(build.get("number") or 0)
            used, contents = self._used_and_hash(scope, index, output)
            hash_ = hash_of(contents)
            string = build.get("string")
            if string and _PKG_HASH_IN_STRING.search(self.blocks[index]):
                string = re.sub(f"h[0-9a-f]{{{HASH_LENGTH}}}", hash_, str(string))
            elif not string:
                requirements = _requirements(output.get("requirements") or {}, scope.variant)
                string = _default_build_string(number, hash_, requirements, scope.variant)
            identities[name].build_string = str(string)
            kept.append((index, number, used, contents))
        # pass 2: again, now that exact pin_subpackage() can name every sibling's final build string
        rendered: list[RenderedOutput] = []
        for index, number, used, contents in kept:
            name = str(declared[index]["name"])
            output = self.output(scope, index, top_identity, top_number, identities)
            build = dict(output["build"], string=identities[name].build_string)
            rendered.append(
                RenderedOutput(
                    name=name,
                    version=identities[name].version,
                    build_string=str(identities[name].build_string),
                    build_number=number,
                    requirements=_requirements(output.get("requirements") or {}, scope.variant),
                    run_exports=tuple(_run_exports(build.get("run_exports"))),
                    test=output.get("test") or {},
                    script=output.get("script"),
                    variant=_used_or_error(used, scope.variant, f"output {name}"),
                    build=build,
                    hash_contents=contents,
                )
            )
        return rendered

    def _used_and_hash(
        self, scope: _VariantScope, index: int, output: Mapping[str, Any]
    ) -> tuple[set[str], dict[str, Any]]:
        block = self.blocks[index]
        requirements_section = {k: _string_list(v) for k, v in (output.get("requirements") or {}).items()}
        used = self.used_in_text(scope, block, requirements_section)
        script = output.get("script")
        if isinstance(script, str) and script.endswith(".sh"):
            used |= used_vars.find_used_in_shell_script(scope.keys, self.recipe_dir / script)
        used = _forced(used | _always_used(scope.variant), output["build"])
        _used_or_error(used, scope.variant, f"output {output['name']}")
        run = _requirements(requirements_section, scope.variant).run
        return used, _hash_contents(used, scope.variant, used_vars.requirements_text(block), run)


def render_recipe(
    recipe_dir: Path,
    config: Path | Mapping[str, Any],
    subdir: str | None = None,
    environ: Mapping[str, str] | None = None,
    build_subdir: str | None = None,
) -> RenderedRecipe:
    """Render ``recipe_dir/meta.yaml`` for every variant of ``config`` (a .ci_support configuration, its
    path, or a mapping of variant keys to lists of values).

    ``subdir`` defaults to the config's target_platform; ``build_subdir`` (the machine building it, for
    cross builds such as osx-arm64 built on osx-64) defaults to ``subdir``; ``environ`` is what selectors
    and Jinja see as os.environ (empty by default).
    """
    variant_config = dict(read_configuration(config) if isinstance(config, Path) else config)
    target = _subdir_of(variant_config, subdir)
    if (recipe_dir / "meta.yaml").is_file():
        # the recipe's files as every command checks them; a selector may name any key of this config
        check_recipe(recipe_dir, known=variant_config)
    renderer = _RecipeRenderer(recipe_dir, target, environ or {}, build_subdir)
    render_first_pass(recipe_dir, target, environ)
    collected: dict[tuple[str, str], RenderedOutput] = {}
    top_levels: dict[str, TopLevel] = {}
    about: Mapping[str, Any] = {}
    extra: Mapping[str, Any] = {}
    reduced = renderer.reduce(variant_config)
    looped = {key for key, value in reduced.items() if isinstance(value, list) and len(value) > 1}
    for variant in expand_variants(reduced):
        variant.setdefault("target_platform", target)
        scope = renderer.scope(variant)
        top = renderer.top_level(scope)
        if (top.get("build") or {}).get("skip"):
            continue
        about, extra = top.get("about") or {}, top.get("extra") or {}
        used = renderer.top_level_used(scope, top)
        # conda-build runs the top-level build once per distinct value of the used keys it loops over
        top_variant = {key: variant[key] for key in sorted(used & looped) if key in variant}
        top_key = json.dumps(top_variant, sort_keys=True, default=str)
        if top_key not in top_levels:
            package = top.get("package") or {}
            top_levels[top_key] = TopLevel(
                name=str(package.get("name")),
                version=str(package.get("version")),
                requirements=_requirements(top.get("requirements") or {}, variant),
                build=top.get("build") or {},
                source=top.get("source") or {},
                used_variables=frozenset(used),
                script=_top_level_script(recipe_dir, top.get("build") or {}),
                variant=top_variant,
            )
        for output in renderer.outputs(scope, top):
            key = (output.name, json.dumps(output.variant, sort_keys=True, default=str))
            collected.setdefault(key, replace(output, top_level_variant=top_variant))
    outputs = _toposort(list(collected.values()))
    return RenderedRecipe(target, tuple(top_levels.values()), outputs, about, extra)


def render_variant_data(
    recipe_dir: Path, subdir: str, variant: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``meta.yaml`` for ONE variant, possibly partial, rendered leniently, as data: the whole recipe (top
    level and its ``outputs`` section) after the same selectors, Jinja context, selectors and YAML as
    :func:`render_recipe`, but with no output split, hashed or checked (a sibling's ``pin_subpackage`` is
    the placeholder version 0, no variant pin is inserted), and a name the variant lacks rendering as empty
    text instead of stopping. For reading the requirement lines under a few chosen
    values (``deps`` renders conda-forge's first pins with each BLAS and CUDA choice)."""
    renderer = _RecipeRenderer(recipe_dir, subdir, environ or {}, lenient=True)
    return renderer.top_level(renderer.scope({"target_platform": subdir, **variant}))


def _top_level_script(recipe_dir: Path, build: Mapping[str, Any]) -> str | None:
    script = build.get("script")
    if script:
        return script if isinstance(script, str) else "\n".join(_string_list(script))
    return "build.sh" if (recipe_dir / "build.sh").is_file() else None


def _toposort(outputs: list[RenderedOutput]) -> tuple[RenderedOutput, ...]:
    """conda's _toposort over output names (alphabetical within a level), same-name outputs kept in order."""
    by_name: dict[str, list[RenderedOutput]] = {}
    for output in outputs:
        by_name.setdefault(output.name, []).append(output)
    remaining: dict[str, set[str]] = {name: set() for name in by_name}
    for name, same_name in by_name.items():
        for output in same_name:
            for section in ("run", "host", "build"):
                remaining[name].update(
                    dep for dep in output.requirements.names(section) if dep in by_name and dep != name
                )
    ordered: list[RenderedOutput] = []
    while remaining:
        ready = sorted(name for name, deps in remaining.items() if not deps)
        if not ready:
            cycle = ", ".join(sorted(remaining))
            raise ToolError(f"circular dependencies between outputs {cycle}; break the cycle in meta.yaml")
        for name in ready:
            ordered.extend(by_name[name])
            del remaining[name]
        for deps in remaining.values():
            deps.difference_update(ready)
    return tuple(ordered)


# ---- CLI ------------------------------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "render",
        help="emulate conda render of recipe/meta.yaml for one .ci_support file",
        description="Print the outputs conda-build would build for CONFIG, in build order (an emulation; "
        "see feedstock_tools/conda/recipe_render.py for what it does not cover).",
    )
    parser.add_argument(
        "config",
        nargs="?",
        help="a configuration: its name, a unique part of it, a glob matching one, or a path to a .yaml "
        "file (as build-locally.py and rehearse take it); without it, only conda-build's first pass (no "
        "variant, every variant key undefined) is rendered for --subdir",
    )
    parser.add_argument(
        "--subdir",
        help="target platform of the first pass without CONFIG (default: linux-64); a CONFIG names its own",
    )
    parser.add_argument(
        "--recipe", type=Path, default=Path("recipe"), help="recipe directory (default: recipe)"
    )
    parser.add_argument("--requirements", action="store_true", help="also print each output's requirements")
    parser.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    if not (args.recipe / "meta.yaml").is_file():
        raise ToolError(f"--recipe {args.recipe}: no meta.yaml there; give the recipe directory (recipe/)")
    if args.config is None:
        subdir = args.subdir or "linux-64"
        if subdir not in KNOWN_SUBDIRS:
            raise ToolError(f"unknown --subdir {subdir!r}; expected one of {', '.join(KNOWN_SUBDIRS)}")
        check_recipe(args.recipe)  # the first pass alone would not parse conda_build_config.yaml
        first = render_first_pass(args.recipe, subdir)
        for output in first.get("outputs") or [first]:
            name = output.get("name") or (output.get("package") or {}).get("name")
            print(f"{name}  (first pass: no variant; pass a .ci_support file for the real build strings)")
        return 0
    if args.subdir is not None:
        raise ToolError("--subdir applies only without CONFIG (a configuration names its own platform)")
    config = config_selector.resolve_one(
        args.config, Feedstock(args.recipe.resolve().parent).ci_support, outside=True
    )
    rendered = render_recipe(args.recipe, read_configuration(config))
    for output in rendered.outputs:
        print(f"{output.dist}  (build number {output.build_number})")
        if args.requirements:
            for section in REQUIREMENT_SECTIONS:
                for spec in getattr(output.requirements, section):
                    print(f"    {section}: {spec}")
    return 0
