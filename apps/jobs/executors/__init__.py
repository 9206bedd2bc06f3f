"""Executors start and stop execution attempts. The control plane only talks to them
through `launch` and `cancel`; the runner inside the job reports everything else."""

from __future__ import annotations

from .base import Executor


def get_executor(kind: str) -> Executor:
    if kind == "local":
        from .local import LocalExecutor

        return LocalExecutor()
    if kind == "kubernetes":
        from .kubernetes import KubernetesExecutor

        return KubernetesExecutor()
    raise ValueError(f"executor {kind!r} is not available in this deployment")
