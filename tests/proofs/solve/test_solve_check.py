"""solve-check: the real solver (py-rattler) over the recipe's real rendering; every expectation can fail.

The channel is built once per module from every .ci_support configuration (about 12 s of CPU). The full
check must come out as the rules of expectations.py give it from the recipe's packages; then each
deliberately wrong channel record below must turn the verdict of the row it concerns red, which shows that
row's expectation is really checked. No architecture, Python or count of the recipe is written here: each is
read from the recipe's packages (``facts``).
"""

from __future__ import annotations

import copy
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from recipe_matrix import ci_config

from feedstock_tools.__main__ import main
from feedstock_tools.common.configuration import read_configuration, version_key
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.proofs.solve import expectations, solve_check
from feedstock_tools.proofs.solve.solve_channel import METADATA_FILE, Channel, Record, build_channel
from feedstock_tools.proofs.solve.solve_check import (
    Machine,
    Outcome,
    Request,
    Row,
    load_requests,
    read_table,
    recipe_facts,
    solve_all,
    verdict,
)

PINNING = REPO_ROOT.parent / "shared" / "data" / "conda-forge-pinning"
# the Pythons a linux-64 configuration builds, oldest first (read from it, never written here)
LINUX_64_CONFIG = ci_config("linux-64", "cpu").path
NEWEST_PYTHON = sorted((p.version for p in read_configuration(LINUX_64_CONFIG).pythons), key=version_key)[-1]


@pytest.fixture(scope="module")
def channel() -> Channel:
    recipe, configs = REPO_ROOT / "recipe", REPO_ROOT / ".ci_support"
    return build_channel(REPO_ROOT, recipe, configs, pinning_dir=PINNING, progress=lambda _: None)


@dataclass(frozen=True)
class Table:
    facts: expectations.Facts
    machines: list[Machine]
    requests: list[Request]


@pytest.fixture(scope="module")
def table(channel: Channel) -> Table:
    facts = recipe_facts(channel, REPO_ROOT / "recipe")
    return Table(facts, *load_requests(facts))


def solve_row(channel: Channel, scratch: Path, request: str, machine: str, facts: expectations.Facts) -> Row:
    machines, requests = load_requests(facts)
    (wanted_request,) = [r for r in requests if r.name == request]
    (wanted_machine,) = [m for m in machines if m.name == machine]
    (row,) = solve_all(channel, scratch, [wanted_machine], [wanted_request], facts)
    return row


def newest_cuda(facts: expectations.Facts, subdir: str) -> expectations.Build:
    """The subdir's sbsa/x86 CUDA build of the newest CUDA (the highest bound among its BLAS variants)."""
    return max(
        (b for b in facts.builds if b.subdir == subdir and b.cuda and b.arm != "tegra"),
        key=lambda b: b.number,
    )


def below_newest(facts: expectations.Facts, machine: str) -> str:
    """``<machine> arch<X>``: the arch machine just below the bound of its subdir's newest CUDA build."""
    subdir = machine.split(maxsplit=1)[0]
    bound = ".".join(map(str, newest_cuda(facts, subdir).arch or ()))
    return f"{machine} arch{expectations.below(bound, facts.architectures)}"


def test_every_request_on_every_machine_is_as_expected(
    table: Table, channel: Channel, tmp_path: Path
) -> None:
    rows = solve_all(channel, tmp_path, table.machines, table.requests, table.facts)
    wrong = [f"{r.request.name} on {r.machine.name}: {r.judged()[1]}" for r in rows if not r.judged()[0]]
    assert not wrong, wrong
    assert len(rows) == sum(len(r.machines or table.machines) for r in table.requests)
    hosts = [r for r in table.requests if r.rule == "host"]
    on_build_machines = [r for r in hosts if len(r.machines or ()) == 1]
    assert len(on_build_machines) == len(table.facts.cuda_configurations())
    assert len(hosts) - len(on_build_machines) == len(table.facts.cuda_versions())
    # the issue's promise, read off the solver's picks: the newest driver gets the newest CUDA for all three
    newest = newest_cuda(table.facts, "linux-64")
    machine = f"linux-64 cuda{'.'.join(map(str, newest.cuda or ()))}"
    for request in ("pytorch", "pytorch-gpu", "libtorch"):
        (row,) = [r for r in rows if r.request.name == request and r.machine.name == machine]
        assert row.outcome.words()["flavour"] == newest.flavour


def test_the_table_covers_the_issues_machines_and_requests(table: Table) -> None:
    subdirs = {m.subdir for m in table.machines}
    assert {"linux-64", "linux-aarch64", "osx-64", "osx-arm64", "win-64"} <= subdirs
    assert {m.name for m in table.machines} >= {"linux-64", "linux-64 cuda12.9", "linux-64 cuda13.0"}
    specs = {" ".join(r.specs) for r in table.requests}
    assert {
        "pytorch",
        "pytorch-cpu",
        "pytorch-gpu",
        "pytorch-cpu pytorch-gpu",
        "pytorch nomkl",
        "libtorch",
    } <= specs
    # a request per Python the recipe builds, none for another
    assert {r.name for r in table.requests if r.name.startswith("pytorch python=")} == {
        f"pytorch python={python}" for python in table.facts.pythons
    }


def test_the_host_of_each_cuda_version_is_asked_where_it_cannot_be_solved(table: Table) -> None:
    """The host of every CUDA version the recipe builds is asked on every machine of the table, and the rules
    expect it to fail, with the solver's reason, on each kind of machine that cannot solve it: a driver older
    than the version's major, a glibc below cuDSS's floor, a Jetson asking for a CUDA major it has no cuDSS
    of, a subdir without cuDSS; and to solve on its own build machine."""
    plain = {m.name for m in read_table().machines}
    why: dict[str, set[str]] = {}
    for request in (r for r in table.requests if r.rule == "host" and len(r.machines or ()) > 1):
        assert set(request.machines or ()) == plain
        for machine in (m for m in table.machines if m.name in plain):
            expected = solve_check.expected(request, machine, table.facts)
            why.setdefault(expected.split(" >=")[0].split(" for ")[0], set()).add(machine.name)
    assert why.keys() == {"solves", "fails: __cuda", "fails: __glibc", "fails: cuda-version",
                          "fails: No candidates were found"}  # fmt: skip
    jetson = next(m for m in table.machines if "arm-variant * tegra" in m.installed)
    assert jetson.name in why["fails: cuda-version"]
    newest_major = version_key(table.facts.cuda_versions()[-1])[:1]
    for machine in (m for m in table.machines if m.name in why["fails: __cuda"]):
        driver = expectations.MachineFacts.of(machine.subdir, machine.virtual, machine.installed).driver
        assert driver is not None and driver < newest_major
    build_machines = {f"{subdir} cuda{cuda}" for subdir, cuda, _ in table.facts.cuda_configurations()}
    assert build_machines <= why["solves"]


def test_a_machine_at_every_cuda_arch_bound_and_just_below(table: Table) -> None:
    """Item 5: every __cuda_arch bound the recipe's CUDA builds set (sbsa and tegra included) has a machine
    of its subdir and arm variant at it and, where the recipe names an older architecture, one just below."""
    at = set()
    for machine in table.machines:
        facts = expectations.MachineFacts.of(machine.subdir, machine.virtual, machine.installed)
        if facts.arch and facts.driver:
            at.add((machine.subdir, facts.arm, ".".join(map(str, facts.arch))))
    bounds = {(b.subdir, b.arm, ".".join(map(str, b.arch))) for b in table.facts.builds if b.arch}
    assert {arm for _, arm, _ in bounds} >= {"sbsa", "tegra", None}
    for subdir, arm, bound in bounds:
        assert (subdir, arm, bound) in at, (subdir, arm, bound)
        older = expectations.below(bound, table.facts.architectures)
        assert older is None or (subdir, arm, older) in at, (subdir, arm, older)


# ---- each expectation can fail: a deliberately wrong record turns its row red ------------------------------


def change(channel: Channel, where: Callable[[Record], bool], how: Callable[[Record], None]) -> Channel:
    wrong = copy.deepcopy(channel)
    touched = [r for r in wrong.all_records() if where(r)]
    assert touched, "the test's record filter matches nothing"
    for entry in touched:
        how(entry)
    return wrong


def named(name: str, build_part: str = "") -> Callable[[Record], bool]:
    return lambda r: r["name"] == name and build_part in r["build"]


def drop(spec_start: str, field: str = "depends") -> Callable[[Record], None]:
    def how(entry: Record) -> None:
        entry[field] = [s for s in entry[field] if not s.startswith(spec_start)]

    return how


def needs(spec: str) -> Callable[[Record], None]:
    return lambda r: r["depends"].append(spec)


def with_libmagma(entry: Record) -> None:
    """A non-MAGMA linalg record that wrongly brings libmagma (and no longer excludes it)."""
    entry["depends"].append("libmagma")
    entry["constrains"] = [s for s in entry["constrains"] if not s.startswith("libmagma")]


def on_windows(*names: str) -> Callable[[Record], bool]:
    return lambda r: r["subdir"] == "win-64" and r["name"] in names


def builds(prefix: str) -> Callable[[Record], bool]:
    return lambda r: r["build"].startswith(prefix)


def renumber(delta: int) -> Callable[[Record], None]:
    return lambda r: r.update(build_number=r["build_number"] + delta)


def add_osx_pytorch_gpu(channel: Channel) -> Channel:
    wrong = copy.deepcopy(channel)
    version = next(r["version"] for r in channel.all_records() if r["name"] == "pytorch")  # the recipe's
    wrong.add(
        {"name": "pytorch-gpu", "version": version, "build": "cpu_generic_h0_0", "build_number": 0,
         "subdir": "osx-arm64", "depends": [], "constrains": []}
    )  # fmt: skip
    return wrong


def no_cpu_gpu_exclusion(channel: Channel) -> Channel:
    wrong = change(channel, named("pytorch-gpu"), lambda r: r.update(depends=["pytorch"], constrains=[]))
    wrong = change(wrong, named("pytorch-cpu"), drop("pytorch-", "constrains"))
    return change(wrong, named("pytorch"), drop("pytorch-", "constrains"))


Wrong = Callable[[Channel], Channel]
# a machine named so is the arch machine just below its subdir's newest CUDA bound (below_newest)
BELOW = "below the newest bound: "
# case -> (the wrong channel, request, machine, what the verdict must then say)
WRONG_RECORDS: dict[str, tuple[Wrong, str, str, str]] = {
    # the issue's finding: both CUDA builds at one build number, the tie-break hands 13.0 drivers 12.9
    "cuda130 ties with cuda129": (
        lambda ch: change(ch, builds("cuda130"), renumber(-1)),
        "pytorch-gpu", "linux-64 cuda13.0", "flavour cuda129",
    ),
    # the alternative to build numbers: a track_feature on the older CUDA demotes it below the CPU build
    "track_features on cuda129": (
        lambda ch: change(ch, builds("cuda129"), lambda r: r.update(track_features="cuda129")),
        "pytorch", "linux-64 cuda12.9", "flavour cpu",
    ),
    "CUDA pytorch and libtorch without __cuda": (
        lambda ch: change(ch, builds("cuda"), drop("__cuda")),
        "pytorch", "linux-64", "flavour cuda",
    ),
    "libtorch without __cuda": (
        lambda ch: change(ch, named("libtorch", "cuda"), drop("__cuda")),
        "libtorch", "linux-64", "flavour cuda",
    ),
    "cuda-version constrains no __cuda": (
        lambda ch: change(ch, named("cuda-version"), drop("__cuda", "constrains")),
        "pytorch", "linux-64 cuda12.9", "flavour cuda130",
    ),
    # both sources of the 2.28 floor: the cuda130 builds' own sysroot and cuDSS's (every CUDA build)
    "CUDA builds and cuDSS without their glibc 2.28": (
        lambda ch: change(
            change(ch, builds("cuda"), drop("__glibc")), named("libcudss"), drop("__glibc")
        ),
        "pytorch", "linux-64 cuda13.0 glibc2.17", "flavour cuda130",
    ),
    "a cuDSS below 0.8 missing for CUDA 13.0": (
        lambda ch: change(ch, named("libcudss-dev", "cuda13"), lambda r: r.update(version="0.8.0")),
        "host of the linux-aarch64 CUDA 13.0 sbsa build, libcudss-dev <0.8", "linux-aarch64 cuda13.0",
        "found none",
    ),
    # the host of each CUDA version on every machine: each reason a machine cannot solve it must bite
    "cuDSS without its glibc floor": (
        lambda ch: change(ch, named("libcudss"), drop("__glibc")),
        "host of a CUDA 12.9 build, libcudss-dev <0.8", "linux-64 cuda13.0 glibc2.17", "found one",
    ),
    "a Jetson cuDSS for every CUDA major": (
        lambda ch: change(ch, named("libcudss", "tegra"), lambda r: r.update(
            depends=[s for s in r["depends"] if not s.startswith("cuda-version")])),
        # its CUDA 12 driver still stops it, for another reason than the one the rules name
        "host of a CUDA 13.0 build, libcudss-dev <0.8", "jetson orin cuda12.6", "does not mention",
    ),
    "cuda-version constrains no __cuda, on a host": (
        lambda ch: change(ch, named("cuda-version"), drop("__cuda", "constrains")),
        "host of a CUDA 13.0 build, libcudss-dev <0.8", "linux-64 cuda12.9", "found one",
    ),
    "nomagma linalg depends on libmagma": (
        lambda ch: change(ch, named("libtorch-cuda-linalg", "nomagma"), with_libmagma),
        "pytorch-gpu, linalg without MAGMA", "linux-64 cuda12.9", "libmagma installed",
    ),
    "magma linalg does not need libmagma": (
        lambda ch: change(ch, named("libtorch-cuda-linalg", "_magma"), drop("libmagma")),
        "pytorch-gpu, libmagma pinned out", "linux-64 cuda13.0", "linalg magma",
    ),
    "the MAGMA linalg numbered below the other": (
        lambda ch: change(ch, named("libtorch-cuda-linalg", "_magma"), renumber(-51)),
        "pytorch", "linux-64 cuda13.0", "linalg nomagma",
    ),
    "no CPU/GPU exclusion": (
        no_cpu_gpu_exclusion, "pytorch-cpu pytorch-gpu", "linux-64 cuda12.9", "found one",
    ),
    "a pytorch-gpu for osx-arm64": (add_osx_pytorch_gpu, "pytorch-gpu", "osx-arm64", "found one"),
    "nomkl keeps MKL out no more": (
        lambda ch: change(ch, named("nomkl"), drop("mkl", "constrains")),
        "pytorch nomkl", "linux-64", "blas mkl",
    ),
    "MKL torch without the MKL libblas": (
        lambda ch: change(ch, lambda r: "_mkl_" in r["build"], drop("libblas * *mkl")),
        "pytorch", "linux-64", "two BLAS libraries",
    ),
    "no build for the newest Python": (
        lambda ch: change(ch, named("pytorch", f"py{NEWEST_PYTHON.replace('.', '')}"),
                          lambda r: r.update(depends=["python <0a0"])),
        f"pytorch python={NEWEST_PYTHON}", "linux-64", "found none",
    ),
    # Windows links MAGMA into torch_cuda: libtorch itself must bring libmagma
    "a Windows CUDA libtorch without libmagma": (
        lambda ch: change(ch, on_windows("libtorch"), drop("libmagma")),
        "pytorch-gpu", "win-64 cuda13.0", "libmagma missing with MAGMA linked into torch",
    ),
    "a Windows CUDA build without __cuda": (
        lambda ch: change(ch, on_windows("libtorch", "pytorch"), drop("__cuda")),
        "pytorch-gpu", "win-64", "found one",
    ),
    # CEP 46's __cuda_arch: without the CUDA 13.0 builds' bound a Pascal GPU gets code it cannot run
    "CUDA 13.0 builds without their __cuda_arch bound": (
        lambda ch: change(ch, builds("cuda130"), drop("__cuda_arch", "constrains")),
        "pytorch-gpu", BELOW + "linux-64 cuda13.0", "flavour cuda130",
    ),
    # ... and without any bound a GPU no build supports gets a CUDA build, not "no solution"
    "no CUDA build bounds __cuda_arch": (
        lambda ch: change(ch, builds("cuda"), drop("__cuda_arch", "constrains")),
        "pytorch-gpu", "linux-64 cuda12.9 kepler3.7", "found one",
    ),
    "the Windows CUDA 13.0 build without its __cuda_arch bound": (
        lambda ch: change(ch, lambda r: r["subdir"] == "win-64" and r["build"].startswith("cuda130"),
                          drop("__cuda_arch", "constrains")),
        "pytorch-gpu", BELOW + "win-64 cuda13.0", "flavour cuda130",
    ),
    "libtorch needs Python": (
        lambda ch: change(ch, named("libtorch", "cpu"), needs("python")),
        "libtorch", "linux-64", "python py",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(WRONG_RECORDS))
def test_a_wrong_record_turns_its_verdict_red(
    table: Table, channel: Channel, tmp_path: Path, case: str
) -> None:
    make_wrong, request, machine, mismatch = WRONG_RECORDS[case]
    if machine.startswith(BELOW):
        machine = below_newest(table.facts, machine.removeprefix(BELOW))
    facts = table.facts  # the expectations of the recipe's real packages, whatever the wrong channel says
    assert solve_row(channel, tmp_path / "right", request, machine, facts).judged() == (True, "")
    ok, why = solve_row(make_wrong(channel), tmp_path / "wrong", request, machine, facts).judged()
    assert not ok
    assert mismatch in why


# ---- the verdict itself, and bad input ---------------------------------------------------------------------


def installed(**builds: str) -> Outcome:
    return Outcome(
        packages={name.replace("_", "-"): {"build": b, "version": "3.12"} for name, b in builds.items()}
    )


def test_verdict_reads_the_expectation_words() -> None:
    gpu = installed(
        pytorch="cuda130_mkl_py312_h0_430", libtorch_cuda_linalg="cuda130_mkl_magma_h0_480", libmagma="h0",
        libblas="5_h0_mkl", python="h0_cpython",
    )  # fmt: skip
    assert verdict("cuda130 mkl magma py312", gpu) == (True, "")
    assert verdict("cuda130 mkl", gpu) == (False, "linalg magma (expected none)")
    assert not verdict("cuda129 mkl magma", gpu)[0]
    assert not verdict("fails: __cuda", gpu)[0]
    windows = installed(pytorch="cuda128_mkl_py312_h0_428", libmagma="h0", libblas="5_h0_mkl")
    assert verdict("cuda128 mkl libmagma", windows) == (True, "")
    assert verdict("cuda128 mkl", windows) == (False, "libmagma installed with the none linalg")
    assert not verdict(
        "cuda128 mkl libmagma", installed(pytorch="cuda128_mkl_py312_h0_428", libblas="5_h0_mkl")
    )[0]
    failed = Outcome(error="Cannot solve the request because of: No candidates were found for pytorch-gpu *.")
    assert verdict("fails: No candidates were found for pytorch-gpu", failed) == (True, "")
    assert not verdict("fails: __cuda", failed)[0]
    assert not verdict("cpu mkl", failed)[0]


def test_an_unknown_expectation_word_is_one_line_naming_the_words() -> None:
    with pytest.raises(ToolError, match="use cpu/cudaNNN, mkl/generic"):
        solve_check.word_kind("cuda-ish")


@pytest.mark.parametrize(
    ("requests", "message"),
    [
        (
            "  - {name: pytorch, specs: [pytorch], rule: torch}\n"
            "  - {name: pytorch, specs: [pytorch], rule: cpu}\n",
            "two requests named 'pytorch'; give each request its own name",
        ),
        (
            "  - {name: pytorch, specs: [pytorch], rule: best}\n",
            "has rule 'best'; use one of torch, cpu, gpu",
        ),
        ("  - {name: pytorch, specs: [pytorch]}\n", "KeyError 'rule'"),
        (
            "  - {name: host, specs: [libcudss-dev], rule: host}\n",
            "has rule host but names neither {cuda} nor {cuda_version}",
        ),
    ],
)
def test_a_malformed_request_is_one_line_naming_the_file(tmp_path: Path, requests: str, message: str) -> None:
    table = tmp_path / "requests.yaml"
    table.write_text("machines:\n  - {name: a, subdir: linux-64, virtual: []}\nrequests:\n" + requests)
    with pytest.raises(ToolError) as raised:
        read_table(table)
    assert str(raised.value).startswith(f"{table}: " if "KeyError" not in message else f"cannot read {table}")
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_malformed_configuration_is_one_line_naming_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "broken.yaml").write_text("blas_impl:\n- mkl\n")  # no target_platform
    assert main(["solve-check", "--ci-support", str(tmp_path), "--pinning", str(PINNING)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: {tmp_path / 'broken.yaml'}: no target_platform; re-render it with")
    assert "render-ci" in err[-1]
    assert not any("Traceback" in line for line in err)


def test_a_dependency_without_a_record_is_one_line_naming_the_file(tmp_path: Path) -> None:
    config = ci_config("linux-64", "13.0").path
    configs = tmp_path / "ci_support"
    configs.mkdir()
    shutil.copy(config, configs)
    metadata = yaml.safe_load(METADATA_FILE.read_text())
    metadata["dependencies"] = [d for d in metadata["dependencies"] if d["name"] != "triton"]
    (tmp_path / "metadata.yaml").write_text(yaml.safe_dump(metadata))
    with pytest.raises(ToolError, match=r"no record of triton \(needed by pytorch .*add it to the dep"):
        build_channel(
            REPO_ROOT, REPO_ROOT / "recipe", configs, pinning_dir=PINNING, progress=lambda _: None,
            metadata_path=tmp_path / "metadata.yaml",
        )  # fmt: skip


def test_a_missing_pinning_is_one_line_naming_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["solve-check", "--pinning", str(tmp_path)]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "pass conda-forge-pinning's directory" in line


# ---- the build environments' run_exports (issue 30) -----------------------------------------------------


def aarch64_cuda_channel(recipe: Path, tmp_path: Path, **metadata_path: Path) -> Channel:
    """The channel of the linux-aarch64 sbsa CUDA 13.0 configuration alone, rendered from ``recipe``."""
    (config,) = (REPO_ROOT / ".ci_support").glob("linux_aarch64_*sbsa*cuda_compiler_version13.0*.yaml")
    configs = tmp_path / "ci_support"
    configs.mkdir(parents=True)
    shutil.copy(config, configs)
    return build_channel(
        REPO_ROOT, recipe, configs, pinning_dir=PINNING, progress=lambda _: None, **metadata_path
    )


def without_linalg_cross_python_ignore(tmp_path: Path) -> Path:
    """A scratch recipe copy whose libtorch-cuda-linalg no longer ignores cross-python's run_exports."""
    recipe = tmp_path / "recipe"
    shutil.copytree(REPO_ROOT / "recipe", recipe)
    meta = recipe / "meta.yaml"
    text = meta.read_text()
    line = "        - cross-python_{{ target_platform }}  # [build_platform != target_platform]\n"
    linalg = text.index("- name: libtorch-cuda-linalg")
    ignore = text.index("ignore_run_exports_from:", linalg)
    at = text.index(line, ignore)
    assert at < text.index("requirements:", linalg), "the fix is no longer in linalg's build section"
    meta.write_text(text[:at] + text[at + len(line) :])
    return recipe


# the Pythons above the floor the aarch64 configurations build (pass 1's is the floor): the next one and the
# newest, read from the configuration
(AARCH64_CUDA_CONFIG,) = (REPO_ROOT / ".ci_support").glob(
    "linux_aarch64_*sbsa*cuda_compiler_version13.0*.yaml"
)
ABOVE_THE_FLOOR = [p.version for p in read_configuration(AARCH64_CUDA_CONFIG).pythons][1:]


@pytest.mark.parametrize("python", [ABOVE_THE_FLOOR[0], ABOVE_THE_FLOOR[-1]])
def test_without_the_cross_python_fix_aarch64_cuda_has_no_build_for_newer_pythons(
    table: Table, tmp_path: Path, python: str
) -> None:
    request, machine = f"pytorch python={python}", "linux-aarch64 cuda13.0"
    fixed = aarch64_cuda_channel(REPO_ROOT / "recipe", tmp_path / "fixed")
    facts = recipe_facts(fixed, REPO_ROOT / "recipe")  # this configuration alone
    assert solve_row(fixed, tmp_path / "fixed-solve", request, machine, facts).judged() == (True, "")
    broken = aarch64_cuda_channel(without_linalg_cross_python_ignore(tmp_path), tmp_path / "broken")
    linalg = [r for r in broken.all_records() if r["name"] == "libtorch-cuda-linalg"]
    pass1_python = [s for s in linalg[0]["depends"] if s.startswith("python ")]
    assert pass1_python and all(r["depends"].count(pass1_python[0]) == 1 for r in linalg)
    ok, why = solve_row(broken, tmp_path / "broken-solve", request, machine, facts).judged()
    assert not ok
    assert why == "expected a solution, the solver found none"  # this configuration alone: no CPU fallback


def test_without_cross_python_in_the_metadata_the_broken_recipe_passes_unseen(tmp_path: Path) -> None:
    """The data is what catches it: with cross-python's entry gone, the broken recipe solves again."""
    metadata = yaml.safe_load(METADATA_FILE.read_text())
    metadata["run_exports"] = [e for e in metadata["run_exports"] if "cross-python" not in e["requirement"]]
    (tmp_path / "metadata.yaml").write_text(yaml.safe_dump(metadata))
    broken = aarch64_cuda_channel(
        without_linalg_cross_python_ignore(tmp_path), tmp_path, metadata_path=tmp_path / "metadata.yaml"
    )
    facts = recipe_facts(broken, REPO_ROOT / "recipe")
    request = f"pytorch python={ABOVE_THE_FLOOR[0]}"
    row = solve_row(broken, tmp_path / "solve", request, "linux-aarch64 cuda13.0", facts)
    assert row.judged() == (True, "")


def test_every_target_specific_build_requirement_has_its_run_exports_in_the_data(channel: Channel) -> None:
    """Compilers, stdlib and cross-python render as ``<name>_<subdir>``; each must have a run_exports entry,
    and every compiled output's record carries what they export."""
    from feedstock_tools.conda.recipe_render import render_recipe
    from feedstock_tools.proofs.solve.solve_channel import build_subdir_of, load_metadata, run_export_table

    known = {entry.requirement for entry in run_export_table(load_metadata())}
    missing: set[str] = set()
    # one configuration per target and CUDA or not: the others differ in versions, not in names
    kinds: dict[tuple[str, bool], Path] = {}
    for config in sorted((REPO_ROOT / ".ci_support").glob("*.yaml")):
        variant = yaml.safe_load(config.read_text())
        cuda = str(variant.get("cuda_compiler_version", ["None"])[0]) != "None"
        kinds.setdefault((variant["target_platform"][0], cuda), config)
    for (target, _), config in sorted(kinds.items()):
        rendered = render_recipe(
            REPO_ROOT / "recipe", config, build_subdir=build_subdir_of(REPO_ROOT, target)
        )
        for output in rendered.outputs:
            for spec in output.requirements.build:
                name = spec.split()[0]
                if name.endswith(f"_{target}") and name.replace(target, "{subdir}") not in known:
                    missing.add(f"{name} ({config.name})")
    assert not missing, sorted(missing)
    records = {(r["subdir"], r["name"], r["build"]): r for r in channel.all_records()}
    runtime = {"linux-64": "libstdcxx >=", "linux-aarch64": "libstdcxx >=", "osx-arm64": "libcxx >=",
               "osx-64": "libcxx >=", "win-64": "vc14_runtime >="}  # fmt: skip
    for (subdir, name, _), entry in records.items():
        if name in ("libtorch", "pytorch"):
            assert any(s.startswith(runtime[subdir]) for s in entry["depends"]), (subdir, name)


# ---- __cuda_arch (CEP 46): the recipe's constraint, removed from a scratch copy --------------------------


def without_cuda_arch_constraint(tmp_path: Path) -> Path:
    """A scratch recipe copy whose outputs no longer constrain __cuda_arch."""
    recipe = tmp_path / "recipe"
    shutil.copytree(REPO_ROOT / "recipe", recipe)
    meta = recipe / "meta.yaml"
    lines = meta.read_text().splitlines(keepends=True)
    kept = [line for line in lines if not line.lstrip().startswith("- __cuda_arch ")]
    assert len(lines) - len(kept) == 2, "libtorch's and libtorch-cuda-linalg's __cuda_arch lines moved"
    meta.write_text("".join(kept))
    return recipe


def linux_64_cuda_channel(recipe: Path, tmp_path: Path) -> Channel:
    """The channel of the two linux-64 MKL CUDA configurations (12.9 and 13.0), rendered from ``recipe``."""
    configs = tmp_path / "ci_support"
    configs.mkdir(parents=True)
    for cuda in ("12.9", "13.0"):
        shutil.copy(ci_config("linux-64", cuda).path, configs)
    assert len(list(configs.iterdir())) == 2
    return build_channel(REPO_ROOT, recipe, configs, pinning_dir=PINNING, progress=lambda _: None)


def test_without_the_recipes_cuda_arch_bound_an_older_gpu_gets_the_newest_cuda_build(
    table: Table, tmp_path: Path
) -> None:
    """The issue's row: a GPU older than the newest CUDA build's oldest architecture, on that CUDA's driver,
    gets the older CUDA build because the recipe's bound says so; without it, the newest."""
    request, machine = "pytorch-gpu", below_newest(table.facts, "linux-64 cuda13.0")
    fixed = linux_64_cuda_channel(REPO_ROOT / "recipe", tmp_path / "fixed")
    facts = recipe_facts(fixed, REPO_ROOT / "recipe")
    assert solve_row(fixed, tmp_path / "fixed-solve", request, machine, facts).judged() == (True, "")
    older = solve_row(fixed, tmp_path / "fixed-solve", request, machine, facts).outcome.words()["flavour"]
    broken = linux_64_cuda_channel(without_cuda_arch_constraint(tmp_path), tmp_path / "broken")
    ok, why = solve_row(broken, tmp_path / "broken-solve", request, machine, facts).judged()
    assert not ok
    assert f"flavour {newest_cuda(facts, 'linux-64').flavour} (expected {older})" in why
