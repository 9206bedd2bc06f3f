"""Periodic Celery tasks of the Kubernetes executor (beat: settings.CELERY_BEAT_SCHEDULE).
Thin: they take IDs and call k8s.sync / k8s.watchdog; one attempt's failure (an API
server that does not answer) does not stop the others."""

from __future__ import annotations

import logging

from celery import shared_task

from . import sync, watchdog

log = logging.getLogger(__name__)


@shared_task(name="jobs.sync_kubernetes_attempts", time_limit=120, soft_time_limit=100)
def sync_kubernetes_attempts() -> int:
    synced = 0
    for attempt_id in list(sync.attempts_to_sync()):
        try:
            sync.sync_attempt(attempt_id)
            synced += 1
        except Exception:
            log.exception("syncing kubernetes attempt %s failed; retrying at the next run", attempt_id)
    return synced


@shared_task(name="jobs.gpu_watchdog", time_limit=120, soft_time_limit=100)
def gpu_watchdog() -> dict[str, int]:
    verdicts: dict[str, int] = {}
    for attempt_id in list(watchdog.attempts_to_watch()):
        try:
            verdict = watchdog.check_attempt(attempt_id)
        except Exception:
            log.exception("GPU watchdog on attempt %s failed", attempt_id)
            verdict = "error"
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
    return verdicts
