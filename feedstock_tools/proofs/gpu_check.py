"""``python -m feedstock_tools gpu-check``: the split CUDA packages tried on a real GPU.

Lays a real CUDA torch out as this recipe's packages, with the driver's own staging table (the steps of
``wheel-layout``): from a CUDA wheel (``--wheel``), or, where no wheel can be downloaded, from the torch
installed for ``--python`` (``--installed``). Two environment prefixes are merged from the staged packages,
as ``conda install`` would: ``env`` (libtorch, libtorch-cuda-linalg, pytorch) and ``env-without-linalg``
(libtorch and pytorch only). The CUDA libraries of the interpreter's ``nvidia-*`` pip packages are linked
into each ``env/lib``, where conda-forge's ``cuda-*`` packages put them, and its ``pybind11`` headers into
``env/include``, where pytorch's run dependency ``pybind11`` puts them. Then, on the GPU:

======================  ==================================================================================
check                   passes when
======================  ==================================================================================
import                  ``import torch`` in ``env`` loads torch from there and sees the GPU
cuda-compute            a float64 matrix product on the GPU equals the CPU's
linalg-lazy             ``libtorch_cuda_linalg.so`` is not loaded after import and a matmul, and is loaded
                        from ``env/lib`` by ``torch.linalg.inv``/``cholesky``, whose results are right
has-magma               reports ``torch.cuda.has_magma`` (a compile-time constant upstream; patch 0004
                        makes it follow the installed library in this recipe's builds)
linalg-missing          in ``env-without-linalg`` the same linear algebra fails, and names the library
cpp-extension           ``recipe/tests/check_cuda_extension.py`` (the package test) builds a C++/CUDA kernel
                        with nvcc against ``env``'s headers (``site-packages/torch/include``, the link to
                        ``$PREFIX/include``) and the kernel computes the right numbers
cmake-consumer          ``recipe/cmake_test`` finds ``env/share/cmake/Torch``, builds and runs on the GPU
======================  ==================================================================================

Exit status: 0 every check passed; 1 a check failed or the input is wrong (one line); 3 no NVIDIA GPU
present (one line, nothing laid out).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from feedstock_tools.common import inputs, interruption
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.recipe_imports import RECIPE_DIR
from feedstock_tools.proofs.wheels import wheel_layout
from megabuild import package_files, staging

EXIT_NO_GPU = 3
LINALG_LIBRARY = "libtorch_cuda_linalg.so"


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class Interpreter:
    """The Python that runs the checks, and where its own packages (torch's dependencies) live."""

    python: Path
    version: str  # "3.12"
    site_packages: Path
    torch_dir: Path | None  # the installed torch package, if any
    torch_version: str | None
    pybind11_include: Path | None  # headers of the interpreter's pybind11, if installed
    machine: str = "x86_64"  # platform.machine()


def find_gpu() -> str | None:
    """The first line of ``nvidia-smi -L`` ("GPU 0: NVIDIA H100 ..."), or None without a GPU or driver."""
    nvidia_smi = shutil.which("nvidia-smi")
    if nvidia_smi is None:
        return None
    listed = subprocess.run([nvidia_smi, "-L"], capture_output=True, text=True, check=False)
    gpus = [line for line in listed.stdout.splitlines() if line.startswith("GPU ")]
    return gpus[0] if listed.returncode == 0 and gpus else None


_QUERY = """
import importlib.metadata, importlib.util, json, platform, sys, sysconfig
spec = importlib.util.find_spec("torch")
try:
    version = importlib.metadata.version("torch")
except importlib.metadata.PackageNotFoundError:
    version = None
try:
    import pybind11
    pybind11_include = pybind11.get_include()
except ImportError:
    pybind11_include = None
print(json.dumps({
    "pybind11_include": pybind11_include,
    "version": f"{sys.version_info[0]}.{sys.version_info[1]}",
    "site_packages": sysconfig.get_paths()["platlib"],
    "torch_dir": spec.submodule_search_locations[0] if spec else None,
    "torch_version": version,
    "machine": platform.machine(),
}))
"""


def query_interpreter(python: Path) -> Interpreter:
    try:
        found = subprocess.run([python, "-c", _QUERY], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ToolError(f"cannot run {python} ({exc}): pass a working Python with --python") from None
    data = json.loads(found.stdout)
    torch_dir = Path(data["torch_dir"]) if data["torch_dir"] else None
    pybind11 = Path(data["pybind11_include"]) if data["pybind11_include"] else None
    return Interpreter(
        python,
        data["version"],
        Path(data["site_packages"]),
        torch_dir,
        data["torch_version"],
        pybind11,
        data["machine"],
    )


def lay_out_source(args: argparse.Namespace, interpreter: Interpreter, src: Path):
    """The build tree of the torch to check, and its tag (from the wheel, or the installed torch)."""
    if args.wheel is not None:
        tag = wheel_layout.parse_wheel_name(args.wheel)
        if tag.python != interpreter.version:
            raise ToolError(
                f"{args.wheel.name} is for Python {tag.python}, {interpreter.python} is "
                f"{interpreter.version}: pass --python of a Python {tag.python} that has torch's dependencies"
            )
        return wheel_layout.lay_out_wheel_as_build_tree(args.wheel, src), tag
    if interpreter.torch_dir is None or interpreter.torch_version is None:
        raise ToolError(
            f"{interpreter.python} has no torch installed: pass --wheel, or --python of one that has"
        )
    tag = wheel_layout.WheelTag(interpreter.torch_version, interpreter.version, interpreter.machine)
    return wheel_layout.lay_out_installed_torch(interpreter.torch_dir.parent, tag, src), tag


def unplaced_files(trees) -> list[Path]:
    """Files of the trees that no rule, or more than one, of the staging table places."""
    unplaced = []
    for tree, root in trees.roots().items():
        for path in staging.tree_files(tree, root):
            claims = sum(staging.rule_claims(rule, tree, path) for rule in package_files.RULES)
            if claims != 1:
                unplaced.append(root / path)
    return unplaced


def drop_unplaced_files(trees, allowed: bool) -> list[str]:
    """For a torch other than the recipe's version: leave out, and name, what the table cannot place."""
    unplaced = unplaced_files(trees)
    if unplaced and not allowed:
        return []  # staging stops with the driver's own one-line error naming the first of them
    for path in unplaced:
        path.unlink()
    return [str(path) for path in unplaced]


def link_cuda_libraries(site_packages: Path, lib: Path) -> int:
    """Symlink the CUDA libraries of the ``nvidia-*`` pip packages into ``lib`` (conda's ``$PREFIX/lib``)."""
    linked = 0
    for library in sorted((site_packages / "nvidia").glob("**/lib/lib*.so*")):
        target = lib / library.name
        if not os.path.lexists(target):
            target.symlink_to(library)
            linked += 1
    return linked


def link_pybind11_headers(pybind11_include: Path | None, include: Path) -> bool:
    """``$PREFIX/include/pybind11`` as pytorch's run dependency ``pybind11`` provides it: the staging table
    leaves torch's bundled copy out, and every ``torch/extension.h`` user compiles against it."""
    if pybind11_include is None or not (pybind11_include / "pybind11").is_dir():
        return False
    (include / "pybind11").symlink_to(pybind11_include / "pybind11")
    return True


def build_environments(trees, tag, interpreter: Interpreter, work: Path) -> dict[str, Path]:
    prefixes = wheel_layout.stage_into_prefixes(trees, tag, work)
    if package_files.LIBTORCH_CUDA_LINALG not in prefixes:
        raise ToolError(f"this torch has no {LINALG_LIBRARY}: gpu-check needs a CUDA build of torch")
    print(wheel_layout.format_table(wheel_layout.package_sizes(prefixes), wheel_layout.not_shipped(trees)))
    environments = {
        "env": prefixes,
        "env-without-linalg": {k: v for k, v in prefixes.items() if k != package_files.LIBTORCH_CUDA_LINALG},
    }
    for name, packages in environments.items():
        print(f"merging {', '.join(packages)} into {work / name} ...", flush=True)
        wheel_layout.merge_prefixes(packages, work / name)
        linked = link_cuda_libraries(interpreter.site_packages, work / name / "lib")
        print(f"  linked {linked} CUDA libraries of {interpreter.site_packages / 'nvidia'} into {name}/lib")
        if link_pybind11_headers(interpreter.pybind11_include, work / name / "include"):
            print(
                f"  linked {interpreter.pybind11_include / 'pybind11'} into {name}/include (run dependency)"
            )
    return {name: work / name for name in environments}


def probe_variables(env: Path, tag, interpreter: Interpreter, work: Path) -> dict[str, str]:
    """Run with torch from ``env`` first on sys.path and nothing from LD_LIBRARY_PATH."""
    path = os.pathsep.join([str(interpreter.python.parent), os.environ.get("PATH", "/usr/bin:/bin")])
    variables = {
        "PATH": path,
        "HOME": os.environ.get("HOME", str(work)),
        "PYTHONPATH": str(env / tag.site_packages),
        "PYTHONNOUSERSITE": "1",
    }
    # CPATH: headers of the interpreter where its include directory has none (a Python without -dev files)
    for name in ("CUDA_HOME", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "CPATH"):
        if name in os.environ:
            variables[name] = os.environ[name]
    return variables


def run_probe(script: str | Path, variables: dict[str, str], python: Path, timeout: float, log: Path) -> dict:
    """Run a probe (code, or a check script that takes --require-gpu) through the one runner, its output in
    ``log``, and read the JSON line it prints."""
    arguments = [str(script), "--require-gpu"] if isinstance(script, Path) else ["-c", script]
    try:
        status, said = interruption.run_logged([str(python), *arguments], Path.cwd(), variables, log, timeout)
    except subprocess.TimeoutExpired:
        return {"probe_error": f"no answer within {timeout:.0f}s"}
    lines = [line for line in said if line.startswith("{")]
    if status != 0 or not lines:
        output = "\n".join(said).strip().splitlines()
        # a compiler's first "error:" says more than ninja's last lines
        errors = [line for line in output if re.search(r":\d+(:\d+)?: (fatal )?error:", line)][:2]
        return {"probe_error": f"exit {status}: {' | '.join(errors + output[-2:])}"}
    return json.loads(lines[-1])


# Runs inside an environment; prints one JSON line. float64 keeps the comparisons exact enough.
TORCH_PROBE = textwrap.dedent(
    r"""
    import json, re
    def loaded(pattern):
        return sorted({line.split()[-1] for line in open("/proc/self/maps") if re.search(pattern, line)})
    import torch
    out = {"torch_file": torch.__file__, "version": torch.__version__, "cuda": torch.version.cuda,
           "available": torch.cuda.is_available()}
    if out["available"]:
        out["device"] = torch.cuda.get_device_name(0)
        torch.manual_seed(0)
        a = torch.randn(256, 256, dtype=torch.float64)
        out["matmul_error"] = ((a.cuda() @ a.cuda()).cpu() - a @ a).abs().max().item()
        out["linalg_before"] = loaded("libtorch_cuda_linalg")
        spd = a @ a.T + 256 * torch.eye(256, dtype=torch.float64)
        try:
            inverse = torch.linalg.inv(spd.cuda()).cpu()
            factor = torch.linalg.cholesky(spd.cuda()).cpu()
            out["inv_error"] = (inverse @ spd - torch.eye(256, dtype=torch.float64)).abs().max().item()
            out["cholesky_error"] = (factor @ factor.T - spd).abs().max().item()
        except Exception as exc:
            out["linalg_error"] = f"{type(exc).__name__}: {exc}"
        out["linalg_after"] = loaded("libtorch_cuda_linalg")
        out["has_magma"] = bool(torch.cuda.has_magma)
        out["cuda_libraries"] = loaded(r"lib(cudart|cublas|cusolver)\.so")
    print(json.dumps(out))
    """
)

# The pytorch package test's own CUDA extension check, with the GPU required.
EXTENSION_CHECK = RECIPE_DIR / "tests" / "check_cuda_extension.py"


def check_torch(env: Path, probe: dict, tag) -> list[CheckResult]:
    if "probe_error" in probe:
        return [CheckResult("import", False, probe["probe_error"])]
    expected = env / tag.site_packages / "torch" / "__init__.py"
    imported = Path(probe["torch_file"]) == expected and probe["available"]
    results = [
        CheckResult(
            "import",
            imported,
            f"torch {probe['version']} (CUDA {probe['cuda']}) from {probe['torch_file']}; "
            + (f"GPU {probe['device']}" if probe["available"] else "torch.cuda.is_available() is False"),
        )
    ]
    if not probe["available"]:
        return results
    results.append(
        CheckResult(
            "cuda-compute", probe["matmul_error"] < 1e-9, f"max |GPU - CPU| {probe['matmul_error']:.1e}"
        )
    )
    library = (env / "lib" / LINALG_LIBRARY).resolve()
    lazy = not probe["linalg_before"] and [Path(p).resolve() for p in probe["linalg_after"]] == [library]
    if "linalg_error" in probe:
        results.append(CheckResult("linalg-lazy", False, probe["linalg_error"]))
    else:
        right = probe["inv_error"] < 1e-9 and probe["cholesky_error"] < 1e-6
        results.append(
            CheckResult(
                "linalg-lazy",
                lazy and right,
                f"loaded before: {probe['linalg_before'] or 'nothing'}; after inv/cholesky: "
                f"{probe['linalg_after']}; errors {probe['inv_error']:.1e}, {probe['cholesky_error']:.1e}",
            )
        )
    results.append(CheckResult("has-magma", True, f"torch.cuda.has_magma = {probe['has_magma']}"))
    return results


def check_without_linalg(probe: dict) -> CheckResult:
    if "probe_error" in probe:
        return CheckResult("linalg-missing", False, probe["probe_error"])
    error = probe.get("linalg_error", "")
    named = "torch_cuda_linalg" in error
    detail = error.replace("\n", " ") if error else "linear algebra worked without libtorch-cuda-linalg"
    return CheckResult("linalg-missing", named, f"{detail} (has_magma = {probe.get('has_magma')})")


def check_extension(probe: dict, env: Path) -> CheckResult:
    if "probe_error" in probe:
        return CheckResult("cpp-extension", False, probe["probe_error"])
    include = str((env / "include").resolve())
    from_env = include in probe["include_paths"]
    return CheckResult(
        "cpp-extension",
        probe["correct"] and from_env,
        f"nvcc from {probe['cuda_home']}; headers {probe['include_paths'][:2]}; kernel "
        + ("right" if probe["correct"] else "WRONG"),
    )


def check_cmake_consumer(env: Path, variables: dict[str, str], work: Path) -> CheckResult:
    build = work / "cmake_test_build"
    configure = [
        "cmake", "-S", str(RECIPE_DIR / "cmake_test"), "-B", str(build), "-G", "Ninja",
        f"-DTorch_DIR={env / 'share' / 'cmake' / 'Torch'}",
    ]  # fmt: skip
    steps = {
        "configure": configure,
        "build": ["cmake", "--build", str(build)],
        "run": [str(build / "torch_consumer")],
    }
    for name, step in steps.items():
        log = work / f"cmake-consumer-{name}.log"
        status, said = interruption.run_logged(step, Path.cwd(), variables, log, timeout=540)
        if status != 0:
            tail = " | ".join("\n".join(said).strip().splitlines()[-4:])
            return CheckResult("cmake-consumer", False, f"{Path(step[0]).name} failed: {tail}")
    output = "\n".join(said).strip().splitlines()
    ok = output[-1] == "OK" and any(line.startswith("CUDA") and "ok" in line for line in output)
    return CheckResult("cmake-consumer", ok, " / ".join(output))


def format_results(results: list[CheckResult]) -> str:
    rows = [f"| {r.name} | {'PASS' if r.ok else 'FAIL'} | {r.detail} |" for r in results]
    return "\n".join(["| check | result | detail |", "|---|---|---|", *rows])


def run(args: argparse.Namespace, gpu_finder: Callable[[], str | None] = find_gpu) -> int:
    # The inputs first: a wrong path is the user's to fix on any machine, with or without a GPU.
    if args.wheel is not None:
        inputs.input_file(args.wheel, "--wheel", "a CUDA torch wheel (.whl)", (".whl",))
    if not (args.python.is_file() and os.access(args.python, os.X_OK)):
        raise ToolError(f"--python {args.python} is not an executable file; give a Python interpreter")
    work: Path = inputs.work_dir(args.work, "--work")
    if work.exists() and any(work.iterdir()):
        raise ToolError(f"work directory {work} is not empty: pass a new or empty --work directory")
    gpu = gpu_finder()
    if gpu is None:
        print("gpu-check: no NVIDIA GPU present (no working nvidia-smi -L): nothing checked", file=sys.stderr)
        return EXIT_NO_GPU
    interpreter = query_interpreter(args.python)
    print(f"{gpu}; Python {interpreter.version} at {interpreter.python}", flush=True)
    with wheel_layout.staging_errors_as_tool_errors(work):
        print(f"laying torch out as a build tree under {work / 'src'} ...", flush=True)
        trees, tag = lay_out_source(args, interpreter, work / "src")
        for path in drop_unplaced_files(trees, args.allow_unplaced):
            print(f"  left out, the staging table of {RECIPE_DIR.name} does not place it: {path}")
        environments = build_environments(trees, tag, interpreter, work)
    full = environments["env"]
    variables = probe_variables(full, tag, interpreter, work)
    print("checking torch in env ...", flush=True)
    results = check_torch(
        full, run_probe(TORCH_PROBE, variables, interpreter.python, 300, work / "probe-env.log"), tag
    )
    if all(result.ok for result in results):
        print("checking env-without-linalg ...", flush=True)
        without = environments["env-without-linalg"]
        bare = probe_variables(without, tag, interpreter, work)
        results.append(
            check_without_linalg(
                run_probe(TORCH_PROBE, bare, interpreter.python, 300, work / "probe-env-without-linalg.log")
            )
        )
        print("building a C++/CUDA extension with torch.utils.cpp_extension ...", flush=True)
        results.append(
            check_extension(
                run_probe(EXTENSION_CHECK, variables, interpreter.python, 540, work / "probe-extension.log"),
                full,
            )
        )
        print("building recipe/cmake_test against env/share/cmake/Torch ...", flush=True)
        results.append(check_cmake_consumer(full, variables, work))
    print(format_results(results))
    return 0 if all(result.ok for result in results) else 1


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "gpu-check",
        help="lay a real CUDA torch out as the recipe's packages and check them on a GPU",
        description=__doc__.split("\n\n")[1],
        epilog=(
            f"Exit status: 0 all checks passed, 1 a check failed or wrong input, {EXIT_NO_GPU} no NVIDIA "
            "GPU present (said in one line; nothing is laid out). Needs nvcc (CUDA_HOME or PATH), cmake "
            "and ninja."
        ),
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--wheel", type=Path, help="a CUDA torch wheel, e.g. torch-2.13.0-cp312-...whl")
    source.add_argument(
        "--installed", action="store_true", help="the torch installed for --python (no wheel at hand)"
    )
    parser.add_argument("--work", type=Path, required=True, help="new or empty directory for the layout")
    parser.add_argument(
        "--python",
        type=Path,
        default=Path(sys.executable),
        help="the Python that runs the checks; it provides torch's dependencies and the nvidia-* CUDA "
        "libraries (default: this one)",
    )
    parser.add_argument(
        "--allow-unplaced",
        action="store_true",
        help="for a torch other than the recipe's version: leave out, and list, the files the staging "
        "table does not place instead of stopping",
    )
    parser.set_defaults(func=run)
