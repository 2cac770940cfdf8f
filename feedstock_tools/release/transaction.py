"""All or nothing: every file a bump may write is kept before its first write and put back on any failure,
or by the next run after a kill.

Every write goes through the build driver's one atomic writer (``recipe/megabuild/atomic_file.py``: a unique
temporary file beside the target, renamed over it, removed on error), so a failure never leaves a file
half-written; :func:`all_or_nothing` then restores the bytes and modes of every file that was there and
removes every file and directory the failed run added, tracked or not. The snapshot is also written to the
tree's journal (:mod:`feedstock_tools.common.tree_journal`) before the first write: a SIGKILL, an OOM kill
or a power loss leaves it, and the next ``bump`` or ``check`` puts the tree back from it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from feedstock_tools.common import full_device
from feedstock_tools.common.errors import ToolError
from feedstock_tools.common.feedstock import CI_SUPPORT
from feedstock_tools.common.tree_journal import Journal, Snapshot

# Directories (whole) and files, relative to the feedstock root, that the bump or render-ci may write or
# chmod: the recipe's two files, the v1 recipe, the release's patch evidence, render-ci's files and modes,
# and the anchor-parity document.
WRITTEN: tuple[str, ...] = (
    "recipe/meta.yaml",
    "recipe/conda_build_config.yaml",
    "recipe-v1",
    "tests/patch_fixtures",
    CI_SUPPORT,
    ".github",
    "templates",
    ".scripts",
    "build-locally.py",
    "docs/reference/anchor-parity.md",
)


def all_or_nothing(root: Path, body: Callable[[], None], what: str, names: Sequence[str] = WRITTEN) -> None:
    """Run ``body``, which may write below ``names`` of ``root``; ``what`` names the run in its journal.

    The files below ``names`` are kept, in memory and in the journal, before ``body`` runs. When it returns,
    the journal is marked finished and removed. When it raises anything (a failed write, render or row, an
    interruption), every file is put back, the journal removed, and the exception raised again; a restore
    that cannot put everything back (a full disk) goes on past each failure and then raises one
    :class:`ToolError` naming the failure and what it could not put back, the journal kept for the next
    ``bump`` or ``check`` to finish the restore.
    """
    snapshot = Snapshot.take(root, names)
    journal = Journal(root)
    journal.begin(snapshot, what)
    failure: BaseException | None = None
    try:
        body()
        journal.finish()  # recorded as finished, then removed: all of it done, or put back below
    except BaseException as exc:  # put back on anything, then raised again below
        failure = exc
    if failure is None:
        return
    failed = snapshot.restore()
    if not failed:
        journal.drop()
        raise failure
    journal.keep()
    # raised here, outside the except block, so that the line below is what is printed: chained to a full
    # device, the CLI would print that device's line alone, without the files still to put back
    full = full_device.full_error(failure)
    cause = full_device.full_device_line(full) if full is not None else f"{type(failure).__name__}: {failure}"
    raise ToolError(
        f"{what} failed ({cause}); putting {root} back, {len(failed)} could not be put back: "
        f"{', '.join(failed)}; its journal {journal.snapshot} is kept: fix that and run check or the bump "
        "again to put them back"
    )
