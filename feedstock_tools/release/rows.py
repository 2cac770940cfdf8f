"""The bump's report: one :class:`Row` per thing it checked or changed, and the table they print as."""

from __future__ import annotations

from dataclasses import dataclass

CHANGED = "changed"
SAME = "unchanged"
PERSON = "needs a person"


@dataclass(frozen=True)
class Row:
    area: str
    item: str
    old: str
    new: str
    status: str
    action: str = ""


def examples(paths: list[str], count: int = 3) -> str:
    """The first ``count`` of ``paths`` and how many more there are."""
    return ", ".join(paths[:count]) + (f" (+{len(paths) - count} more)" if len(paths) > count else "")


def format_table(rows: list[Row]) -> str:
    lines = ["| area | item | was | now | status | what to do |", "|---|---|---|---|---|---|"]
    for row in rows:
        cells = [
            row.area,
            row.item,
            row.old,
            row.new,
            f"**{row.status}**" if row.status == PERSON else row.status,
            row.action,
        ]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines)
