"""Each fact comes in one way and goes out one way (issue 37): one reader of a ``.ci_support`` file (and one
of a variant file with selectors), one parser of a Python spec, one reading of ``cuda_compiler_version``, one
writer of files, one view of the feedstock's paths and configurations, one way into the build driver (a
plain import). A second one anywhere in the tools fails here, naming its file and line, in the manner of
tests/test_import_layers.py.

The scan covers the tools: ``feedstock_tools/``, ``build-locally.py``, ``.scripts/``, ``benchmarks/`` and
``run-tests.py``, code only (comments and docstrings left out). The build driver, ``recipe/megabuild``, is
outside it: it is standard library only and standalone, reads its variant from conda-build's environment
variables (``megabuild.conda_env.CondaBuild.cuda_version``), and holds the one writer
(``megabuild/atomic_file.py``) that the tools import.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Every YAML parse of the tools, by (file, function) -> what it parses. A variant file has one reader of
# each kind; any other YAML read is listed here with what it reads, so a second reader of a variant file
# cannot pass unnoticed as something else.
CI_SUPPORT_FILE = "a .ci_support configuration (one reader)"
VARIANT_SOURCE = "a variant file with selectors: conda_build_config.yaml, pinning, migrations (one reader)"
META_YAML = "meta.yaml, after selectors and Jinja (one renderer: the first pass, the render, the CI files)"
YAML_READS: dict[tuple[str, str], str] = {
    ("feedstock_tools/common/configuration.py", "parse_configuration"): CI_SUPPORT_FILE,
    ("feedstock_tools/conda/variants.py", "parse_variant_text"): VARIANT_SOURCE,
    ("feedstock_tools/conda/variants.py", "migration_timestamp"): "a migration's migrator_ts",
    ("feedstock_tools/maintainer/conda_pins.py", "_migrator_header"): "a migration's __migrator header",
    (".scripts/ci_settings.py", "setting"): "conda-forge.yml",
    (".scripts/ci_settings.py", "test_options"): "conda-forge.yml",
    ("feedstock_tools/ci/forge_config.py", "read_forge_settings"): "conda-forge.yml",
    ("feedstock_tools/conda/meta_render.py", "_parsed"): META_YAML,
    ("feedstock_tools/proofs/solve/solve_check.py", "read_table"): "solve_requests.yaml",
    ("feedstock_tools/proofs/solve/solve_channel.py", "load_metadata"): "solve_metadata.yaml",
    ("feedstock_tools/proofs/builders/real_build.py", "prepare_recipe"): "recipe-v1/recipe.yaml",
    ("feedstock_tools/maintainer/check.py", "_yaml_problem"): "recipe-v1/recipe.yaml (whether it parses)",
    ("feedstock_tools/maintainer/anchor_parity.py", "load_table"): "anchor_parity.yaml",
}
YAML_PARSERS = re.compile(
    r"\byaml\.(?:safe_)?load(?:_all)?\(|\bci_files\.(?:parse|read)\(|(?<![\w.])read\((?:FEEDSTOCK|Feedstock\(FEEDSTOCK)"
    r"|(?<![\w.])(?:safe|base)_load\(|\byaml_load\.(?:safe|base)_load\("
)
# PyYAML's loaders with libyaml's parser, which every reader above calls: the loader, not a reader
YAML_LOADER_MODULE = "feedstock_tools/conda/yaml_load.py"


@dataclass(frozen=True)
class Rule:
    name: str
    the_one: str  # the one place it is allowed (a file of the scan, or outside it)
    pattern: re.Pattern[str]
    fix: str


RULES = (
    Rule(
        "python specs",
        "feedstock_tools/common/configuration.py",
        # a spec's version split from its ".*" or build string, or its ABI tag from the build string's glob
        re.compile(
            r"""removesuffix\(["']\.\*["']\)|rstrip\(["']\.\*["']\)|split\(["']\.\*["']\)"""
            r"""|replace\(["']\*["'], ["']["']\)|split\((?:["'] ["'])?\)\[0\]\.split\(["']\.["']\)"""
            r"""|lstrip\(["']\*["']\)"""
        ),
        "use feedstock_tools.common.configuration.PythonVersion (Configuration.pythons, python_min)",
    ),
    Rule(
        "cuda",
        "feedstock_tools/common/configuration.py",
        re.compile(r"""(?:\[|\.get\()\s*(?:["']cuda_compiler_version["']|CUDA_KEY\b)"""),
        "use Configuration.cuda, or cuda_version()/cuda_versions() of feedstock_tools.common.configuration",
    ),
    Rule(
        "writers",
        "recipe/megabuild/atomic_file.py",
        # a file's content written in place, or a temporary file of one's own; appending (a log streamed
        # as a process runs, a lock) is not a file written whole
        re.compile(
            r"""(?<!atomic_file)(?<!atomic_file"\))\.write_(?:text|bytes)\("""
            r"""|\bopen\([^)]*["'](?:w|x|r\+)b?["']|os\.fdopen\(|mkstemp\(|NamedTemporaryFile\("""
            r"""|os\.replace\(|json\.dump\("""
        ),
        "write it with the driver's atomic_file (from megabuild import atomic_file: write_text/write_bytes, "
        "or replacing() for a stream)",
    ),
    Rule(
        "feedstock paths",
        "feedstock_tools/common/feedstock.py",
        # the folder of configurations and conda-forge.yml named, or a folder's YAML files listed, anywhere
        # but the one view of the feedstock
        re.compile(r"""("|')(?:\.ci_support|conda-forge\.yml)\1|\.glob\(\s*f?["'][^"']*\.yaml["']\)"""),
        "use feedstock_tools.common.feedstock: Feedstock(root).ci_support / .forge_yml / .configurations(), "
        "or configuration_files(folder)",
    ),
    Rule(
        "driver imports",
        # the one import of the driver by a name held in data: anchor_parity.yaml's "function" rows
        "feedstock_tools/maintainer/anchor_parity.py",
        re.compile(
            r"""\bimport_megabuild\(|import_module\(\s*f?["']megabuild|__import__\(\s*f?["']megabuild"""
        ),
        "import the build driver as a package, as the tests do: from megabuild import atomic_file",
    ),
)


def tool_files() -> list[Path]:
    files = [
        *sorted((REPO / "feedstock_tools").rglob("*.py")),
        REPO / "build-locally.py",
        *sorted((REPO / ".scripts").glob("*.py")),
        *sorted((REPO / "benchmarks").glob("*.py")),
        REPO / "run-tests.py",
    ]
    return [path for path in files if path.is_file()]


def relative(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def code_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, code) of a Python file: comments removed, docstrings left out."""
    return iter(_code_lines_of(path.read_text(encoding="utf-8")))


@functools.cache
def _code_lines_of(source: str) -> tuple[tuple[int, str], ...]:
    """By the file's text: each rule of this module scans every file of the tools."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                docstrings.update(range(value.lineno, (value.end_lineno or value.lineno) + 1))
    lines = source.splitlines()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            row, column = token.start
            lines[row - 1] = lines[row - 1][:column]
    return tuple((number, line) for number, line in enumerate(lines, start=1) if number not in docstrings)


def enclosing_functions(path: Path) -> dict[int, str]:
    """Line number -> the name of the innermost function holding it."""
    return _enclosing_functions_of(path.read_text(encoding="utf-8"))


@functools.cache
def _enclosing_functions_of(source: str) -> dict[int, str]:
    names: dict[int, str] = {}
    tree = ast.parse(source)
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    for function in sorted(functions, key=lambda f: f.lineno):  # inner functions come later and win
        for line in range(function.lineno, (function.end_lineno or function.lineno) + 1):
            names[line] = function.name
    return names


def first_uses(pattern: re.Pattern[str], paths: Iterable[Path]) -> dict[tuple[str, str], str]:
    """(file, enclosing function) -> "file:line (in function)" of the first code line ``pattern`` matches."""
    found: dict[tuple[str, str], str] = {}
    for path in paths:
        functions = enclosing_functions(path)
        for number, line in code_lines(path):
            if pattern.search(line):
                key = (relative(path), functions.get(number, "<module>"))
                found.setdefault(key, f"{relative(path)}:{number} (in {key[1]})")
    return found


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.name)
def test_one_way_each(rule: Rule) -> None:
    """No second Python-spec parser, reading of cuda_compiler_version, writer of files, listing of the
    feedstock's configurations (or path of its conda-forge.yml) or way into the build driver."""
    second = [
        f"{relative(path)}:{number}: {line.strip()}"
        for path in tool_files()
        if relative(path) != rule.the_one
        for number, line in code_lines(path)
        if rule.pattern.search(line)
    ]
    assert not second, f"a second way ({rule.name}); {rule.fix}:\n" + "\n".join(second)


def test_every_yaml_read_is_listed_with_what_it_reads() -> None:
    """One reader of a .ci_support file and one of a variant file with selectors: every YAML parse in the
    tools is in YAML_READS with what it parses, so a second reader of a variant file shows here."""
    found = first_uses(YAML_PARSERS, [p for p in tool_files() if relative(p) != YAML_LOADER_MODULE])
    unlisted = [where for key, where in found.items() if key not in YAML_READS]
    assert not unlisted, (
        "a YAML parse that is not listed: read a .ci_support file with read_configuration, a variant file "
        "with selectors with parse_variant_text, or list what it parses in YAML_READS:\n"
        + "\n".join(unlisted)
    )
    assert sorted(set(YAML_READS) - set(found)) == [], "YAML_READS lists a read that is gone: remove it"
    kinds = list(YAML_READS.values())
    assert kinds.count(CI_SUPPORT_FILE) == 1 and kinds.count(VARIANT_SOURCE) == 1
    assert kinds.count(META_YAML) == 1


# Every Jinja environment of the tools and every template compiled outside one, by (file, function) -> what
# it renders: one renders meta.yaml (the first pass, the conda-build render and the CI-file writer compile
# their templates there), so a second renderer of the recipe cannot pass unnoticed as something else.
JINJA_USES: dict[tuple[str, str], str] = {
    ("feedstock_tools/conda/meta_render.py", "<module>"): META_YAML,
    ("feedstock_tools/conda/jinja_expr.py", "<module>"): "meta.yaml's expressions parsed, not rendered "
    "(the symbolic evaluator of convert-v1)",
    ("feedstock_tools/ci/smithy_templates.py", "smithy_jinja_environment"): "conda-smithy's CI templates",
    ("feedstock_tools/maintainer/render_v1.py", "<module>"): "a v1 recipe's test script lines (${{ }})",
    ("feedstock_tools/maintainer/render_v1.py", "_v1_tests"): "a v1 recipe's test script lines (${{ }})",
}
JINJA_PATTERN = re.compile(r"\b(?:Sandboxed)?Environment\(|\.from_string\(|\bjinja2\.Template\(")


def test_every_jinja_environment_is_listed_with_what_it_renders() -> None:
    """One renderer of meta.yaml: every Jinja environment or template of the tools is in JINJA_USES with
    what it renders, and one of them renders meta.yaml."""
    found = first_uses(JINJA_PATTERN, tool_files())
    unlisted = [where for key, where in found.items() if key not in JINJA_USES]
    assert not unlisted, (
        "a Jinja environment or template that is not listed: render meta.yaml through "
        "feedstock_tools.conda.meta_render (template, load), or list what it renders in JINJA_USES:\n"
        + "\n".join(unlisted)
    )
    assert sorted(set(JINJA_USES) - set(found)) == [], "JINJA_USES lists a use that is gone: remove it"
    assert list(JINJA_USES.values()).count(META_YAML) == 1


def test_the_scan_sees_a_second_renderer(tmp_path: Path) -> None:
    """The pattern catches the renderers this check replaced (as ci_support.py and first_pass.py wrote them
    before issue 45)."""
    source = tmp_path / "second.py"
    source.write_text(
        '"""A module."""\n\n\ndef f(selected, text):\n'
        '    environment = jinja2.Environment(undefined=jinja2.Undefined, extensions=["jinja2.ext.do"])\n'
        "    return environment.from_string(selected), jinja2.Environment().from_string(text)\n"
    )
    assert [number for number, line in code_lines(source) if JINJA_PATTERN.search(line)] == [5, 6]


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.name)
def test_the_scan_sees_a_second_one(rule: Rule, tmp_path: Path) -> None:
    """The patterns catch the idioms this check replaced (each as it was written before issue 37)."""
    before = {
        "python specs": 'minor = python.split(".*")[0]',
        "cuda": 'cuda = config.get("cuda_compiler_version", ["None"])[0]',
        "writers": 'temporary.write_text(text, encoding="utf-8")',
        "driver imports": 'temporary = import_megabuild("atomic_file")',
        "feedstock paths": 'config = [text for path in sorted((config / ".ci_support").glob("*.yaml"))]',
    }
    source = tmp_path / "second.py"
    function = "def f(config, python, temporary, text):"
    source.write_text(f'"""A module."""\n\n\n{function}\n    {before[rule.name]}\n')
    assert [number for number, line in code_lines(source) if rule.pattern.search(line)] == [5]
    source.write_text(f"# {before[rule.name]}\n")  # a comment is not code
    assert not [line for _, line in code_lines(source) if rule.pattern.search(line)]


# Every child process the tools start themselves, by (file, function) -> why it is short. Anything long (an
# install, a build, a channel made, a probe that compiles) runs through the one runner
# (recipe/megabuild/child_process.py run_child: its own process group, stopped as a whole on an interruption
# or a deadline, its output in a log): interruption.run_child / run_logged, cache_store's Making.run.
RUNNER_SCAN = ("feedstock_tools/", "build-locally.py")
CHILD_PROCESS = re.compile(
    r"\bsubprocess\.(?:run|Popen|check_output|check_call|call)\(|\bos\.(?:system|popen|exec\w*|spawn\w*)\("
)
SHORT_CHILDREN: dict[tuple[str, str], str] = {
    ("feedstock_tools/maintainer/patch_list.py", "_pre_image"): "git cat-file of one blob",
    (
        "feedstock_tools/proofs/builders/local_channel.py",
        "python_packages",
    ): "an interpreter prints its version",
    ("feedstock_tools/proofs/builders/local_channel.py", "compiler_package"): "a compiler's -dumpfullversion",
    ("feedstock_tools/proofs/builders/local_channel.py", "_system_library"): "gcc -print-file-name",
    ("feedstock_tools/proofs/builders/local_channel.py", "tool_package"): "a program's --version",
    ("feedstock_tools/proofs/builders/real_build.py", "install_and_use"): "python imports torch once and "
    "prints one JSON line (its version, CUDA and MAGMA flags)",
    ("feedstock_tools/proofs/gpu_check.py", "find_gpu"): "nvidia-smi -L",
    ("feedstock_tools/proofs/gpu_check.py", "query_interpreter"): "an interpreter prints its paths",
    ("feedstock_tools/proofs/rehearsal/prefixes.py", "pyenv_versions_dir"): "pyenv root",
    ("feedstock_tools/proofs/rehearsal/prefixes.py", "interpreter_identity"): "an interpreter prints its "
    "version",
    ("feedstock_tools/proofs/rehearsal/prefixes.py", "tool_identity"): "a program's --version",
    ("feedstock_tools/proofs/rehearsal/relocation.py", "relocate"): "patchelf reads or sets one file's RPATH",
    ("feedstock_tools/proofs/rehearsal/report.py", "import_checks"): "the stand-in's import check, one "
    "python -c of a tiny package",
    (
        "feedstock_tools/proofs/rehearsal/target.py",
        "make_target_interpreter",
    ): "compileall of two small files",
    ("feedstock_tools/proofs/solve/solver_process.py", "running"): "not short but not run to its end: the "
    "solver child answers one job line at a time over pipes and ends when its input closes (_close)",
    ("feedstock_tools/release/wheel_source.py", "pip_cache_dir"): "pip cache dir",
    ("build-locally.py", "check_docker"): "docker info, under its own timeout",
}


def test_every_child_process_outside_the_runner_is_short_and_listed() -> None:
    """One child-process runner: every process the tools start outside it is in SHORT_CHILDREN with why it
    is short (a --version, a query), so a long child (an install, a build) cannot start outside it."""
    found = first_uses(CHILD_PROCESS, [p for p in tool_files() if relative(p).startswith(RUNNER_SCAN)])
    unlisted = [where for key, where in found.items() if key not in SHORT_CHILDREN]
    assert not unlisted, (
        "a child process outside the one runner: run a long one with interruption.run_child or "
        "interruption.run_logged (recipe/megabuild/child_process.py), or list a short query in "
        "SHORT_CHILDREN with why it is short:\n" + "\n".join(unlisted)
    )
    assert sorted(set(SHORT_CHILDREN) - set(found)) == [], "SHORT_CHILDREN lists a child that is gone"


def test_the_scan_sees_a_long_child_outside_the_runner(tmp_path: Path) -> None:
    """The pattern catches the long children this check moved (as gpu_check.py and build-locally.py ran
    them before issue 45)."""
    source = tmp_path / "second.py"
    source.write_text(
        '"""A module."""\n\n\ndef f(step, variables, root):\n'
        "    ran = subprocess.run(step, capture_output=True, env=variables, check=False, timeout=540)\n"
        '    subprocess.run(["docker", "system", "prune", "--force"], cwd=root, check=False)\n'
    )
    assert [number for number, line in code_lines(source) if CHILD_PROCESS.search(line)] == [5, 6]
