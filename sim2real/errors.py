"""The application's own errors: command-line input and runs that cannot go on (see edge.errors for the taxonomy)."""

from __future__ import annotations

from edge.errors import UserFixableError


class UserError(UserFixableError):
    """A problem the user can act on at the application level (a flag, a run directory, a stage that cannot
    finish); the CLI prints it as one line."""
