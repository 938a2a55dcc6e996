"""The one exception type that reaches the user as a single line."""


class UserError(Exception):
    """A problem the user can fix; the CLI prints its message on one line and exits 2."""
