"""Celery tasks: transport only."""

from __future__ import annotations

from celery import shared_task

from . import services


@shared_task(name="environments.probe_runners", time_limit=120, soft_time_limit=100)
def probe_runners_task() -> int:
    """Mark each runner in service answering or not (Celery beat)."""
    return services.probe_all_runners()
