"""The one exception type every tool raises for problems the user can fix."""


class ToolError(Exception):
    """A problem the user can fix: printed as one line naming the problem and the fix, exit status 1."""
