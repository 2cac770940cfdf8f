"""``python -m feedstock_tools <subcommand>``: the maintainer tools of this feedstock, one CLI.

Each tool module exposes ``register(subparsers)``, which adds its subcommand and sets ``func`` on the
parsed arguments to a callable returning the exit status.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from feedstock_tools.common import closed_pipe, full_device, interruption
from feedstock_tools.common.errors import ToolError

# Modules that provide subcommands (dotted paths under feedstock_tools), in the order `--help` lists them.
# Add yours on its own line.
TOOL_MODULES: tuple[str, ...] = (
    "maintainer.deps",
    "maintainer.graph",
    "maintainer.cache_diff",
    "maintainer.check",
    "proofs.rehearsal",
    "conda.recipe_render",
    "proofs.wheels.wheel_layout",
    "proofs.gpu_check",
    "ci.ci_support",
    "proofs.solve.solve_check",
    "maintainer.anchor_parity",
    "proofs.builders.real_build",
    "conda.recipe_v1",
    "maintainer.render_v1",
    "release.bump",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m feedstock_tools",
        description="Maintainer tools of the pytorch feedstock. Run a subcommand with --help for details.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND")
    for name in TOOL_MODULES:
        importlib.import_module(f"feedstock_tools.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Every subcommand: SIGINT/SIGTERM/SIGHUP sent to this process alone (`kill`, `timeout`, a CI cancel)
    # end in cleanup and one line, never a traceback or a silent death (docs/failure-modes.md).
    try:
        with interruption.handled():
            return int(args.func(args) or 0)
    except (ToolError, OSError) as exc:
        # A full device is the cause wherever it shows up (a write of the command's own, or below a
        # ToolError that wrapped it): one line naming the device, never a traceback or another blame.
        full = full_device.full_error(exc)
        if full is not None:
            print(f"error: {full_device.full_device_line(full)}", file=sys.stderr)
            return 1
        if isinstance(exc, OSError):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except interruption.Interrupted as exc:
        resume = getattr(args, "resume_hint", "run the same command again")
        line = interruption.interrupted_line(f"python -m feedstock_tools {args.command}", exc, resume)
        print(line, file=sys.stderr, flush=True)
        return exc.exit_status


if __name__ == "__main__":
    try:
        status = main()
        closed_pipe.flush()
    except BrokenPipeError:  # `python -m feedstock_tools rehearse --list | head -1`
        closed_pipe.quiet_exit()
    sys.exit(status)
