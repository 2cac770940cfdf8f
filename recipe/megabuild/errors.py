"""The one exception type of the build driver, and the one-line form of an operating-system error."""

from __future__ import annotations

import errno

# What to do about the operating-system errors a build meets on its directories (PREFIX, SRC_DIR, ...).
_FIXES = {
    errno.ENOSPC: "free space on that file system (or point the build at a larger one) and run it again",
    errno.EDQUOT: "free space within your quota and run it again",
    errno.EROFS: "the file system is read-only: build on a writable one",
    errno.EACCES: "make the directory writable for this user, or build elsewhere",
    errno.EPERM: "make the directory writable for this user, or build elsewhere",
    errno.EXDEV: "keep PREFIX and its parent directory on one file system",
    errno.ENOENT: "check that the directory exists (conda-build creates it; a manual run must too)",
}


class MegabuildError(Exception):
    """A build problem with a known cause: printed as one line naming the cause and the fix, exit 1.

    Raise it with a message of the form "<what is wrong>: <what to do about it>", on one line, so the
    conda-build log shows the cause at its very end.
    """


def os_error_line(exc: OSError) -> str:
    """``[Errno 28] No space left on device: '/x': free space ...``: an OSError as one line with its fix."""
    where = f": {exc.filename}" if exc.filename else ""
    if exc.filename2:
        where += f" -> {exc.filename2}"
    fix = _FIXES.get(exc.errno or 0, "fix the file system problem named here and run it again")
    return f"{exc.strerror or str(exc) or type(exc).__name__}{where}: {fix}"
