"""recipe/patches: format, listing in meta.yaml, and the patched code that can be exercised without CUDA."""

from __future__ import annotations

import re
import subprocess
import zipfile
from pathlib import Path

import pytest

RECIPE = Path(__file__).resolve().parents[1] / "recipe"
PATCHES = sorted((RECIPE / "patches").glob("*.patch"))
CPU_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
PREIMAGE = Path(__file__).resolve().parent / "patch_fixtures" / "pytorch-2.13.0-preimage.txt"
# Patches whose every hunk has verbatim 2.13.0 context in the fixture (the others say why not).
VERIFIED = {"0001", "0002", "0003", "0015"}
HEADER_FIELDS = ("Why:", "Upstream status:", "Context verified against:")


def patch_id(path: Path) -> str:
    return path.name.split("-", 1)[0]


def numstat(patch: Path) -> list[tuple[int, int, str]]:
    """git's own parse of the patch (fails on a corrupt hunk): (added, deleted, path) per file."""
    out = subprocess.run(
        ["git", "apply", "--numstat", str(patch)], capture_output=True, text=True, check=True
    )
    return [(int(a), int(d), p) for a, d, p in (line.split("\t") for line in out.stdout.splitlines())]


def new_file_text(patch: Path, path: str) -> str:
    """The content a patch creates for a new file (its added lines)."""
    text = patch.read_text()
    start = text.index(f"+++ b/{path}\n")
    hunk = text[start:].split("\n", 2)[2]
    lines = []
    for line in hunk.splitlines():
        if not line.startswith("+"):
            break
        lines.append(line[1:])
    return "\n".join(lines) + "\n"


def test_there_are_patches_and_meta_yaml_lists_each_with_a_comment():
    assert len(PATCHES) >= 6
    lines = (RECIPE / "meta.yaml").read_text().splitlines()
    listed = [(i, line) for i, line in enumerate(lines) if re.match(r"\s+- patches/", line)]
    assert sorted(line.split("patches/")[1].split()[0] for _, line in listed) == [p.name for p in PATCHES]
    for index, _ in listed:
        assert lines[index - 1].strip().startswith("#"), f"no comment above meta.yaml line {index + 1}"


@pytest.mark.parametrize("patch", PATCHES, ids=patch_id)
def test_patch_is_format_patch_style_with_a_header(patch):
    text = patch.read_text()
    assert text.startswith("From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n")
    number = int(patch_id(patch))
    # numbers are ranges per owner (0010-0014 macOS/cross, 0015-0019 CUDA paths), so N/M with N <= M
    subject = re.search(r"^Subject: \[PATCH (\d+)/(\d+)\] ", text, re.M)
    assert subject and int(subject.group(1)) == number <= int(subject.group(2))
    message = text.split("\n---\n", 1)[0]
    for field in HEADER_FIELDS:
        assert re.search(rf"^{re.escape(field)} \S", message, re.M), f"{patch.name}: no '{field}'"
    assert text.endswith("-- \n2.43.0\n\n")


@pytest.mark.parametrize("patch", PATCHES, ids=patch_id)
def test_diffstat_matches_what_git_parses(patch):
    parsed = numstat(patch)
    summary = re.search(
        r"^ (\d+) files? changed, (\d+) insertions?\(\+\)(?:, (\d+) deletions?\(-\))?",
        patch.read_text(),
        re.M,
    )
    assert summary
    assert int(summary.group(1)) == len(parsed)
    assert int(summary.group(2)) == sum(added for added, _, _ in parsed)
    assert int(summary.group(3) or 0) == sum(deleted for _, deleted, _ in parsed)


def test_magma_probe_of_patch_0004_reads_the_installed_linalg_library(tmp_path):
    """LinalgMagmaProbe.h (added by patch 0004), compiled into a stand-in libtorch_cuda beside stand-in linalg
    libraries: it must report the libmagma a linalg library links, and nothing for one without MAGMA."""
    (patch,) = [p for p in PATCHES if patch_id(p) == "0004"]
    include = tmp_path / "include" / "ATen" / "cuda" / "detail"
    include.mkdir(parents=True)
    (include / "LinalgMagmaProbe.h").write_text(
        new_file_text(patch, "aten/src/ATen/cuda/detail/LinalgMagmaProbe.h")
    )
    (tmp_path / "probe.cpp").write_text(
        "#include <ATen/cuda/detail/LinalgMagmaProbe.h>\n"
        'extern "C" const char* installed_magma() {\n'
        "  static const std::string magma = at::cuda::detail::linalg_magma_library(\n"
        "      at::cuda::detail::beside_library_of(reinterpret_cast<const void*>(&installed_magma),\n"
        '                                          "libtorch_cuda_linalg.so"));\n'
        "  return magma.c_str();\n}\n"
    )
    (tmp_path / "main.cpp").write_text(
        '#include <cstdio>\nextern "C" const char* installed_magma();\n'
        'int main() { std::printf("[%s]", installed_magma()); }\n'
    )

    def prefix(name: str, linalg_links_magma: bool | None) -> str:
        lib = tmp_path / name / "lib"
        lib.mkdir(parents=True)
        gcc = ["gcc", "-shared", "-fPIC", "-x", "c", "-"]
        if linalg_links_magma is not None:
            flags = [f"-L{lib}", "-lmagma"] if linalg_links_magma else []
            if linalg_links_magma:
                subprocess.run(
                    [*gcc, "-Wl,-soname,libmagma.so.2", "-o", str(lib / "libmagma.so.2")],
                    input="int magma_init(void) { return 0; }",
                    text=True,
                    check=True,
                )
                (lib / "libmagma.so").symlink_to("libmagma.so.2")
            source = (
                "int magma_init(void); int f(void) { return magma_init(); }"
                if linalg_links_magma
                else "int f(void) { return 0; }"
            )
            subprocess.run(
                [*gcc, "-o", str(lib / "libtorch_cuda_linalg.so"), *flags],
                input=source,
                text=True,
                check=True,
            )
        cxx = ["g++", "-std=c++17", "-Wall", "-Werror", f"-I{tmp_path / 'include'}"]
        subprocess.run(
            [*cxx, "-shared", "-fPIC", "-o", str(lib / "libtorch_cuda.so"), str(tmp_path / "probe.cpp")],
            check=True,
        )
        program = lib.parent / "main"
        subprocess.run(
            [
                *cxx,
                "-o",
                str(program),
                str(tmp_path / "main.cpp"),
                f"-L{lib}",
                "-ltorch_cuda",
                "-Wl,-rpath,$ORIGIN/lib",
            ],
            check=True,
        )
        return subprocess.run([str(program)], capture_output=True, text=True, check=True).stdout

    assert prefix("with-magma", True) == "[libmagma.so.2]"
    assert prefix("without-magma", False) == "[]"
    assert prefix("no-linalg", None) == "[]"


@pytest.mark.wheel
def test_aten_config_of_patch_0002_finds_headers_in_the_installed_prefix(tmp_path):
    """The 2.13.0 template, recovered from the wheel's generated ATenConfig.cmake, patched by 0002, configured
    with @ONLY and installed into a prefix: find_package(ATen) must point at <prefix>/include."""
    if not CPU_WHEEL.is_file():
        pytest.fail(
            f"{CPU_WHEEL} is missing: this kind of machine ships it (pip install torch==2.13.0 finds it)"
        )
    with zipfile.ZipFile(CPU_WHEEL) as wheel:
        generated = wheel.read("torch/share/cmake/ATen/ATenConfig.cmake").decode()
    assert 'set(ATEN_INCLUDE_DIR "/__w/pytorch/pytorch/torch/include")' in generated  # the problem
    template = re.sub(
        r'set\(ATEN_INCLUDE_DIR ".*"\)', 'set(ATEN_INCLUDE_DIR "@ATEN_INCLUDE_DIR@")', generated
    )
    template = re.sub(r'set\(ATEN_LIBRARIES ".*"\)', 'set(ATEN_LIBRARIES "@ATEN_LIBRARIES@")', template)
    source = tmp_path / "src"
    (source / "aten" / "src" / "ATen").mkdir(parents=True)
    (source / "aten" / "src" / "ATen" / "ATenConfig.cmake.in").write_text(template)
    (patch,) = [p for p in PATCHES if patch_id(p) == "0002"]
    subprocess.run(
        ["git", "apply", "--include=aten/src/ATen/ATenConfig.cmake.in", str(patch)], cwd=source, check=True
    )
    project = tmp_path / "project"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(aten_config NONE)\n"
        'set(ATEN_INCLUDE_DIR "/work/dir/of/the/build/torch/include")\nset(ATEN_LIBRARIES "")\n'
        f'configure_file("{source}/aten/src/ATen/ATenConfig.cmake.in" '
        '"${CMAKE_BINARY_DIR}/prefix/share/cmake/ATen/ATenConfig.cmake" @ONLY)\n'
        'file(MAKE_DIRECTORY "${CMAKE_BINARY_DIR}/prefix/include")\nunset(ATEN_INCLUDE_DIR)\n'
        "find_package(ATen REQUIRED CONFIG NO_DEFAULT_PATH\n"
        '  PATHS "${CMAKE_BINARY_DIR}/prefix/share/cmake/ATen")\n'
        'message(STATUS "ATEN_INCLUDE_DIR=${ATEN_INCLUDE_DIR}")\n'
    )
    build = tmp_path / "build"
    configured = subprocess.run(
        ["cmake", "-S", str(project), "-B", str(build)], capture_output=True, text=True, check=True
    )
    assert f"ATEN_INCLUDE_DIR={build}/prefix/include" in configured.stdout


def preimage_tree(destination: Path) -> list[str]:
    """The fixture's 2.13.0 lines written at their line numbers (other lines: unique filler); the paths."""
    files: dict[str, dict[int, str]] = {}
    current: dict[int, str] = {}
    number = 0
    for line in PREIMAGE.read_text().splitlines():
        if line.startswith("@@"):
            words = line.split()
            if len(words) >= 3:
                current = files.setdefault(words[1], {})
                number = int(words[2])
            continue
        if line.startswith("#") and not files:
            continue  # the fixture's own header
        current[number] = line
        number += 1
    for path, lines in files.items():
        target = destination / path
        target.parent.mkdir(parents=True, exist_ok=True)
        last = max(lines)
        target.write_text(
            "".join(lines.get(n, f"# line {n}: not in the fixture") + "\n" for n in range(1, last + 1))
        )
    return sorted(files)


def test_the_fixture_holds_the_2_13_0_lines_of_the_wheel(tmp_path):
    """The fixture's wheel segments are the wheel's bytes (so the fixture is not an invention)."""
    if not CPU_WHEEL.is_file():
        pytest.fail(f"{CPU_WHEEL} is missing: this kind of machine ships it")
    preimage_tree(tmp_path)
    with zipfile.ZipFile(CPU_WHEEL) as wheel:
        real = wheel.read("torch/share/cmake/Caffe2/FindCUDAToolkit.cmake").decode().splitlines()
    fixture = (tmp_path / "cmake/Modules/FindCUDAToolkit.cmake").read_text().splitlines()
    assert fixture[496:503] == real[496:503]
    with zipfile.ZipFile(CPU_WHEEL) as wheel:
        real = wheel.read("torch/utils/cpp_extension.py").decode().splitlines()
    fixture = (tmp_path / "torch/utils/cpp_extension.py").read_text().splitlines()
    kept = [n for n, line in enumerate(fixture) if not line.startswith("# line ")]
    assert len(kept) > 30 and all(fixture[n] == real[n] for n in kept)


@pytest.mark.parametrize("patch", [p for p in PATCHES if patch_id(p) in VERIFIED], ids=patch_id)
def test_verified_patches_apply_strictly_at_their_line_numbers_to_the_2_13_0_lines(patch, tmp_path):
    """git apply (no fuzz) at the exact line numbers the hunks name: no offset, no missing context."""
    paths = preimage_tree(tmp_path)
    touched = [path for _, _, path in numstat(patch)]
    assert set(touched) <= set(paths), f"{patch.name}: no 2.13.0 lines for {set(touched) - set(paths)}"
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    applied = subprocess.run(
        ["git", "apply", "--check", "-v", str(patch)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert applied.returncode == 0, applied.stderr
    assert "offset" not in applied.stderr, applied.stderr


def test_unverified_patches_say_so():
    for patch in PATCHES:
        if patch_id(patch) not in VERIFIED:
            header = " ".join(patch.read_text().split("\n---\n", 1)[0].split())
            assert "ot verified against 2.13.0" in header, patch.name


@pytest.mark.wheel
def test_patch_0003_applies_to_the_2_13_0_find_module_and_lets_the_cache_name_the_toolkit(tmp_path):
    """The wheel's FindCUDAToolkit.cmake is the 2.13.0 source byte for byte: patch it and run it with nvcc's
    toolkit in one prefix and CUDAToolkit_ROOT_DIR/_TARGET_DIR/_BIN_DIR cache entries naming another."""
    if not CPU_WHEEL.is_file():
        pytest.fail(f"{CPU_WHEEL} is missing: this kind of machine ships it")
    module = tmp_path / "src" / "cmake" / "Modules" / "FindCUDAToolkit.cmake"
    module.parent.mkdir(parents=True)
    with zipfile.ZipFile(CPU_WHEEL) as wheel:
        module.write_bytes(wheel.read("torch/share/cmake/Caffe2/FindCUDAToolkit.cmake"))
    (patch,) = [p for p in PATCHES if patch_id(p) == "0003"]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path / "src", check=True)
    subprocess.run(["git", "apply", str(patch)], cwd=tmp_path / "src", check=True)
    host = tmp_path / "host"
    (host / "targets" / "x86_64-linux" / "include").mkdir(parents=True)
    (host / "targets" / "x86_64-linux" / "include" / "cuda_runtime.h").write_text("")
    project = tmp_path / "project"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(p NONE)\n"
        f'list(APPEND CMAKE_MODULE_PATH "{module.parent}")\n'
        'set(CMAKE_CUDA_COMPILER_TOOLKIT_ROOT "/nvcc/of/the/build/prefix")\n'
        "find_package(CUDAToolkit QUIET)\n"
        'message(STATUS "ROOT=${CUDAToolkit_ROOT_DIR} INCLUDE=${CUDAToolkit_INCLUDE_DIR}")\n'
    )
    configured = subprocess.run(
        ["cmake", "-S", str(project), "-B", str(tmp_path / "build"), f"-DCUDAToolkit_ROOT_DIR={host}",
         f"-DCUDAToolkit_TARGET_DIR={host}/targets/x86_64-linux", f"-DCUDAToolkit_BIN_DIR={tmp_path}/bin"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert f"ROOT={host} INCLUDE={host}/targets/x86_64-linux/include" in configured.stdout


@pytest.mark.wheel
def test_bundled_fmt_of_2_13_0_is_the_version_conda_forge_pins():
    """2.13.0 compiles its bundled fmt (no USE_SYSTEM_FMT) while the packages ship conda-forge's fmt headers,
    which libtorch's headers include: the global pin must be the bundled version."""
    if not CPU_WHEEL.is_file():
        pytest.fail(f"{CPU_WHEEL} is missing: this kind of machine ships it")
    with zipfile.ZipFile(CPU_WHEEL) as wheel:
        base = wheel.read("torch/include/fmt/base.h").decode()
        strong_type = wheel.read("torch/include/c10/util/strong_type.h").decode()
    assert "#include <fmt/" in strong_type
    version = int(re.search(r"#define FMT_VERSION (\d+)", base).group(1))
    bundled = f"{version // 10000}.{version // 100 % 100}"
    pinning = RECIPE.parent.parent / "shared" / "data" / "conda-forge-pinning" / "conda_build_config.yaml"
    pinned = re.search(r"^fmt:\n\s+- '?([0-9.]+)'?", pinning.read_text(), re.M).group(1)
    assert pinned == bundled
