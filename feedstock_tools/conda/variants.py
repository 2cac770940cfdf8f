"""conda-build's variant algebra and conda-smithy's migration algebra, reproduced as plain data operations.

A *spec* maps variant keys to lists of values (``{"python": ["3.10.* *_cpython", ...], "zip_keys":
[[...], ...]}``); a *variant* maps each key to one value. The functions here follow the documented
behaviour of conda-build (``conda_build/variants.py``: reading config files with the YAML base loader,
``combine_specs``, ``explode_variants``, ``list_of_dicts_to_dict_of_lists``, ``get_vars``) and of
conda-smithy (``conda_smithy/variant_algebra.py``: ``variant_add`` with the ``key_add`` operation and
its ``ordering``), so that the CI-file generator computes what ``conda smithy rerender`` computes.

Everything is a string, as in conda-build: variant files are read with PyYAML's ``BaseLoader``, so
``12.9``, ``true`` and ``None`` stay the text they were written as.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from feedstock_tools.common.errors import InputError
from feedstock_tools.conda.selectors import SelectorError, select_numbered_lines, selector_namespace
from feedstock_tools.conda.yaml_errors import yaml_error, yaml_problem
from feedstock_tools.conda.yaml_load import base_load

Spec = dict[str, Any]
Variant = dict[str, Any]

# Keys whose values are merged instead of replaced when specs are combined (conda-build's
# DEFAULT_VARIANTS["extend_keys"]); zip_keys is merged group-wise.
EXTEND_KEYS = ("pin_run_as_build", "ignore_version", "ignore_build_only_deps", "extend_keys")
# Keys never exploded into the matrix and never counted as loop variables.
SPECIAL_KEYS = frozenset({"pin_run_as_build", "zip_keys", "ignore_version", *EXTEND_KEYS})

# conda-build's platform default compilers (DEFAULT_COMPILERS in conda_build/variants.py).
_DEFAULT_COMPILERS = {
    "linux": {"c_compiler": "gcc", "cxx_compiler": "gxx", "fortran_compiler": "gfortran"},
    "osx": {"c_compiler": "clang", "cxx_compiler": "clangxx", "fortran_compiler": "gfortran"},
}


class VariantError(ValueError):
    """A variant file or migration cannot be combined; the message says which key and why."""


def _trim_empty_keys(spec: Spec) -> Spec:
    """conda-build's ``trim_empty_keys``: a key whose every value was selected away disappears."""
    return {key: value for key, value in spec.items() if value not in (None, [], {}, "")}


def parse_variant_text(
    text: str,
    subdir: str,
    environ: Mapping[str, str],
    variant: Mapping[str, Any] | None = None,
    source: Path | None = None,
) -> Spec:
    """A ``conda_build_config.yaml``-style text as conda-build reads it for ``subdir``.

    Selectors first (with ``os.environ`` reading ``environ``), then YAML with the base loader so every
    scalar stays a string, then keys whose values were all selected away are dropped. With ``source``
    (the file ``text`` was read from), a YAML error or a selector that cannot be evaluated is one
    :class:`InputError` naming the file and its line (the selected text has fewer lines than the file).
    """
    namespace = selector_namespace(subdir, variant or {}, environ=environ)
    try:
        selected, numbers = select_numbered_lines(text, namespace)
    except SelectorError as exc:
        if source is None:
            raise
        raise InputError(f"{source}: {exc}; fix the selector") from None
    try:
        loaded = base_load(selected) or {}
    except yaml.YAMLError as exc:
        if source is None:
            raise VariantError(f"not valid YAML ({yaml_problem(exc)})") from None
        raise yaml_error(source, exc, selected, numbers) from None
    if not isinstance(loaded, dict):
        named = f"{source}: " if source is not None else ""
        raise VariantError(f"{named}a variant file must be a mapping of keys to lists of values")
    return _trim_empty_keys(loaded)


def default_variant(subdir: str) -> Spec:
    """conda-build's internal defaults for a build of ``subdir`` (``get_default_variant``).

    Only the entries that can reach a rendered CI file matter here: ``target_platform``, the default
    compilers and ``pin_run_as_build`` for python, which is why every CI file of a Python recipe
    carries ``python: {min_pin: x.x, max_pin: x.x}``.
    """
    platform = subdir.split("-", 1)[0]
    spec: Spec = {
        "numpy": "1.22",
        "perl": "5.26.2",
        "lua": "5",
        "r_base": "3.5",
        "cpu_optimization_target": "nocona",
        "pin_run_as_build": {
            "python": {"min_pin": "x.x", "max_pin": "x.x"},
            "r-base": {"min_pin": "x.x", "max_pin": "x.x"},
        },
        "ignore_version": [],
        "ignore_build_only_deps": ["python", "numpy"],
        "extend_keys": list(EXTEND_KEYS),
        "cran_mirror": "https://cran.r-project.org",
        "target_platform": subdir,
    }
    spec.update(_DEFAULT_COMPILERS.get(platform, {}))
    return spec


def as_list(value: Any) -> list[Any]:
    """conda-build's ``ensure_list`` for variant values (a dict stays a single value)."""
    if isinstance(value, list | tuple | set):
        return list(value)
    return [value]


def _zip_groups(value: Any) -> list[list[str]]:
    groups = [group for group in as_list(value) if group]
    if groups and not isinstance(groups[0], list | tuple):
        groups = [groups]
    return [list(group) for group in groups]


def _merge_extend_key(values: Spec, key: str, value: Any) -> None:
    if isinstance(value, dict):
        merged = dict(values.get(key, {}))
        merged.update(value)
        values[key] = merged
    else:
        values[key] = sorted(set(as_list(values.get(key, [])) + as_list(value)))


def _replace_key(values: Spec, spec: Spec, key: str, group: list[str]) -> None:
    """One file's value of ``key`` replaces the earlier one, respecting its zip group."""
    new = as_list(spec[key])
    if all(member in spec for member in group):
        for member in group:
            if len(as_list(spec[member])) != len(new):
                raise VariantError(
                    f"zip_keys group {group}: {key} and {member} have different lengths in one file"
                )
            values[member] = as_list(spec[member])
        return
    if key not in values:
        values[key] = new
        return
    if all(len(as_list(source[m])) == len(new) for m in group for source in (spec, values) if m in source):
        values[key] = new
    missing = [item for item in new if item not in values[key]]
    if missing:
        raise VariantError(
            f"{key}: {missing} is not among {values[key]}; set every key of zip group {group} together"
        )


def combine_specs(specs: Sequence[Spec]) -> Spec:
    """Merge specs in priority order (later wins), like conda-build's ``combine_specs``.

    zip_keys groups are unioned; extend keys are merged; any other key is replaced, but a key that is
    part of a zip group may only be replaced together with its whole group or by a list of the same
    length (otherwise conda-build stops with an ambiguity error, and so does this).
    """
    extend_keys = set(EXTEND_KEYS)
    zip_keys: list[list[str]] = []
    for spec in specs:
        extend_keys.update(as_list(spec.get("extend_keys", [])))
        zip_keys += [group for group in _zip_groups(spec.get("zip_keys", [])) if group not in zip_keys]
    values: Spec = {}
    for spec in specs:
        for key, value in spec.items():
            if key == "zip_keys":
                continue
            if key in extend_keys:
                _merge_extend_key(values, key, value)
            elif isinstance(value, dict):
                values[key] = dict(value)
            else:
                _replace_key(values, spec, key, next((g for g in zip_keys if key in g), [key]))
    if zip_keys:
        values["zip_keys"] = zip_keys
    return values


def explode(spec: Spec) -> list[Variant]:
    """Every combination of a spec, zip groups moving together (conda-build ``explode_variants``).

    The extend keys (``pin_run_as_build``, ``ignore_version``, ...), the spec's own ``extend_keys`` and
    ``zip_keys`` pass through to every variant unchanged. conda-build takes the product over sets of keys
    and groups, so its order is arbitrary; here a key or zip group varies in the order it first appears in
    the spec (the last one fastest), which the render emulation relies on for a stable output order.
    Zipped keys of different lengths are a :class:`VariantError`.
    """
    zip_keys = _zip_groups(spec.get("zip_keys", []))
    extend_keys = set(EXTEND_KEYS) | set(as_list(spec.get("extend_keys", [])))
    zipped = {key for group in zip_keys for key in group}
    passthru = {key: spec[key] for key in spec if key in extend_keys | {"zip_keys"} and key not in zipped}
    dimensions: list[tuple[tuple[str, ...], list[tuple[Any, ...]]]] = []
    seen: set[str] = set()
    for key in spec:
        if key in passthru or key in seen:
            continue
        group = next((g for g in zip_keys if key in g), [key])
        members = tuple(member for member in group if member in spec)
        columns = [as_list(spec[member]) for member in members]
        if len({len(column) for column in columns}) > 1:
            lengths = ", ".join(
                f"{member}={len(column)}" for member, column in zip(members, columns, strict=True)
            )
            raise VariantError(
                f"zipped keys {', '.join(members)} have different lengths ({lengths}); "
                "give them equally long lists"
            )
        seen.update(members)
        dimensions.append((members, list(zip(*columns, strict=True))))
    variants: list[Variant] = []
    for combination in itertools.product(*(values for _, values in dimensions)):
        variant: Variant = dict(passthru)
        for (keys, _), values in zip(dimensions, combination, strict=True):
            variant.update(zip(keys, values, strict=True))
        variants.append(variant)
    return variants


def squish(variants: Iterable[Mapping[str, Any]]) -> Spec:
    """The inverse of :func:`explode` (conda-build ``list_of_dicts_to_dict_of_lists``).

    Values of an unzipped key become a set; a zip group keeps only distinct tuples. Order is not
    meaningful: conda-smithy sorts everything before it writes a CI file.
    """
    variants = list(variants)
    if not variants:
        return {}
    groups = _zip_groups(variants[0].get("zip_keys", []))
    zipped = {key for group in groups for key in group}
    squished: Spec = {}
    for variant in variants:
        for key, value in variant.items():
            if key == "zip_keys":
                continue
            if isinstance(value, dict):
                merged = dict(squished.get(key, {}))
                merged.update(value)
                squished[key] = merged
            elif isinstance(value, list):
                squished[key] = set(squished.get(key, set())) | set(value)
            else:
                squished.setdefault(key, []).append(value)
    for key, value in list(squished.items()):
        if isinstance(value, list) and key not in zipped:
            squished[key] = list(dict.fromkeys(value))
    for group in groups:
        present = [key for key in group if key in squished]
        if present:
            tuples = list(dict.fromkeys(zip(*(squished[key] for key in present), strict=True)))
            for index, key in enumerate(present):
                squished[key] = [values[index] for values in tuples]
    squished["zip_keys"] = groups
    return squished


# --- conda-smithy's variant algebra (CFEP-9 migrations) ------------------------------------------------

_VERSION_PART = re.compile(r"\d+|[A-Za-z]+")


def version_order(value: str) -> tuple[tuple[int, Any], ...]:
    """A sort key close to conda's ``VersionOrder`` for the pins migrations compare (``2.13`` > ``2.9``).

    conda-smithy first rewrites spaces to dots and ``*`` to ``1``; numbers compare numerically and
    sort after words, so ``12.9`` < ``13.0`` and ``11`` > ``4``.
    """
    text = str(value).replace(" ", ".").replace("*", "1")
    return tuple(
        (1, int(part)) if part.isdigit() else (0, part.lower()) for part in _VERSION_PART.findall(text)
    )


def _ordinal(value: str, ordering: Sequence[str] | None) -> Any:
    if ordering is not None:
        try:
            return list(ordering).index(value)
        except ValueError:
            raise VariantError(
                f"value {value!r} is not in the migration's ordering {list(ordering)}"
            ) from None
    return version_order(value)


def variant_key_add(
    left: Sequence[str], right: Sequence[str], ordering: Sequence[str] | None = None
) -> list[str]:
    """conda-smithy ``variant_key_add``: the higher of each pair of values, tails kept.

    With an ``ordering`` the union of both sides is sorted by it and the last ``max(len)`` entries are
    kept, so a migration can push a new value to the end of a list.
    """
    if ordering is None:
        common = min(len(left), len(right))
        out = [
            right[i] if version_order(left[i]) < version_order(right[i]) else left[i] for i in range(common)
        ]
        out.extend(left[common:])
        out.extend(right[common:])
        return out
    ordinals = sorted({_ordinal(v, ordering) for v in left} | {_ordinal(v, ordering) for v in right})
    longer = max(len(left), len(right))
    if len(ordinals) < longer:
        if len(ordinals) == 1:
            return [left[0]] * longer
        raise VariantError("ambiguous merge: duplicate values under an ordering")
    return [list(ordering)[i] for i in ordinals[-longer:]]


def _primary_group(result: Spec, primary: str, additional: list[str]) -> tuple[list[str], set[str]]:
    """The zip group of the primary key, extended by ``additional_zip_keys`` (in place in ``result``)."""
    group = next((chunk for chunk in result["zip_keys"] if primary in chunk), [primary])
    if not additional:
        return group, set()
    if primary not in group or group not in result["zip_keys"]:
        group = [primary, *additional]
        result["zip_keys"].append(group)
        return group, set(additional)
    newly_added = {key for key in additional if key not in group}
    group.extend(key for key in additional if key not in group)
    return list(group), newly_added


def _key_add_operation(base: Spec, migration: Spec) -> Spec:
    """conda-smithy ``op_variant_key_add``: add the migration's values of ``primary_key`` as new zip rows."""
    migrator = migration["__migrator"]
    primary = migrator["primary_key"]
    ordering = migrator.get("ordering", {}) or {}
    if primary not in migration:
        return base
    if primary not in base:
        raise VariantError(f"migration adds {primary}, which the recipe's variant spec does not have")
    result = {key: (list(value) if isinstance(value, list) else value) for key, value in base.items()}
    result["zip_keys"] = [list(group) for group in _zip_groups(base.get("zip_keys", []))]
    additional = as_list(migrator.get("additional_zip_keys", []) or [])
    group, newly_added = _primary_group(result, primary, additional)
    missing = [key for key in group if key not in migration]
    if missing:
        raise VariantError(f"migration does not give {missing}, which are zipped with {primary}")
    position = group.index(primary)
    for index in range(len(as_list(migration[primary]))):
        rows = len(as_list(result[primary]))
        columns = {}
        for key in group:
            existing = as_list(result[key])
            if key in newly_added:
                if len(existing) != 1:
                    raise VariantError(f"cannot broadcast {key}={existing} to {rows} rows")
                existing = existing * rows
            columns[key] = existing
        existing_rows = list(zip(*(columns[key] for key in group), strict=True))
        new_row = tuple(as_list(migration[key])[index] for key in group)
        if new_row in existing_rows:
            continue
        rows_sorted = sorted(
            set(existing_rows) | {new_row}, key=lambda row: _ordinal(row[position], ordering.get(primary))
        )
        for column, key in enumerate(group):
            result[key] = [row[column] for row in rows_sorted]
    for key in set(ordering) - newly_added - {primary}:
        result[key] = variant_key_add(as_list(base[key]), as_list(migration[key]), ordering[key])
    if not result["zip_keys"]:
        del result["zip_keys"]
    return result


def variant_add(base: Spec, migration: Spec) -> Spec:
    """conda-smithy ``variant_add``: apply one migration (already parsed for the platform) to a spec."""
    migration = {key: value for key, value in migration.items() if key != "migrator_ts"}
    migrator = migration.get("__migrator", {}) or {}
    operation = migrator.get("operation")
    if operation == "key_add":
        return _key_add_operation(base, migration)
    if operation:
        raise VariantError(f"migration operation {operation!r} is not supported by this generator")
    ordering = migrator.get("ordering", {}) or {}
    primary_keys = as_list(migrator.get("primary_key", []) or [])
    left_only = {k: v for k, v in base.items() if k not in migration}
    right_only = {k: v for k, v in migration.items() if k not in base and k != "__migrator"}
    joint = set(base) & set(migration) - {"__migrator"}
    special: Spec = {}
    if "pin_run_as_build" in joint:
        joint.discard("pin_run_as_build")
        special["pin_run_as_build"] = {**base["pin_run_as_build"], **migration["pin_run_as_build"]}
    if "zip_keys" in joint:
        joint.discard("zip_keys")
        left_groups = [frozenset(g) for g in _zip_groups(base["zip_keys"])]
        right_groups = [frozenset(g) for g in _zip_groups(migration["zip_keys"])]
        merged: list[frozenset[str]] = []
        for right in sorted(right_groups, key=len, reverse=True):
            for left in sorted(left_groups, key=len, reverse=True):
                if left <= right:
                    left_groups.remove(left)
                    right_groups.remove(right)
                    merged.append(right)
                    break
        merged.extend(left_groups)
        merged.extend(right_groups)
        special["zip_keys"] = sorted((sorted(g) for g in merged), key=lambda g: (len(g), str(g)))
    joint_values: Spec = {}
    handled: set[str] = set()
    groups = _zip_groups(base.get("zip_keys", [])) + _zip_groups(migration.get("zip_keys", []))
    for primary in primary_keys:
        if primary not in migration:
            continue
        left, right = as_list(base[primary]), as_list(migration[primary])
        merged_values = variant_key_add(left, right, ordering.get(primary))
        joint_values[primary] = merged_values
        group = next((set(g) for g in groups if primary in g), set())
        if not group:
            continue
        chosen = [i for i, value in enumerate(left + right) if value in merged_values]
        for key in group - {primary}:
            both = as_list(base[key]) + as_list(migration[key])
            joint_values[key] = [value for i, value in enumerate(both) if i in chosen]
        handled |= group
    for key in joint - handled:
        joint_values[key] = variant_key_add(as_list(base[key]), as_list(migration[key]), ordering.get(key))
    return {**left_only, **right_only, **joint_values, **special}


def migration_timestamp(text: str) -> float:
    """The ``migrator_ts`` of a migration file, which decides the order migrations are applied in."""
    loaded = base_load(text) or {}
    return float(loaded.get("migrator_ts", -1.0)) if isinstance(loaded, dict) else -1.0
