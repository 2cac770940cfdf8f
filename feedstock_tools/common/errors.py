"""The one exception type every tool raises for problems the user can fix."""


class ToolError(Exception):
    """A problem the user can fix: printed as one line naming the problem and the fix, exit status 1."""


class InputError(ToolError):
    """A broken input file (bad bytes, bad YAML, a selector naming nothing): its message names the file, the
    line where it is known, the problem and the fix. Every command stops on it, even one that collects
    other problems as findings: nothing computed from a broken input is worth reporting."""
