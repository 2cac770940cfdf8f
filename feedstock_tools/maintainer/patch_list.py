"""``patches``: meta.yaml's ``source: patches:`` list written from ``recipe/patches/``, and the pre-image
lines of a new patch's hunks cut from the release's source tree.

conda-build applies exactly the paths ``source/patches`` lists (26.7.1 ``source.py:1138-1143``: each entry
joined to the recipe directory, no pattern), and no function of its Jinja context lists a directory
(``jinja_context.py:704-790``; the file-reading ones make it fetch the source before rendering,
docs/reference/recipe.md), so the list stays literal YAML and this command keeps it in step with the
directory: every
``*.patch`` file in number order, each with a comment above it (kept where the entry exists; a new one gets
its patch's subject) and a line selector where its header has a ``Selector: [...]`` line (or the entry had
one). With ``--source DIR`` (the release's tree the patch was made in: ``git clone --branch vX.Y.Z``), every
hunk of a listed patch whose lines the evidence lacks and whose header does not declare it not verified gets
its lines cut from DIR into the evidence ``check`` reads (``tests/patch_fixtures/pytorch-<version>-
preimage.txt``): the hunk must stand in DIR at the very line its ``@@`` names. Then recipe-v1/ is converted
again (convert-v1). ``check`` reports a list that is not what this command writes.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import textwrap
from collections.abc import Sequence
from pathlib import Path

from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.feedstock import Feedstock
from feedstock_tools.common.recipe_imports import REPO_ROOT
from feedstock_tools.conda import recipe_v1
from feedstock_tools.conda.recipe_render import render_recipe
from feedstock_tools.maintainer import patch_evidence, patch_hunks
from feedstock_tools.maintainer.patch_check import index_ids, not_verified
from feedstock_tools.maintainer.patch_entries import Entry, read_entries, with_entries

COMMAND = "python -m feedstock_tools patches"
PATCH_SUFFIX = ".patch"
# a patch header's optional line naming the configurations it is for, as a meta.yaml line selector
_SELECTOR = re.compile(r"^Selector:\s*\[(?P<selector>[^\[\]]+)\]\s*$", re.MULTILINE)
_SUBJECT = re.compile(r"^Subject: (?:\[PATCH[^\]]*\] )?(?P<text>.*(?:\n .*)*)", re.MULTILINE)
CONTEXT = 3  # lines kept around a hunk's old lines when cutting them from the source tree
WIDTH = 110


def subject(patch_text: str) -> str:
    """The patch's subject, its folded lines joined, without ``[PATCH n/m]``."""
    match = _SUBJECT.search(patch_text.split("\n---\n", 1)[0])
    return " ".join(match["text"].split()) if match else ""


def header_selector(patch_text: str) -> str | None:
    match = _SELECTOR.search(patch_text.split("\n---\n", 1)[0])
    return match["selector"].strip() if match else None


def _comment(text: str) -> tuple[str, ...]:
    return tuple(f"    # {line}" for line in textwrap.wrap(text, WIDTH - 6)) or ("    # (no subject)",)


def wanted_entries(recipe_dir: Path, listed: Sequence[Entry]) -> list[Entry]:
    """What the list should be: every patch file in number order, a listed one with its comments and its
    selector (the header's where it has one), a new one with its subject and its header's selector."""
    by_path = {entry.path: entry for entry in listed}
    entries = []
    for patch in sorted((recipe_dir / "patches").glob(f"*{PATCH_SUFFIX}")):
        path = patch.relative_to(recipe_dir).as_posix()
        text = patch.read_text(encoding="utf-8", errors="replace")
        old = by_path.get(path)
        selector = header_selector(text) or (old.selector if old else None)
        comments = old.comments if old and old.comments else _comment(subject(text))
        entries.append(Entry(path, selector, comments))
    return entries


def differences(recipe_dir: Path) -> list[tuple[str, str, str]]:
    """(rule, where, what) per difference between meta.yaml's list and what this command writes."""
    listed = read_entries((recipe_dir / "meta.yaml").read_text(encoding="utf-8"))
    wanted = wanted_entries(recipe_dir, listed)
    found = []
    listed_paths, wanted_paths = [e.path for e in listed], [e.path for e in wanted]
    fix = f"run: {COMMAND}"
    for path in wanted_paths:
        if path not in listed_paths:
            found.append(
                ("patch-unlisted", f"recipe/{path}", f"patch file is not listed in meta.yaml ({fix})")
            )
    for entry in listed:
        if entry.path not in wanted_paths:
            found.append(
                (
                    "patch-missing",
                    f"recipe/{entry.path}",
                    f"listed in meta.yaml but the file is missing ({fix})",
                )
            )
    by_path = {entry.path: entry for entry in listed}
    for entry in wanted:
        old = by_path.get(entry.path)
        if old is None:
            continue
        if old.selector != entry.selector:
            found.append(
                (
                    "patch-list",
                    f"recipe/{entry.path}",
                    f"meta.yaml's selector [{old.selector or ''}] is not its header's Selector: "
                    f"[{entry.selector or ''}] ({fix})",
                )
            )
        if not old.comments:
            found.append(
                ("patch-list", f"recipe/{entry.path}", f"no comment above its meta.yaml line ({fix})")
            )
    if not found and listed_paths != wanted_paths:
        found.append(
            ("patch-list", "recipe/meta.yaml", f"the patches are not listed in number order ({fix})")
        )
    return found


def listed_text(meta_text: str, recipe_dir: Path) -> str:
    """meta.yaml with its patch list as this command writes it."""
    return with_entries(meta_text, wanted_entries(recipe_dir, read_entries(meta_text)))


# ---- the pre-image lines of new hunks, cut from the release's source tree ---------------------------------


def _blob(data: bytes) -> str:
    """git's blob id of a file's bytes (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def cut_segments(recipe_dir: Path, evidence_file: Path, source: Path) -> list[str]:
    """The evidence's new segments: each unknown, undeclared hunk of a listed patch, from ``source``."""
    lines = patch_evidence.read_segments(evidence_file) if evidence_file.is_file() else {}
    segments: list[str] = []
    listed = read_entries((recipe_dir / "meta.yaml").read_text(encoding="utf-8"))
    for entry in listed:
        patch = recipe_dir / entry.path
        if not patch.is_file():
            continue
        text = patch.read_text(encoding="utf-8", errors="replace")
        declared = not_verified(text)
        for diff in patch_hunks.parse_patch(text):
            wanted = [
                judgement.hunk
                for judgement in patch_hunks.judge_patch([diff], lines)
                if judgement.verdict is patch_hunks.Verdict.UNKNOWN and judgement.hunk.name() not in declared
            ]
            if wanted:
                data, read_from = _pre_image(source, diff, patch.name)
                segments += [_segment(data, read_from, hunk, patch.name, source) for hunk in wanted]
    return segments


def _pre_image(source: Path, diff: patch_hunks.FileDiff, patch: str) -> tuple[bytes, str]:
    """The file the diff was made against, and how the evidence names it: the blob its ``index`` line names,
    from the tree's git objects (the tree may hold the patched file by now: the commit the patch was made
    from), else the tree's file as it is."""
    path = diff.old_path or diff.path
    ids = index_ids(diff)
    if ids is not None and (source / ".git").exists():
        shown = subprocess.run(
            ["git", "-C", str(source), "cat-file", "blob", ids[0]], capture_output=True, check=False
        )
        if shown.returncode != 0:
            raise ToolError(
                f"{patch}: {path}: {source} has no blob {ids[0]} (the patch's pre-image); pass the release's "
                "clone the patch was made in"
            )
        return shown.stdout, f"blob {ids[0]} of {source}"
    file = source / path
    try:
        return file.read_bytes(), str(file)
    except OSError as exc:
        raise ToolError(
            f"{patch}: cannot read {file} ({exc.strerror}); pass --source the release's tree the patch was "
            "made in"
        ) from exc


def _segment(data: bytes, read_from: str, hunk: patch_hunks.Hunk, patch: str, source: Path) -> str:
    """The hunk's old lines and CONTEXT lines around them in the evidence format; a ToolError when the file
    (``read_from``) does not hold them at the hunk's line."""
    text = patch_hunks.FileText.of_text(data.decode("utf-8", errors="replace"))
    judged = patch_hunks.judge_hunk(hunk, text)
    if judged.verdict is not patch_hunks.Verdict.APPLIES or judged.offset:
        raise ToolError(
            f"{patch}: {hunk.name()} does not stand at its line in {read_from} ({judged.detail}); make the "
            "patch again on the release's tag (docs/guides/add-a-patch.md), or pass the tree it was made in"
        )
    first = max(1, hunk.old_start - CONTEXT)
    last = min(len(text.lines), hunk.old_start + len(hunk.old_lines) - 1 + CONTEXT)
    body = "".join(text.lines[n] + "\n" for n in range(first, last + 1))
    source_name = f"source tree {source.name} lines {first}-{last}"
    return f"@@ {hunk.path} {first} {source_name} (blob {_blob(data)[:11]})\n{body}"


def recipe_version(root: Path) -> str:
    """The version meta.yaml renders to (its first .ci_support configuration's render)."""
    feedstock = Feedstock(root)
    configs = feedstock.configuration_files()
    if not configs:
        raise ToolError(
            f"no configuration in {feedstock.ci_support}: run python -m feedstock_tools render-ci"
        )
    rendered = render_recipe(feedstock.recipe_dir, feedstock.configuration(configs[0]))
    return rendered.outputs[0].version


EVIDENCE_HEADER = """\
# Pre-image lines of PyTorch {version} that the recipe's patches touch, at their line numbers, for `check`
# and tests/recipe/test_recipe_patches.py (the other lines of each file are not here).
# Format (feedstock_tools/maintainer/patch_evidence.py): '@@ <path> <first line> <source>', then the lines;
# '@@ <path> whole <wheel member> (blob X)' names a file a release wheel ships whole.
"""


def run(args: argparse.Namespace) -> int:
    root: Path = args.root
    recipe_dir = root / "recipe"
    meta = recipe_dir / "meta.yaml"
    if not meta.is_file():
        raise ToolError(f"{meta} not found: pass the feedstock root with --root")
    if args.check:
        found = differences(recipe_dir)
        for _, where, what in found:
            print(f"{where}: {what}")
        if found:
            raise ToolError(f"{len(found)} difference(s) in meta.yaml's patch list; run: {COMMAND}")
        print("meta.yaml lists every patch of recipe/patches/")
        return 0
    from megabuild import atomic_file

    meta_text = meta.read_text(encoding="utf-8")
    new_text = listed_text(meta_text, recipe_dir)
    changes = []
    if new_text != meta_text:
        atomic_file.write_text(meta, new_text)
        changes.append("wrote recipe/meta.yaml's patch list")
    if args.source is not None:
        if not args.source.is_dir():
            raise ToolError(f"--source {args.source}: not a directory; pass the release's source tree")
        version = recipe_version(root)
        evidence = patch_evidence.evidence_fixture(version, root / "tests" / "patch_fixtures")
        segments = cut_segments(recipe_dir, evidence, args.source)
        if segments:
            before = (
                evidence.read_text(encoding="utf-8")
                if evidence.is_file()
                else EVIDENCE_HEADER.format(version=version)
            )
            atomic_file.write_text(evidence, before + "".join(segments))
            changes.append(f"wrote {len(segments)} segment(s) to {evidence.relative_to(root)}")
    changes += recipe_v1.write(root)
    for change in changes or ["nothing to change"]:
        print(change)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "patches",
        help="write meta.yaml's patch list from recipe/patches/ (and new hunks' evidence with --source)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="feedstock root (default: %(default)s)")
    parser.add_argument(
        "--source",
        type=Path,
        help="the release's source tree the patches were made in: cut the lines of every hunk the evidence "
        "lacks from it into tests/patch_fixtures",
    )
    parser.add_argument("--check", action="store_true", help="report a stale list instead of writing")
    parser.set_defaults(func=run)
