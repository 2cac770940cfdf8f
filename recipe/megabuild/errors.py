"""The one exception type of the build driver."""


class MegabuildError(Exception):
    """A build problem with a known cause: printed as one line naming the cause and the fix, exit 1.

    Raise it with a message of the form "<what is wrong>: <what to do about it>", on one line, so the
    conda-build log shows the cause at its very end.
    """
