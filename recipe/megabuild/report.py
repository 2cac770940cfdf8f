"""build/megabuild-report.json: what every pass compiled, and the table printed after each pass."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from megabuild.atomic_file import write_text
from megabuild.errors import MegabuildError

REPORT_NAME = "megabuild-report.json"


@dataclass
class PassRecord:
    pass_name: str  # "1 libtorch-split", "3 libtorch-cuda-linalg (magma)", "4 pytorch (py3.12)", ...
    package: str
    seconds: float
    targets_rebuilt: list[str] = field(default_factory=list)  # linked libraries/executables
    # the objects the compiler compiled: what ninja ran, less what the compiler cache served
    objects_compiled: list[str] = field(default_factory=list)
    objects_by_target: dict[str, int] = field(default_factory=dict)
    expected_targets: list[str] | None = None  # None: any (pass 1)
    unexpected_objects: list[str] = field(default_factory=list)
    cache_changes: list[str] = field(default_factory=list)
    staged_files: int = 0
    # objects ninja ran that the compiler cache served (megabuild/compiler_cache.py): no compile
    objects_from_cache: list[str] = field(default_factory=list)


def load(build_dir: Path) -> list[PassRecord]:
    path = build_dir / REPORT_NAME
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [PassRecord(**record) for record in data["passes"]]
    except (ValueError, TypeError, KeyError) as exc:  # bad JSON or UTF-8, not our records
        raise MegabuildError(
            f"{path} is corrupt ({type(exc).__name__}: {str(exc)[:80]}): delete it; pass 1 starts a new one "
            "and later passes add their records again"
        ) from None


def append(build_dir: Path, record: PassRecord, fresh: bool = False) -> list[PassRecord]:
    """Add ``record`` (``fresh``: start a new report, as pass 1 does) and write the file atomically.

    A record of the same pass replaces the old one, so running a pass again (after an interruption) leaves
    one record per pass. A failed write leaves the old report and no temporary file."""
    records = [] if fresh else [r for r in load(build_dir) if r.pass_name != record.pass_name]
    records.append(record)
    payload = {"format": 1, "passes": [asdict(r) for r in records]}
    build_dir.mkdir(parents=True, exist_ok=True)
    write_text(build_dir / REPORT_NAME, json.dumps(payload, indent=1, sort_keys=True) + "\n")
    return records


def table(records: list[PassRecord]) -> str:
    """pass | targets rebuilt | objects compiled | from cache | seconds, one line per pass and a total."""
    header = ("pass", "targets rebuilt", "objects compiled", "from cache", "seconds")
    rows = [
        (
            r.pass_name,
            str(len(r.targets_rebuilt)),
            str(len(r.objects_compiled)),
            str(len(r.objects_from_cache)),
            f"{r.seconds:.1f}",
        )
        for r in records
    ]
    rows.append(
        (
            "total",
            str(sum(len(r.targets_rebuilt) for r in records)),
            str(sum(len(r.objects_compiled) for r in records)),
            str(sum(len(r.objects_from_cache) for r in records)),
            f"{sum(r.seconds for r in records):.1f}",
        )
    )
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        ).rstrip()
        for row in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.insert(len(lines) - 1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
