from __future__ import annotations

from typing import Protocol

from ..models import ExecutionAttempt


class Executor(Protocol):
    def launch(self, attempt: ExecutionAttempt, token: str) -> dict:
        """Start the runner for `attempt`; return the handle to store (pids, names)."""

    def cancel(self, attempt: ExecutionAttempt) -> None:
        """Stop the attempt's processes or resources; safe to call more than once."""

    def is_alive(self, attempt: ExecutionAttempt) -> bool | None:
        """Whether the attempt still runs; None when the executor cannot tell."""
