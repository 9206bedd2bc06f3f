"""Errors the CLI shows to the user as `Error: <message>` (red, on stderr)."""

from __future__ import annotations


class TpError(Exception):
    """A failure the user can act on; the message is printed as is.

    Exit codes (the brief's contract): 1 when the server or a local check refuses,
    2 for usage errors (those are click's own UsageError, not TpError).
    """

    def __init__(self, message: str, *, exit_code: int = 1, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.status = status  # HTTP status when the server answered, else None


class NetworkError(TpError):
    """The server could not be reached (refused, DNS, timeout): worth a retry when following."""


class ServerError(TpError):
    """The server answered 5xx: a transient failure on its side, worth a retry when following."""
