"""``python -m feedstock_tools <subcommand>``: the maintainer tools of this feedstock, one CLI.

Each tool module exposes ``register(subparsers)``, which adds its subcommand (``SUBCOMMANDS`` names it) and
sets ``func`` on the parsed arguments to a callable returning the exit status.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from feedstock_tools.common import closed_pipe, full_device, interruption
from feedstock_tools.common.errors import ToolError

# Each subcommand and the module (dotted path under feedstock_tools) that registers it, in the order `--help`
# lists them. Add yours on its own line.
SUBCOMMANDS: dict[str, str] = {
    "deps": "maintainer.deps",
    "graph": "maintainer.graph",
    "cache-diff": "maintainer.cache_diff",
    "cache": "maintainer.tool_cache",
    "check": "maintainer.check",
    "patches": "maintainer.patch_list",
    "python-floor": "maintainer.python_floor",
    "rehearse": "proofs.rehearsal",
    "render": "conda.recipe_render",
    "wheel-layout": "proofs.wheels.wheel_layout",
    "gpu-check": "proofs.gpu_check",
    "render-ci": "ci.ci_support",
    "solve-check": "proofs.solve.solve_check",
    "anchor-parity": "maintainer.anchor_parity",
    "real-build": "proofs.builders.real_build",
    "convert-v1": "conda.recipe_v1",
    "render-v1": "maintainer.render_v1",
    "bump": "release.bump",
}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand; of only the one ``argv`` names, when it names one. Importing all
    fifteen modules (Jinja, PyYAML, rattler, the harness) was most of every command's start
    (docs/records/2026-11-28-ci-time.md): one module is imported for the command that runs, every module
    only for the top-level help and errors, which list them all."""
    parser = argparse.ArgumentParser(
        prog="python -m feedstock_tools",
        description="Maintainer tools of the pytorch feedstock. Run a subcommand with --help for details.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND")
    words = [word for word in (sys.argv[1:] if argv is None else argv) if not word.startswith("-")]
    chosen = words[0] if words and words[0] in SUBCOMMANDS else None
    for command, module in SUBCOMMANDS.items():
        if chosen in (None, command):
            importlib.import_module(f"feedstock_tools.{module}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser(argv).parse_args(argv)
    # Every subcommand: SIGINT/SIGTERM/SIGHUP sent to this process alone (`kill`, `timeout`, a CI cancel)
    # end in cleanup and one line, never a traceback or a silent death (docs/reference/failure-modes.md).
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
