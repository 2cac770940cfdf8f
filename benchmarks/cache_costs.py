"""What a host prefix costs per rehearsal step, made from a venv template of the per-user cache: hard links
(what the harness does) against copies, and the check of the template against its manifest, by stat and with
digests (docs/reference/per-user-cache.md). Run by hand, not by CI; it makes the template first when needed:

    python benchmarks/cache_costs.py --cache /tmp/cache-costs 3.12

CPU seconds of this process (user + system), the median of ``--repeat`` runs each, so other load on the
machine does not inflate them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # feedstock_tools puts recipe/ (the driver) on the path itself

from feedstock_tools.common import cache_store  # noqa: E402
from feedstock_tools.proofs.rehearsal import prefixes  # noqa: E402


def cpu_seconds(
    action: Callable[[], object], repeat: int, before: Callable[[], object] = lambda: None
) -> float:
    times = []
    for _ in range(repeat):
        before()
        start = os.times()
        action()
        end = os.times()
        times.append((end.user - start.user) + (end.system - start.system))
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("python", help="the template's CPython, e.g. 3.12")
    parser.add_argument("--cache", type=Path, required=True, help="the store to make or find the template in")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    template = prefixes.venv_template(args.cache, args.python, args.cache.parent / "cache-costs.log")
    files = sum(1 for _ in template.rglob("*"))
    size = sum(p.lstat().st_size for p in template.rglob("*") if p.is_file())
    with tempfile.TemporaryDirectory() as scratch:
        prefix = Path(scratch) / "h_env"

        def clear() -> None:
            shutil.rmtree(prefix, ignore_errors=True)

        rows = {
            "hard links (prefixes.link_tree)": cpu_seconds(
                lambda: prefixes.link_tree(template, prefix), args.repeat, clear
            ),
            "copies (shutil.copytree, copy2)": cpu_seconds(
                lambda: shutil.copytree(template, prefix, symlinks=True), args.repeat, clear
            ),
            "check by stat": cpu_seconds(lambda: cache_store.check(template, digests=False), args.repeat),
            "check with digests": cpu_seconds(lambda: cache_store.check(template, digests=True), args.repeat),
        }
    print(f"{template.name}: {files} entries, {size / 1e6:.1f} MB")
    for what, seconds in rows.items():
        print(f"  {what:<36} {seconds:6.3f} s of CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
