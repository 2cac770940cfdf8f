"""The one way into ``meta.yaml``'s Jinja and YAML: one Jinja environment, one YAML loader, one cache of each.

Three renders read the recipe as conda-build does, each with the undefined-name behaviour of the pass it
stands for: conda-build's first pass (:mod:`feedstock_tools.conda.first_pass`, its ``UndefinedNeverFail``),
the conda-build render of a configuration (:mod:`feedstock_tools.conda.recipe_render`: ``StrictUndefined``,
or lenient for a partial variant) and the CI-file writer's render of conda-smithy's variants
(:mod:`feedstock_tools.ci.ci_support`: Jinja's plain ``Undefined``). They all come here:

* :func:`template`: the recipe text (after a platform's selectors) compiled once, in one environment with
  conda-build's options (26.7.1 ``metadata.py`` 2052: ``jinja2.Environment(loader=..., undefined=...)``, no
  extension) and ``keep_trailing_newline`` (the last line break, which YAML ignores), then bound to the
  render's ``Undefined`` class. Jinja looks that class up when a template runs
  (``undefined = environment.undefined`` heads every compiled template, jinja2 3.1 ``compiler.py`` 729), so
  the code compiled once serves the three: a ``check`` compiles the 16 texts that the conda-build render
  and the CI-file writer share once instead of twice.
* :func:`load`: the rendered text read with conda-build's loader (``StringifyNumbersLoader``, 26.7.1
  ``metadata.py`` 77-102 and ``yamlize`` 403-405: YAML's int and float resolvers removed, so ``3.10`` stays
  ``"3.10"``), parsed once per text and handed out as the caller's own copy.

The symbolic evaluator of convert-v1 (:mod:`feedstock_tools.conda.meta_jinja`) reads the template's syntax
tree, not its rendering, and does not come here.
"""

from __future__ import annotations

import functools
from types import CodeType
from typing import Any

import jinja2
import yaml

from feedstock_tools.conda.yaml_load import SAFE_LOADER

ENVIRONMENT = jinja2.Environment(keep_trailing_newline=True)

# conda-build reads meta.yaml with YAML's int and float resolvers removed (its StringifyNumbersLoader):
# numbers stay strings ("3.10" is not 3.1, a version "2.10" stays "2.10"). The C parser when PyYAML has it:
# the recipe is parsed many times per configuration.
_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
_STRINGIFY_NUMBERS = {
    first: [(tag, regex) for tag, regex in resolvers if tag not in _NUMBER_TAGS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class StringifyNumbersLoader(SAFE_LOADER):  # type: ignore[misc]
    """A safe YAML loader that keeps numbers as strings, as conda-build's StringifyNumbersLoader does."""

    yaml_implicit_resolvers = _STRINGIFY_NUMBERS


@functools.lru_cache(maxsize=256)
def _code(text: str) -> CodeType:
    """``text`` compiled once: compiling is most of a render's Jinja time, and one process's commands on one
    recipe (check, its anchor-parity families, the solve channel's cross builds) select some 80 texts between
    them (a platform's selectors and variant choose the lines): they all stay. Raises
    ``jinja2.TemplateSyntaxError``."""
    return ENVIRONMENT.compile(text)


@functools.cache
def _environment(undefined: type[jinja2.Undefined]) -> jinja2.Environment:
    """The one environment with ``undefined`` for names the context lacks (an overlay: its options are
    the environment's)."""
    return ENVIRONMENT.overlay(undefined=undefined)


@functools.lru_cache(maxsize=512)
def template(text: str, undefined: type[jinja2.Undefined]) -> jinja2.Template:
    """``text`` as a template that renders a name its context lacks as ``undefined`` does. Raises
    ``jinja2.TemplateSyntaxError``."""
    environment = _environment(undefined)
    return environment.template_class.from_code(environment, _code(text), environment.make_globals(None))


@functools.lru_cache(maxsize=1024)
def _parsed(text: str) -> Any:
    """Parsed once per text: two thirds of a render's documents repeat one already parsed, and PyYAML's
    constructor is most of a render's time; a ``check`` of every configuration asks for about 3,500
    documents of about 500 texts, which all fit."""
    return yaml.load(text, Loader=StringifyNumbersLoader) or {}


def load(text: str) -> Any:
    """The rendered recipe ``text`` as YAML (``{}`` when empty), the caller's own copy. Raises
    ``yaml.YAMLError``."""
    return _copy_of(_parsed(text))


def _copy_of(data: Any) -> Any:
    """A deep copy of a parsed YAML document (dicts, lists, sets and immutable scalars): the cached one stays
    as parsed. Faster than ``copy.deepcopy``, which a render would call for every document."""
    if isinstance(data, dict):
        return {key: _copy_of(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_copy_of(value) for value in data]
    if isinstance(data, set):  # YAML's !!set
        return set(data)
    return data
