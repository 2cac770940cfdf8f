"""``convert-v1``: recipe-v1/recipe.yaml, generated from recipe/meta.yaml.

meta.yaml is the one recipe a maintainer edits: conda-forge builds it (conda-forge.yml: conda-build), the
regro bot bumps its ``{% set version %}`` and sha256, and conda-forge moves a recipe to v1 by converting
meta.yaml (conda-recipe-manager's ``convert``). recipe-v1/recipe.yaml says the same in rattler-build's v1
format and is written by this module, byte for byte the same from the same meta.yaml; ``convert-v1
--check``, ``render-ci --check``, ``check`` and CI fail when the committed file is not what it writes
(docs/reference/recipe-v1.md).

How meta.yaml is read: its Jinja evaluated symbolically (:mod:`feedstock_tools.conda.meta_jinja`: lists
built under ``{% if %}`` blocks become items with conditions, written out by ``{% for %}`` in every output,
since v1 cannot splice a list into a list; a scalar set of the preamble is a ``context`` entry), then its
YAML read into a tree whose entries carry their conditions and comments and written back as v1 text
(:mod:`feedstock_tools.conda.recipe_tree`). meta.yaml's comments go with the lines they stand above.

The structure is conda-build's mapped to rattler-build's, one table: the top-level build is pass 1, the
``staging`` output (CEP 41) every scripted output inherits; ``script: build.sh`` is a script that runs
recipe/'s build.sh; ``script_env`` is ``script.env`` (a name: the caller's value; ``NAME=value``: that
value); ``force_use_keys`` is ``variant.use_keys``; ``test`` is a ``python`` test (imports) and a script
test whose files come from recipe/ as path sources (rattler-build copies a test's ``files.recipe`` from its
own directory only); and the renamed keys of ``_BUILD_KEYS``; an output's ``force_ignore_keys`` is left out
(``_BUILD_KEYS_DROPPED`` says why).
Anything else in meta.yaml stops the conversion with the line and what to do, rather than be guessed.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from jinja2 import nodes

from feedstock_tools.common.errors import InputError, ToolError
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.conda import jinja_expr
from feedstock_tools.conda.meta_jinja import Evaluator, evaluate
from feedstock_tools.conda.recipe_tree import Comment, Emitter, Entry, Node, joined, merge, parse

V1_DIRNAME = "recipe-v1"
COMMAND = "python -m feedstock_tools convert-v1"
GENERATED = "recipe.yaml"
# conda-smithy reads the variant file from conda-forge.yml's recipe_dir (configure_feedstock.py,
# get_package_combined_spec): the v1 directory holds a copy of recipe/'s
VARIANT_FILE = "conda_build_config.yaml"


# ---- conda-build's recipe structure as rattler-build's ------------------------------------------------

# build: keys of a v0 output and where v1 says them (path below the output; "requirements/..." moves there)
_BUILD_KEYS = {
    "number": ("build", "number"),
    "string": ("build", "string"),
    "skip": ("build", "skip"),
    "script_env": ("build", "script", "env"),
    "force_use_keys": ("build", "variant", "use_keys"),
    "detect_binary_files_with_prefix": ("build", "prefix_detection", "ignore_binary_files"),
    "missing_dso_whitelist": ("build", "dynamic_linking", "missing_dso_allowlist"),
    "entry_points": ("build", "python", "entry_points"),
    "run_exports": ("requirements", "run_exports"),
    "ignore_run_exports_from": ("requirements", "ignore_run_exports", "from_package"),
}
# build: keys of a v0 output that v1 leaves out, and why
_BUILD_KEYS_DROPPED = {
    # conda-smithy reads it from meta.yaml alone (which keys split CI jobs: docs/reference/recipe.md); v1's
    # build.variant.ignore_keys would instead undefine the key in that output, and rattler-build 0.73.0 then
    # fails the metapackage's build string "${{ blas_impl }}" ("Failed to render build string template:
    # undefined value", measured)
    "force_ignore_keys": "conda-smithy's job split only",
}
_REQUIREMENT_KEYS = {"build": "build", "host": "host", "run": "run", "run_constrained": "run_constraints"}
_ABOUT_KEYS = {
    "home": "homepage",
    "dev_url": "repository",
    "doc_url": "documentation",
    "license": "license",
    "license_file": "license_file",
    "summary": "summary",
    "description": "description",
}
# v1's about has no license_family (the SPDX license says it)
_ABOUT_DROPPED = ("license_family",)
_TEST_KEYS = ("requires", "imports", "files", "source_files", "commands")
_SPEC_OPERATORS = "<>=!~*"


def _scalar(text: str) -> Node:
    return Node("scalar", text=text)


def _map(
    pairs: Sequence[tuple[str, Node | None]], comments: dict[str, tuple[Comment, ...]] | None = None
) -> Node:
    comments = comments or {}
    return Node("map", [Entry(k, v, comments=comments.get(k, ())) for k, v in pairs if v is not None])


def _generated(*lines: str) -> tuple[Comment, ...]:
    return (Comment(tuple(lines), -1),)


def spec_words(text: str) -> list[str]:
    """A match spec's words; a ``${{ ... }}`` is part of the word it stands in."""
    spans = iter(re.findall(r"\$\{\{.*?\}\}", text))
    words = re.sub(r"\$\{\{.*?\}\}", "\0", text).split()
    return [re.sub("\0", lambda _: next(spans), word) for word in words]


def canonical_spec(text: str) -> str:
    """conda's short version forms as rattler-build's strict parser needs them: ``name 1.2`` is
    ``name 1.2.*`` and ``name 1.2 build`` is ``name ==1.2 build`` (conda's match-spec meaning; rattler-build
    0.73.0 refuses the short forms: "missing range specifier")."""
    words = spec_words(text)
    if len(words) not in (2, 3) or words[1][:1] in _SPEC_OPERATORS or "*" in words[1]:
        return text
    words[1] = f"{words[1]}.*" if len(words) == 2 else f"=={words[1]}"
    return " ".join(words)


class Converter:
    """meta.yaml's tree (after its Jinja) as the v1 recipe's tree, section by section."""

    def __init__(self, tree: Node, evaluator: Evaluator, source: str, recipe_from_v1: str) -> None:
        self.tree, self.evaluator, self.source = tree, evaluator, source
        self.recipe_from_v1 = recipe_from_v1  # "../recipe": recipe/ seen from the v1 directory
        self.test_dirs: list[str] = []

    def error(self, entry: Entry | None, what: str) -> InputError:
        line = f":{entry.line}" if entry is not None and entry.line else ""
        return InputError(f"{self.source}{line}: {what}")

    def fields(self, node: Node, where: str, allowed: Sequence[str]) -> dict[str, list[Entry]]:
        found: dict[str, list[Entry]] = {}
        if node.kind != "map":
            raise self.error(None, f"{where} is not a mapping")
        for entry in node.entries:
            if entry.key not in allowed:
                raise self.error(
                    entry,
                    f"{where}: {entry.key!r} has no v1 counterpart in {COMMAND} (feedstock_tools/conda/"
                    "recipe_v1.py); add its mapping there or leave the key out",
                )
            found.setdefault(entry.key, []).append(entry)  # type: ignore[arg-type]
        return found

    def required(self, found: dict[str, list[Entry]], key: str, where: str) -> Entry:
        entry = self.one(found, key)
        if entry is None:
            raise self.error(None, f"{where} has no {key!r}; a recipe {COMMAND} converts states it")
        return entry

    def one(self, found: dict[str, list[Entry]], key: str) -> Entry | None:
        """The entry of ``key``: once, and under a condition only when it is a list (the condition goes to
        its items)."""
        entries = found.get(key, [])
        if len(entries) > 1 or (entries and entries[0].cond and entries[0].value.kind != "seq"):
            raise self.error(entries[-1], f"{key} under a condition or twice; v1 states a key once")
        return entries[0] if entries else None

    # -- lists
    def seq(self, entry: Entry | None, spec: bool = False) -> Node | None:
        """A list, its items with the entry's conditions (and, for requirements, canonical specs)."""
        if entry is None:
            return None
        if entry.value.kind != "seq":
            raise self.error(entry, f"{entry.key} is not a list")
        items = []
        for item in entry.value.entries:
            merged = merge(entry.cond, item.cond)
            if merged is None:
                continue
            text = canonical_spec(item.value.text) if spec else item.value.text
            items.append(replace(item, value=_scalar(text), cond=merged))
        return Node("seq", items)

    def items(self, found: dict[str, list[Entry]], key: str, spec: bool = False) -> list[Entry]:
        """The items of the list ``key`` (none when it is absent)."""
        node = self.seq(self.one(found, key), spec=spec)
        return node.entries if node is not None else []

    # -- sections
    def convert(self) -> Node:
        top = self.fields(
            self.tree,
            "meta.yaml",
            ("package", "source", "build", "requirements", "outputs", "about", "extra"),
        )
        package = self.fields(
            self.required(top, "package", "meta.yaml").value, "package", ("name", "version")
        )
        name = self.required(package, "name", "package").value.text
        build = self.fields(
            self.required(top, "build", "meta.yaml").value,
            "build",
            ("number", "skip", "error_overlinking", "script_env", "force_use_keys"),
        )
        outputs_entry = self.required(top, "outputs", "meta.yaml")
        outputs = [self.output(o, name) for o in outputs_entry.value.entries]
        staging = self.staging(name, build, self.one(top, "requirements"))
        pairs: list[tuple[str, Node | None]] = [
            ("context", self.context()),
            (
                "recipe",
                _map(
                    [("name", _scalar(name)), ("version", self.required(package, "version", "package").value)]
                ),
            ),
            ("source", self.sources(self.required(top, "source", "meta.yaml"))),
            ("build", self.top_build(build)),
            ("outputs", Node("seq", [Entry(None, staging, comments=outputs_entry.comments), *outputs])),
            ("about", self.about(self.one(top, "about"))),
            ("extra", self.one(top, "extra").value if top.get("extra") else None),  # type: ignore[union-attr]
        ]
        return _map(pairs)

    def context(self) -> Node:
        entries = []
        for name, scalar, comments in self.evaluator.context:
            if scalar is None or scalar.kind == "inline":
                notes = comments
                if scalar is not None:
                    text = jinja_expr.unparse(jinja_expr.to_v1(scalar.node, self.source))
                    notes = (*comments, *_generated(f"({name}: written out where it is used, as {text})"))
                if notes:
                    entries.append(Entry(None, Node("comments"), comments=notes))
                continue
            node = scalar.node
            if (
                isinstance(node, nodes.Const)
                and isinstance(node.value, str | int)
                and not isinstance(node.value, bool)
            ):
                text = jinja_expr.unparse(node)
            else:
                text = "${{ " + jinja_expr.unparse(jinja_expr.to_v1(node, self.source)) + " }}"
            entries.append(Entry(name, _scalar(text), comments=comments))
        return Node("map", entries)

    def sources(self, entry: Entry) -> Node:
        found = self.fields(entry.value, "source", ("url", "sha256", "git_url", "git_rev", "patches"))
        pairs: list[tuple[str, Node | None]] = []
        for v0, v1 in (("url", "url"), ("sha256", "sha256"), ("git_url", "git"), ("git_rev", "rev")):
            chosen = self.one(found, v0)
            if chosen is not None:
                pairs.append((v1, chosen.value))
        patches = self.seq(self.one(found, "patches"))
        if patches is not None:
            for item in patches.entries:
                item.value = _scalar(f"{self.recipe_from_v1}/{item.value.text}")
            pairs.append(("patches", patches))
        comments = {"patches": found["patches"][0].comments} if "patches" in found else {}
        entries = [Entry(None, _map(pairs, comments))]
        for index, directory in enumerate(self.test_dirs):
            entries.append(
                Entry(
                    None,
                    _map(
                        [
                            ("path", _scalar(f"{self.recipe_from_v1}/{directory}")),
                            ("target_directory", _scalar(directory)),
                        ]
                    ),
                    comments=()
                    if index
                    else _generated(
                        "the package tests' files, recipe/'s: rattler-build (0.73.0, measured) copies",
                        "a test's `files.recipe` from this directory only, following no link: they come",
                        "in as sources",
                    ),
                )
            )
        return Node("seq", entries)

    def top_build(self, build: dict[str, list[Entry]]) -> Node:
        number = self.required(build, "number", "build")
        pairs: list[tuple[str, Node | None]] = [("number", number.value)]
        comments: dict[str, tuple[Comment, ...]] = {"number": number.comments}
        skip = self.skip(build)
        if skip is not None:
            pairs.append(("skip", skip))
            comments["skip"] = build["skip"][0].comments
        overlinking = self.one(build, "error_overlinking")
        if overlinking is not None and overlinking.value.text == "true":
            pairs.append(("dynamic_linking", _map([("overlinking_behavior", _scalar("error"))])))
            comments["dynamic_linking"] = overlinking.comments
        return _map(pairs, comments)

    def skip(self, found: dict[str, list[Entry]]) -> Node | None:
        entries = found.get("skip", [])
        if not entries:
            return None
        items = []
        for entry in entries:
            if entry.value.text not in ("true", "True"):
                raise self.error(entry, "skip is not 'true  # [condition]'")
            items.append(Entry(None, _scalar(joined(entry.cond) if entry.cond else "true"), eol=entry.eol))
        return Node("seq", items)

    def script(self, scripts: list[Entry], env: Entry | None, extra_env: list[tuple[str, str]]) -> Node:
        """The v1 script of an output conda-build runs ``script:`` (a file of recipe/) for: the file, run from
        recipe/ with RECIPE_DIR pointed there, so the driver sees what it sees under conda-build; and
        ``script_env`` as ``env`` entries (after ``extra_env``)."""
        back = self.recipe_from_v1
        content = []
        for entry in scripts:
            filename = entry.value.text
            if filename.endswith(".bat"):
                lines = [
                    f'set "RECIPE_DIR=%RECIPE_DIR%\\{back.replace("/", chr(92))}"',
                    f'call "%RECIPE_DIR%\\{filename}"',
                    "if errorlevel 1 exit 1",
                ]
            elif filename.endswith(".sh"):
                lines = [f'export RECIPE_DIR="${{RECIPE_DIR}}/{back}"', f'bash "${{RECIPE_DIR}}/{filename}"']
            else:
                raise self.error(entry, f"script {filename!r} is neither a .sh nor a .bat file of the recipe")
            content += [Entry(None, _scalar(line), cond=entry.cond) for line in lines]
        content[0].comments = _generated(
            "the driver and its scripts are recipe/'s, shared with meta.yaml: run there, as from there"
        )
        env_entries = [Entry(k, _scalar(v)) for k, v in extra_env]
        items = self.seq(env).entries if env is not None else []  # type: ignore[union-attr]
        passed_through = False
        for item in items:
            if item.cond:
                raise self.error(env, "script_env under a condition; v1's env is one mapping")
            name, is_set, text = item.value.text.partition("=")
            note: tuple[Comment, ...] = ()
            if is_set:
                # NAME=value: conda-build sets NAME to value (26.7.1 build.py:1785-1789, environ.py:535-537)
                value = _scalar(text)
            else:
                value = _scalar(f'${{{{ env.get("{name}", default="") }}}}')
                if not passed_through:
                    note = _generated(
                        "(script_env: v1 passes no variable through by name; empty is unset to the driver)"
                    )
                passed_through = True
            env_entries.append(Entry(name, value, comments=(*item.comments, *note)))
        env_node = Node("map", env_entries) if env_entries else None
        return _map([("content", Node("seq", content)), ("env", env_node)])

    def staging(self, name: str, build: dict[str, list[Entry]], requirements: Entry | None) -> Node:
        """Pass 1: conda-build's top-level build of a multi-output recipe (build.sh / bld.bat, its
        requirements) as a staging output."""
        scripts = [
            Entry("script", _scalar("build.sh"), cond=("unix",)),
            Entry("script", _scalar("bld.bat"), cond=("win",)),
        ]
        extra_env = [("PKG_NAME", name), ("PKG_VERSION", "${{ version }}")]
        script = self.script(scripts, self.one(build, "script_env"), extra_env)
        env = next(e for e in script.entries if e.key == "env").value
        env.entries[0].comments = _generated(
            "rattler-build sets neither PKG_NAME nor PKG_VERSION in a staging output (measured with 0.73.0):",
            "the driver chooses its pass by PKG_NAME, and the compiler activation's -fdebug-prefix-map names",
            "both, so without them pass 1's flags differ from every later output's (the driver stops there)",
        )
        pairs: list[tuple[str, Node | None]] = [
            ("staging", _map([("name", _scalar(name))])),
            ("build", _map([("script", script)])),
            ("requirements", self.requirements(requirements, None)),
        ]
        comments = {}
        if build.get("force_use_keys"):
            comments["build"] = _generated(
                "(meta.yaml's top-level force_use_keys: a staging build takes only a script (0.73.0:",
                "\"only 'script' and 'steps' are allowed in staging builds\"); its host names the keys)",
            )
        return _map(pairs, comments)

    def requirements(self, entry: Entry | None, build: dict[str, list[Entry]] | None) -> Node | None:
        pairs: list[tuple[str, Node | None]] = []
        comments: dict[str, tuple[Comment, ...]] = {}
        if entry is not None:
            found = self.fields(entry.value, "requirements", tuple(_REQUIREMENT_KEYS))
            for v0, v1 in _REQUIREMENT_KEYS.items():
                chosen = self.one(found, v0)
                pairs.append((v1, self.seq(chosen, spec=True)))
                if chosen is not None:
                    comments[v1] = chosen.comments
        if build is not None:
            exports = self.one(build, "run_exports")
            pairs.append(("run_exports", self.seq(exports)))
            ignored = self.one(build, "ignore_run_exports_from")
            if ignored is not None:
                names = self.seq(ignored)
                for item in names.entries:  # type: ignore[union-attr]
                    # a package name: meta.yaml's "python *" keeps conda-build from taking python as a key
                    item.value = _scalar(spec_words(item.value.text)[0])
                pairs.append(("ignore_run_exports", _map([("from_package", names)])))
                comments["ignore_run_exports"] = ignored.comments
        node = _map(pairs, comments)
        return node if node.entries else None

    def output(self, entry: Entry, staging_name: str) -> Entry:
        found = self.fields(entry.value, "output", ("name", "script", "build", "requirements", "test"))
        name = self.required(found, "name", "an output").value.text
        build_entry = self.one(found, "build")
        build = (
            self.fields(build_entry.value, f"output {name}: build", (*_BUILD_KEYS, *_BUILD_KEYS_DROPPED))
            if build_entry
            else {}
        )
        scripts = found.get("script", [])
        pairs: list[tuple[str, Node | None]] = [("package", _map([("name", _scalar(name))]))]
        comments: dict[str, tuple[Comment, ...]] = {}
        if scripts:
            pairs.append(
                ("inherit", _map([("from", _scalar(staging_name)), ("run_exports", _scalar("false"))]))
            )
            comments["inherit"] = _generated(
                "pass 1's work directory; run_exports: false, or the staging host's run-exports (python_abi",
                "of its Python above all) land on every output (pytorch-cpu-feedstock#518)",
            )
        pairs.append(("build", self.output_build(build, scripts)))
        pairs.append(("requirements", self.requirements(self.one(found, "requirements"), build)))
        pairs.append(("tests", self.tests(self.one(found, "test"))))
        return Entry(None, _map(pairs, comments), comments=entry.comments)

    def output_build(self, build: dict[str, list[Entry]], scripts: list[Entry]) -> Node:
        tree: dict[str, object] = {}
        for key, path in _BUILD_KEYS.items():
            if path[0] != "build" or key == "script_env":
                continue
            if key == "skip":
                chosen, value = (build.get("skip") or [None])[0], self.skip(build)
            else:
                chosen = self.one(build, key)
                if chosen is None:
                    continue
                if key == "detect_binary_files_with_prefix":
                    if chosen.value.text != "false":
                        raise self.error(
                            chosen, f"{key}: only 'false' has a v1 counterpart (ignore_binary_files)"
                        )
                    value = _scalar("true")
                else:
                    value = self.seq(chosen) if chosen.value.kind == "seq" else chosen.value
            if value is None or chosen is None:
                continue
            position = tree
            for part in path[1:-1]:
                position = position.setdefault(part, {})  # type: ignore[assignment]
            position[path[-1]] = Entry(path[-1], value, comments=chosen.comments, eol=chosen.eol)
        if scripts:
            tree["script"] = Entry("script", self.script(scripts, self.one(build, "script_env"), []))
        order = (
            "number",
            "string",
            "skip",
            "script",
            "variant",
            "prefix_detection",
            "dynamic_linking",
            "python",
        )
        return Node("map", [_nested(key, tree[key]) for key in order if key in tree])

    def tests(self, entry: Entry | None) -> Node | None:
        if entry is None:
            return None
        found = self.fields(entry.value, "test", _TEST_KEYS)
        tests = []
        imports = self.one(found, "imports")
        if imports is not None:
            python = _map([("imports", self.seq(imports)), ("pip_check", _scalar("false"))])
            python.entries[1].comments = _generated(
                "meta.yaml's imports test runs no pip check (a command may)"
            )
            tests.append(Entry(None, _map([("python", python)]), comments=imports.comments))
        commands = self.one(found, "commands")
        if commands is not None:
            recipe_files = self.items(found, "files")
            for item in recipe_files:
                if "/" not in item.value.text:
                    raise self.error(item, f"test file {item.value.text!r} is not in a directory of recipe/")
                directory = item.value.text.split("/")[0]
                if directory not in self.test_dirs:
                    self.test_dirs.append(directory)
            files = recipe_files + self.items(found, "source_files")
            requires = self.items(found, "requires", spec=True)
            script_test = _map(
                [
                    ("files", _map([("source", Node("seq", files))]) if files else None),
                    ("requirements", _map([("run", Node("seq", requires))]) if requires else None),
                    ("script", self.seq(commands)),
                ],
                {"script": commands.comments},
            )
            tests.append(Entry(None, script_test))
        return Node("seq", tests) if tests else None

    def about(self, entry: Entry | None) -> Node | None:
        if entry is None:
            return None
        found = self.fields(entry.value, "about", (*_ABOUT_KEYS, *_ABOUT_DROPPED))
        pairs: list[tuple[str, Node | None]] = []
        comments = {}
        for v0, v1 in _ABOUT_KEYS.items():
            chosen = self.one(found, v0)
            if chosen is None:
                continue
            pairs.append((v1, self.seq(chosen) if chosen.value.kind == "seq" else chosen.value))
            comments[v1] = chosen.comments
        return _map(pairs, comments)


def _nested(key: str, value: object) -> Entry:
    """A tree of dicts with Entry leaves as an Entry; a branch takes the comments of its first leaf."""
    if isinstance(value, Entry):
        return value
    entries = [_nested(k, v) for k, v in value.items()]  # type: ignore[union-attr]
    comments = entries[0].comments
    entries[0] = replace(entries[0], comments=())
    return Entry(key, Node("map", entries), comments=comments)


def _banner(source: str) -> tuple[Comment, ...]:
    return _generated(
        f"GENERATED from {source} by `{COMMAND}`: do not edit this file.",
        "Edit meta.yaml, then run that command (the release bump and render-ci run it too; check,",
        "render-ci --check and CI fail when this file is not what it writes).",
        "",
        "rattler-build's v1 format (CEP 13/14), pass 1 of the megabuild as a `staging` output (CEP 41). Its",
        "own directory: conda-smithy's linter refuses one holding meta.yaml and recipe.yaml (lint R-051);",
        "the patches, scripts and test files are recipe/'s. The comments are meta.yaml's; how the formats",
        "map: docs/reference/recipe-v1.md.",
    )


def convert(meta_text: str, *, source: str = "recipe/meta.yaml", recipe_from_v1: str = "../recipe") -> str:
    """recipe.yaml's text for ``meta_text`` (the same text for the same input, byte for byte)."""
    evaluator = evaluate(meta_text, source)
    tree = parse(evaluator.lines, source)
    converter = Converter(tree, evaluator, source, recipe_from_v1)
    v1 = converter.convert()
    emitter = Emitter()
    emitter.comments((*_banner(source), *evaluator.header), 0)
    emitter.out.append("")
    for index, entry in enumerate(v1.entries):
        if index:
            emitter.out.append("")
        emitter.comments(entry.comments, 0)
        if entry.key == "outputs":
            emitter.out.append("outputs:")
            emitter.sequence(entry.value.entries, 2, spaced=True)
        else:
            emitter.value(f"{entry.key}:", entry.value, 0, entry.eol)
    return "\n".join(emitter.out) + "\n"


# ---- the files, the check and the command --------------------------------------------------------------


def expected_files(root: Path) -> dict[Path, str]:
    """recipe-v1/'s files (relative path -> text), or none when the feedstock keeps no v1 recipe."""
    v1_dir = root / V1_DIRNAME
    if not v1_dir.is_dir():
        return {}
    recipe_dir = root / "recipe"
    meta = recipe_dir / "meta.yaml"
    try:
        text = meta.read_text(encoding="utf-8")
        variants = (recipe_dir / VARIANT_FILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolError(f"{meta.parent}: cannot read the recipe ({exc})") from exc
    source = meta.relative_to(root).as_posix()
    back = Path(os.path.relpath(recipe_dir, v1_dir)).as_posix()
    return {
        Path(V1_DIRNAME) / GENERATED: convert(text, source=source, recipe_from_v1=back),
        Path(V1_DIRNAME) / VARIANT_FILE: variants,
    }


def stale(root: Path) -> list[str]:
    """One line per recipe-v1 file that is not what the command writes (empty when up to date)."""
    problems = []
    for path, text in expected_files(root).items():
        target = root / path
        if not target.is_file():
            problems.append(f"missing: {path} (run: {COMMAND})")
        elif target.read_bytes() != text.encode("utf-8"):
            problems.append(f"out of date: {path}, not what meta.yaml converts to (run: {COMMAND})")
    return problems


def write(root: Path) -> list[str]:
    """Write recipe-v1/'s files (atomically, each); returns what changed."""
    from megabuild import atomic_file

    changes = []
    for path, text in expected_files(root).items():
        target = root / path
        if target.is_file() and target.read_bytes() == text.encode("utf-8"):
            continue
        atomic_file.write_text(target, text, newline="")
        changes.append(f"wrote {path}")
    return changes


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "convert-v1",
        help="write recipe-v1/recipe.yaml from recipe/meta.yaml (--check: fail when it is stale)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--check", action="store_true", help="report a stale recipe-v1/ instead of writing")
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="feedstock root (default: %(default)s)")
    parser.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    if not (args.root / V1_DIRNAME).is_dir():
        raise ToolError(f"{args.root / V1_DIRNAME}: no such directory; the feedstock keeps no v1 recipe")
    if args.check:
        problems = stale(args.root)
        for problem in problems:
            print(problem)
        if problems:
            raise ToolError(f"recipe-v1/ is not what recipe/meta.yaml converts to; run: {COMMAND}")
        print(f"{V1_DIRNAME}/ is up to date with recipe/meta.yaml")
        return 0
    for change in write(args.root) or ["nothing to change"]:
        print(change)
    return 0
