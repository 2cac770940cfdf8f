"""The README and docs/ hold together (issue 45): every relative link resolves to a file of the
repository and, into a Markdown page, to one of its headings; every ``docs/….md`` a file of the repository
names exists; no page grows past what a reader takes in; docs/ keeps its three folders, guides open with
their command and records are named by their date.

Anchors are GitHub's heading ids (evidence rank 3: GitHub's documentation, "Basic writing and formatting
syntax", section "Section links"): the heading's text without its markup, lower-cased, every character that
is not a letter, digit, ``_``, ``-`` or space dropped, each space turned into ``-``, and a repeated id
suffixed ``-1``, ``-2``, …. Every anchor the docs used before this test, written against GitHub's rendering,
resolves under that rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
README = REPO / "README.md"
FOLDERS = ("guides", "reference", "records")
MAX_PAGE_LINES = 400
MAX_README_LINES = 150

# what a checkout holds besides its own files (.gitignore), never scanned for mentions
NOT_SCANNED = {
    ".git",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".venv",
    "build_artifacts",
    "miniforge3",
    ".rehearsal",
    ".rattler-build",
    ".conda-build",
}
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".sh", ".bat", ".tmpl", ".cfg", ".json", ""}

FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(`+).+?\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# a docs page named in any file: not part of a longer path (../shared/docs/…, https://…/docs/…)
DOCS_MENTION = re.compile(r"(?<![\w./-])docs/[\w./-]*?\.md\b")


def mentioning_files() -> Iterator[Path]:
    for path in sorted(REPO.rglob("*")):
        parts = path.relative_to(REPO).parts
        if any(part in NOT_SCANNED or part.endswith(".egg-info") for part in parts):
            continue
        if path.is_file() and path.suffix in TEXT_SUFFIXES and path.stat().st_size < 1_000_000:
            yield path


def pages() -> list[Path]:
    """The pages a reader reads in turn: the README and docs/."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def markdown_files() -> list[Path]:
    """Every Markdown file of the repository (the stand-ins' READMEs link into docs/ too)."""
    return [path for path in mentioning_files() if path.suffix == ".md"]


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """Each line outside fenced code blocks, with its number."""
    fence = ""
    for number, line in enumerate(text.splitlines(), start=1):
        opened = FENCE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = ""
            continue
        if opened:
            fence = opened.group(1)
            continue
        yield number, line


def slug(heading: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in prose_lines(page.read_text(encoding="utf-8")):
        heading = HEADING.match(line)
        if not heading:
            continue
        base = slug(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path, text: str | None = None) -> list[str]:
    problems = []
    where = page.relative_to(REPO)
    for number, line in prose_lines(page.read_text(encoding="utf-8") if text is None else text):
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            path_part, _, anchor = target.partition("#")
            resolved = (page.parent / path_part).resolve() if path_part else page
            if not resolved.is_relative_to(REPO) or not resolved.exists():
                problems.append(f"{where}:{number}: {target}: no such file in the repository")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                problems.append(
                    f"{where}:{number}: {target}: {resolved.relative_to(REPO)} has no heading #{anchor}"
                )
    return problems


@pytest.mark.parametrize("page", markdown_files(), ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_heading_ids_as_github_makes_them() -> None:
    assert (
        slug("Which GPUs a CUDA build runs on (`__cuda_arch`)")
        == "which-gpus-a-cuda-build-runs-on-__cuda_arch"
    )
    assert slug("The real conda-build (`real-build --builder conda-build`)") == (
        "the-real-conda-build-real-build---builder-conda-build"
    )
    assert slug("Real binaries: every target's wheel, bundled libraries, linkage") == (
        "real-binaries-every-targets-wheel-bundled-libraries-linkage"
    )


def test_a_missing_file_a_missing_heading_and_a_link_outside_are_named() -> None:
    """The check bites; links inside code are not links; a repeated heading's id takes its number."""
    page = DOCS / "README.md"
    text = (
        "[gone](reference/no-such-page.md)\n"
        "```\n[in code](nowhere.md)\n```\n"
        "[outside](../../shared/x.md) `[in code](y.md)`\n"
        "[anchor](reference/architecture.md#no-such-heading)\n"
        "[ok](reference/architecture.md#layout-and-owners) [self](#) [web](https://example.org/x.md)\n"
    )
    assert broken_links(page, text) == [
        "docs/README.md:1: reference/no-such-page.md: no such file in the repository",
        "docs/README.md:5: ../../shared/x.md: no such file in the repository",
        "docs/README.md:6: reference/architecture.md#no-such-heading: "
        "docs/reference/architecture.md has no heading #no-such-heading",
    ]


def test_a_repeated_heading_gets_a_numbered_id(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n## Measured\n```\n## not a heading\n```\n### Measured\n", encoding="utf-8")
    assert anchors(page) == {"title", "measured", "measured-1"}


def test_every_docs_page_a_file_names_exists() -> None:
    missing = []
    for path in mentioning_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            missing += [
                f"{path.relative_to(REPO)}:{number}: {name}"
                for name in DOCS_MENTION.findall(line)
                if not (REPO / name).is_file()
            ]
    assert missing == []


def test_no_page_is_longer_than_a_reader_takes_in() -> None:
    long = [
        f"{page.relative_to(REPO)}: {lines} lines"
        for page in pages()
        if (lines := len(page.read_text(encoding="utf-8").splitlines()))
        > (MAX_README_LINES if page == README else MAX_PAGE_LINES)
    ]
    assert long == []


def test_docs_is_guides_reference_and_records() -> None:
    stray = [
        str(page.relative_to(DOCS))
        for page in DOCS.rglob("*.md")
        if page != DOCS / "README.md" and page.relative_to(DOCS).parts[0] not in FOLDERS
    ]
    assert stray == []
    undated = [
        page.name
        for page in (DOCS / "records").glob("*.md")
        if not re.match(r"\d{4}-\d{2}-\d{2}-", page.name)
    ]
    assert undated == []


def test_every_guide_opens_with_its_command() -> None:
    """After the title, the first thing a guide shows is a code block: the command of its task."""
    late = []
    for guide in sorted((DOCS / "guides").glob("*.md")):
        lines = [line for line in guide.read_text(encoding="utf-8").splitlines() if line.strip()]
        if not (lines and lines[0].startswith("# ") and len(lines) > 1 and FENCE.match(lines[1])):
            late.append(guide.name)
    assert late == []
