"""recipe/patches: format, listing in meta.yaml, and the patched code that can be exercised without CUDA."""

from __future__ import annotations

import re
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from feedstock_tools.maintainer.check import listed_patches, patch_header_problem
from feedstock_tools.maintainer.patch_check import (
    BLOB_DIGITS,
    blob_problems,
    check_patch_series,
    index_ids,
    not_verified,
)
from feedstock_tools.maintainer.patch_evidence import Blob, blob_ids
from feedstock_tools.maintainer.patch_hunks import FileDiff, FileText, Hunk, Verdict, judge_patch, parse_patch

RECIPE = Path(__file__).resolve().parents[2] / "recipe"
PATCHES = sorted((RECIPE / "patches").glob("*.patch"))
# The upstream text the patches were made and checked against: one fixture, named by its release (the
# patches' base, which a recipe version change alone does not move).
(PREIMAGE,) = (Path(__file__).resolve().parents[1] / "patch_fixtures").glob("pytorch-*-preimage.txt")
EVIDENCE_VERSION = PREIMAGE.name.removeprefix("pytorch-").removesuffix("-preimage.txt")
CPU_WHEEL = Path(f"/opt/wheels/torch-{EVIDENCE_VERSION}+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
# A hunk whose 2.13.0 text is not at hand is named in its patch's header, with the reason, as
# "not verified: <path>@<first line of the hunk> (<why>)"; every other hunk must apply strictly to the 2.13.0
# lines of the fixture.


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
    assert PATCHES
    lines = (RECIPE / "meta.yaml").read_text().splitlines()
    listed = [(i, line) for i, line in enumerate(lines) if re.match(r"\s+- patches/", line)]
    assert sorted(line.split("patches/")[1].split()[0] for _, line in listed) == [p.name for p in PATCHES]
    for index, _ in listed:
        assert lines[index - 1].strip().startswith("#"), f"no comment above meta.yaml line {index + 1}"


@pytest.mark.parametrize("patch", PATCHES, ids=patch_id)
def test_patch_has_the_header_check_requires(patch):
    """check's rule (format-patch mail with Why:, Upstream status:, Context verified against:); which git
    version wrote the patch, and from which commit, is no rule."""
    assert patch_header_problem(patch.read_text()) is None


def test_a_patch_made_by_this_machines_git_format_patch_passes_the_header_rule(tmp_path):
    """`git format-patch -1` of a commit whose message has the three paragraphs: header rule met, its one
    hunk applies to the text it was made against (whatever git version this machine has)."""
    git = ["git", "-C", str(tmp_path), "-c", "user.name=Maintainer", "-c", "user.email=m@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "f.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    subprocess.run([*git, "add", "f.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "upstream"], check=True)
    (tmp_path / "f.txt").write_text((tmp_path / "f.txt").read_text().replace("line 5\n", "line five\n"))
    message = (
        "f: spell five\n\nWhy: the test needs a reason.\n\nUpstream status: not submitted (test data).\n\n"
        "Context verified against: f.txt of the commit before.\n"
    )
    subprocess.run([*git, "commit", "-qam", message], check=True)
    documented = [*git, "format-patch", "-1", "--zero-commit", f"--abbrev={BLOB_DIGITS}", "--stdout"]
    made = subprocess.run(documented, capture_output=True, text=True, check=True).stdout
    assert patch_header_problem(made) is None
    without = made.replace("Upstream status: not submitted (test data).\n", "")
    assert "'Upstream status:'" in patch_header_problem(without)
    evidence = {"f.txt": FileText.of_text("".join(f"line {n}\n" for n in range(1, 11)))}
    assert [j.verdict for j in judge_patch(made, evidence)] == [Verdict.APPLIES]
    # the documented command's index line passes check's blob rule; git's own abbreviation in a small
    # repository (7 digits: its default grows with the object count) is check's finding
    blob = git_blob_id("".join(f"line {n}\n" for n in range(1, 11)).encode())
    assert blob_problems(parse_patch(made), {"f.txt": Blob(blob[:BLOB_DIGITS], whole=True)}) == []
    plain = subprocess.run(
        [*git, "format-patch", "-1", "--stdout"], capture_output=True, text=True, check=True
    ).stdout
    (problem,) = blob_problems(parse_patch(plain), {})
    assert f"abbreviates the pre-image blob to 7 digits ({blob[:7]})" in problem


def test_check_judges_every_hunk_applied_or_declared_not_verified():
    """What check's table says of the recipe's patches (every configuration's series: here, all patches in
    meta.yaml's order, which every series is a part of): each hunk applies at the very line it names, except
    those the patch's header declares not verified, which the evidence does not hold."""
    listed = listed_patches((RECIPE / "meta.yaml").read_text())
    report = check_patch_series(RECIPE, EVIDENCE_VERSION, {"all patches": tuple(listed)})
    assert report.evidence == PREIMAGE
    declared = {(p, hunk) for p in listed for hunk in not_verified((RECIPE / p).read_text())}
    unknown = {(row.patch, row.hunk) for row in report.rows if row.verdict is Verdict.UNKNOWN}
    assert unknown == declared
    wrong = [row for row in report.rows if row.verdict is Verdict.CONFLICTS or "offset" in row.detail]
    assert not wrong, "\n".join(report.table())
    assert {row.patch for row in report.rows} == set(listed)
    assert report.preimage and report.problems == ()  # check's patch rules: the same verdict as these tests


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
            f"{CPU_WHEEL} is missing: this kind of machine ships it (pip install torch=={EVIDENCE_VERSION})"
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


# setup.py's build_ext._wrap_headers_with_macro wraps every header under torch/include in these lines (the
# 2.13.0 wheel's headers; a test below checks that unwrapping gives the feedstock patches' pre-image blobs).
HEADER_GUARD = "#if !defined(TORCH_STABLE_ONLY) && !defined(TORCH_TARGET_VERSION)\n"
HEADER_GUARD_END = (
    '\n#else\n#error "This file should not be included when either TORCH_STABLE_ONLY or TORCH_TARGET_VERSION'
    ' is defined."\n#endif  // !defined(TORCH_STABLE_ONLY) && !defined(TORCH_TARGET_VERSION)\n'
)


@dataclass
class WholeFile:
    path: str  # in the source tree
    member: str  # in the wheel
    blob: str  # abbreviated git blob id of the 2.13.0 file


def whole_files() -> list[WholeFile]:
    """The fixture's "@@ <path> whole <member> (blob X)" entries."""
    found = re.findall(r"^@@ (\S+) whole (\S+) \(blob ([0-9a-f]+)\)$", PREIMAGE.read_text(), re.M)
    return [WholeFile(*entry) for entry in found]


def wheel_source_file(member: str) -> bytes:
    """A 2.13.0 source file as the CPU wheel ships it: headers without setup.py's wrapping lines."""
    if not CPU_WHEEL.is_file():
        pytest.fail(
            f"{CPU_WHEEL} is missing: this kind of machine ships it (pip install torch=={EVIDENCE_VERSION})"
        )
    with zipfile.ZipFile(CPU_WHEEL) as wheel:
        data = wheel.read(member)
    if member.startswith("torch/include/"):
        text = data.decode()
        assert text.startswith(HEADER_GUARD) and text.endswith(HEADER_GUARD_END), member
        data = text[len(HEADER_GUARD) : -len(HEADER_GUARD_END)].encode()
    return data


def preimage_tree(destination: Path) -> list[str]:
    """The fixture's 2.13.0 lines at their line numbers (other lines: unique filler) and its whole files from
    the wheel, written under destination; their paths."""
    files: dict[str, dict[int, str]] = {}
    current: dict[int, str] = {}
    number = 0
    for line in PREIMAGE.read_text().splitlines():
        if line.startswith("@@"):
            words = line.split()
            current = {} if words[2] == "whole" else files.setdefault(words[1], {})
            number = 0 if words[2] == "whole" else int(words[2])
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
    for whole in whole_files():
        target = destination / whole.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(wheel_source_file(whole.member))
    return sorted([*files, *(whole.path for whole in whole_files())])


def git_blob_id(data: bytes) -> str:
    hashed = subprocess.run(["git", "hash-object", "--stdin"], input=data, capture_output=True, check=True)
    return hashed.stdout.decode().strip()


@pytest.mark.wheel
@pytest.mark.parametrize("whole", whole_files(), ids=lambda whole: whole.path)
def test_whole_files_are_the_2_13_0_files(whole):
    """Each whole file from the wheel is the tarball's file byte for byte: its git blob id is the pre-image id
    that conda-forge's 2.13.0 patches (which apply strictly to the tarball) name in their "index" lines."""
    assert git_blob_id(wheel_source_file(whole.member)).startswith(whole.blob)


def cut_segments() -> list[tuple[str, int, int, list[str]]]:
    """The fixture's "@@ <path> <first> cut <first>-<last> of its whole file" segments and their lines."""
    return [
        (path, int(first), int(last), body.split("\n")[:-1])
        for path, first, last, body in re.findall(
            r"^@@ (\S+) (\d+) cut \d+-(\d+) of its whole file \(blob [0-9a-f]+\)\n((?:(?!@@ ).*\n)*)",
            PREIMAGE.read_text(),
            re.M,
        )
    ]


@pytest.mark.wheel
def test_cuts_of_whole_files_are_the_wheel_files_lines():
    """The cuts (which let check judge those hunks without the wheel) are the whole files' lines."""
    wholes = {whole.path: whole for whole in whole_files()}
    cuts = cut_segments()
    assert {path for path, *_ in cuts} == set(wholes)
    for path, first, last, lines in cuts:
        text = wheel_source_file(wholes[path].member).decode().split("\n")
        assert lines == text[first - 1 : last], f"{path} {first}-{last}"


def test_segments_from_later_feedstock_patches_start_at_the_2_13_0_line():
    """A segment taken from a feedstock patch that numbers its lines after the feedstock's earlier patches
    names that number and the shift; the segment starts at the difference (the tarball's line)."""
    shifted = re.findall(
        r"^@@ \S+ (\d+) feedstock \d{4} @(\d+), less the (\d+) lines its", PREIMAGE.read_text(), re.M
    )
    assert len(shifted) == 4  # Codegen.cmake x3 (their 0017 above), Dependencies.cmake (their 0004 above)
    for start, theirs, shift in shifted:
        assert int(start) == int(theirs) - int(shift)


def file_diffs(patch: Path) -> list[FileDiff]:
    return parse_patch(patch.read_text())


def hunk_delta(hunk: Hunk) -> int:
    """Lines the hunk adds minus lines it removes."""
    return len(hunk.new_lines) - len(hunk.old_lines)


def verified_patch_text(patch: Path) -> str:
    """The patch with only the hunks its header does not call unverified (new-side numbers recomputed)."""
    skipped = not_verified(patch.read_text())
    text = ""
    for diff in file_diffs(patch):
        kept = [hunk for hunk in diff.hunks if hunk.name() not in skipped]
        if not kept:
            continue
        text += "".join(line + "\n" for line in diff.header)
        shift = 0
        for hunk in kept:
            new_start = hunk.old_start + shift if hunk.old_start else 1  # 1: a new file's
            text += f"@@ -{hunk.old_start},{len(hunk.old_lines)} +{new_start},{len(hunk.new_lines)} @@\n"
            text += "".join(line + "\n" for line in hunk.lines)
            shift += hunk_delta(hunk)
    return text


@pytest.mark.parametrize("patch", PATCHES, ids=patch_id)
def test_hunk_headers_number_the_new_side_after_the_earlier_hunks(patch):
    """GNU patch and git apply look for a hunk from its new-side line: it must follow the earlier hunks."""
    for diff in file_diffs(patch):
        delta = 0
        for hunk in diff.hunks:
            if hunk.old_start:
                assert hunk.new_start == hunk.old_start + delta, f"{patch.name}: {diff.path}@{hunk.old_start}"
            delta += hunk_delta(hunk)


@pytest.mark.parametrize("patch", PATCHES, ids=patch_id)
def test_unverified_hunks_are_named_with_the_reason(patch):
    """Each "not verified:" entry names a hunk of the patch (by its first line), and the header says it."""
    hunks = {hunk.name() for diff in file_diffs(patch) for hunk in diff.hunks}
    entries = not_verified(patch.read_text())
    assert set(entries) <= hunks, f"{patch.name}: no such hunk {set(entries) - hunks}"
    if entries:
        message = patch.read_text().split("\n---\n", 1)[0]
        assert f"Not verified against {EVIDENCE_VERSION}" in message, patch.name


def strict_apply(patch_text: str, tree: Path) -> subprocess.CompletedProcess[str]:
    """git apply --check of a patch text in tree: no fuzz (git never fuzzes), and its verbose report, which
    names any offset ("Hunk #1 succeeded at 388 (offset 2 lines)")."""
    (tree / "strict.patch").write_text(patch_text)
    if not (tree / ".git").is_dir():
        subprocess.run(["git", "init", "-q"], cwd=tree, check=True)
    command = ["git", "apply", "--check", "-v", "strict.patch"]
    return subprocess.run(command, cwd=tree, capture_output=True, text=True, check=False)


def applies_at_its_line_numbers(applied: subprocess.CompletedProcess[str]) -> bool:
    return applied.returncode == 0 and "offset" not in applied.stderr


@pytest.mark.wheel
@pytest.mark.parametrize(
    "patch", [p for p in PATCHES if verified_patch_text(p)], ids=patch_id
)  # fmt: skip
def test_verified_hunks_apply_strictly_at_their_line_numbers_to_the_2_13_0_lines(patch, tmp_path):
    """git apply (no fuzz) at the exact line numbers the hunks name: no offset, no missing context."""
    paths = preimage_tree(tmp_path)
    text = verified_patch_text(patch)
    touched = {d.path for d in file_diffs(patch) if d.hunks[0].old_start and f"+++ b/{d.path}\n" in text}
    assert set(touched) <= set(paths), (
        f"{patch.name}: no {EVIDENCE_VERSION} lines for {set(touched) - set(paths)}"
    )
    applied = strict_apply(text, tmp_path)
    assert applies_at_its_line_numbers(applied), applied.stderr


@pytest.mark.wheel
@pytest.mark.parametrize("lines", [-2, 13], ids=["2 lines up", "13 lines down"])
def test_a_hunk_at_the_wrong_line_is_rejected_even_where_its_text_matches(lines, tmp_path):
    """The check has teeth for offsets: 0011 with every hunk renumbered (as the fixture once had it, 13 lines
    down) still finds its text, and git apply succeeds, but at an offset: rejected. Same for a whole file."""
    preimage_tree(tmp_path)
    for number in ("0011", "0015"):
        (patch,) = [p for p in PATCHES if patch_id(p) == number]
        text = verified_patch_text(patch)
        assert applies_at_its_line_numbers(strict_apply(text, tmp_path))
        moved = re.sub(
            r"^@@ -(\d+),(\d+) \+(\d+),(\d+) @@",
            lambda m: f"@@ -{int(m[1]) + lines},{m[2]} +{int(m[3]) + lines},{m[4]} @@",
            text,
            flags=re.M,
        )
        applied = strict_apply(moved, tmp_path)
        assert applied.returncode == 0 and "offset" in applied.stderr  # git alone would take it
        assert not applies_at_its_line_numbers(applied)


@pytest.mark.parametrize("patch", PATCHES, ids=patch_id)
def test_a_patch_of_a_whole_file_names_its_2_13_0_blob(patch):
    """A patch of a file the fixture takes whole from the wheel names that file's blob in its "index" line
    (the id says which file the hunks were made against, as in conda-forge's patches)."""
    whole = blob_ids(PREIMAGE.read_text())
    assert {path for path, blob in whole.items() if blob.whole} == {w.path for w in whole_files()}
    assert blob_problems(file_diffs(patch), whole) == []  # check's rule (patch-blob)
    for diff in file_diffs(patch):
        if diff.path in whole and whole[diff.path].whole:
            assert index_ids(diff)[0] == whole[diff.path].blob, f"{patch.name}: {diff.path}"


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
