"""Standard output closed by its reader (``./build-locally.py --list | head -1``): a quiet exit.

Python ignores SIGPIPE, so a write to a pipe nobody reads raises BrokenPipeError, and the flush at exit raises
it again. The Python documentation's recipe (the ``signal`` module, "Note on SIGPIPE"): flush inside the
handler, then point standard output at ``os.devnull`` so the flush at exit has nowhere to fail, and exit 1,
"Python exits with error code 1 on EPIPE". Standard library only (``build-locally.py`` uses it).
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn


def flush() -> None:
    """Flush standard output inside the entry point's handler, so a closed pipe is seen there."""
    sys.stdout.flush()


def quiet_exit() -> NoReturn:
    """After BrokenPipeError: nothing more is written to the closed pipe, no traceback, exit status 1."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(1)
