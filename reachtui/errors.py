"""The one exception type that reaches the user as a single line (exit status 2), never a traceback."""


class ReachError(Exception):
    """Bad input or an impossible request. The message is one line, shown as `error: <message>`."""
