"""``cache``: what the per-user cache keeps (its stores, entries, sizes and last uses), checked and pruned.

The cache (common/user_cache.py) is shared by every checkout on the machine; its entries
(common/cache_store.py) are venv templates, BUILD_PREFIX, the stand-in's libmagma, local channels and wheel
packages. They are removed by age and size after each new one is made; this command shows them and removes
them by hand.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from feedstock_tools.common import cache_store, user_cache
from feedstock_tools.common.errors import ToolError

_MB = 1e6


def _age(now: float, then: float) -> str:
    return f"{time.strftime('%Y-%m-%d', time.localtime(then))} ({(now - then) / 86400:.0f} d ago)"


def _stores(root: Path) -> list[Path]:
    if not root.is_dir():
        raise ToolError(f"--cache-dir {root} does not exist or is not a directory: nothing is cached there")
    return cache_store.stores(root) or [root]


def list_cache(root: Path) -> list[str]:
    """The lines of ``cache list``: per store, each entry with its kind, size and last use."""
    now = time.time()
    lines: list[str] = []
    total = 0
    for store in _stores(root):
        items = cache_store.listing(store)
        leftovers = cache_store.leftovers(store)
        if not items and not leftovers:
            continue
        lines.append(f"{store}:")
        for item in reversed(items):  # the most recently used first
            kind = item.manifest.key.kind if item.manifest else "left by older tools (no manifest)"
            lines.append(
                f"  {item.path.name:<34} {kind:<10} {item.size / _MB:9.1f} MB  {_age(now, item.last_use)}"
            )
            total += item.size
        if leftovers:
            lines.append(f"  {len(leftovers)} leftover(s) of stopped makers in .staging/.trash")
    limit = cache_store.max_bytes()
    lines.append(
        f"total {total / _MB:.1f} MB; each store is kept under {limit / 1024**3:.1f} GiB "
        f"(${cache_store.MAX_BYTES_ENV}) and entries unused for {cache_store.MAX_AGE_DAYS:.0f} days go"
    )
    return lines


def verify_cache(root: Path) -> tuple[list[str], int]:
    """Every entry compared with its manifest, digests included: the problem lines and their count."""
    lines: list[str] = []
    problems = 0
    for store in _stores(root):
        for item in cache_store.listing(store):
            if item.manifest is None:
                continue  # never reused: what older tools left (prune removes it)
            problem = cache_store.check(item.path, digests=True)
            if problem is not None:
                problems += 1
                lines.append(f"{item.path}: {problem} (its next use makes it again)")
    lines.append(f"{problems} entr{'y' if problems == 1 else 'ies'} not as made")
    return lines, problems


def prune_cache(root: Path, older_than_days: float | None) -> list[str]:
    """Removes the entries unused for ``older_than_days`` (every entry when None), and stopped makers'
    leftovers; an entry another run holds is left, with a line."""
    now = time.time()
    lines: list[str] = []
    freed = 0
    for store in _stores(root):
        for item in cache_store.listing(store):
            if older_than_days is not None and now - item.last_use < older_than_days * 86400:
                continue
            size = item.size
            if cache_store.remove_entry(store, item.path, wait=False):
                freed += size
                lines.append(f"removed {item.path} ({size / _MB:.1f} MB)")
            else:
                lines.append(f"kept {item.path}: another run holds its lock")
        for leftover in cache_store.remove_leftovers(store):
            lines.append(f"removed {leftover} (left by a stopped maker)")
    lines.append(f"freed {freed / _MB:.1f} MB")
    return lines


def run(args: argparse.Namespace) -> int:
    root = args.cache_dir if args.cache_dir is not None else user_cache.tool_cache()
    if args.action == "list":
        print("\n".join(list_cache(root)))
        return 0
    if args.action == "verify":
        lines, problems = verify_cache(root)
        print("\n".join(lines))
        return 1 if problems else 0
    if not args.all and args.older_than is None:
        raise ToolError("cache prune: say what to remove: --older-than DAYS or --all")
    print("\n".join(prune_cache(root, None if args.all else args.older_than)))
    return 0


def _days(text: str) -> float:
    try:
        days = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of days") from None
    if days < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative: give a number of days, e.g. 14")
    return days


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cache",
        help="list, verify or prune the per-user cache (venv templates, local channels, ...)",
        description=(
            "The per-user cache every checkout on this machine shares "
            f"({user_cache.tool_cache()}; ${user_cache.CACHE_ENV} moves it): the rehearsal's venv "
            "templates, BUILD_PREFIX and libmagma, the local channels and their wheel packages. Each entry "
            "is remade when it no longer matches its manifest; entries unused for "
            f"{cache_store.MAX_AGE_DAYS:.0f} days, then the least recently used past the size bound, are "
            "removed after each new one is made."
        ),
    )
    parser.add_argument(
        "action",
        choices=("list", "verify", "prune"),
        help="list: entries, sizes, last uses; verify: compare every entry with its manifest, digests "
        "included (exit 1 when one differs); prune: remove entries (with --older-than or --all)",
    )
    parser.add_argument(
        "--cache-dir", type=Path, help=f"the cache's root (default: {user_cache.tool_cache()})"
    )
    parser.add_argument("--older-than", type=_days, metavar="DAYS", help="prune: entries unused for DAYS")
    parser.add_argument("--all", action="store_true", help="prune: every entry no run holds now")
    parser.set_defaults(func=run)
