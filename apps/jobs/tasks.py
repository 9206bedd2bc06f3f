"""Celery tasks: transport only. They take IDs, call services and are safe to retry."""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from . import services
from .choices import AttemptState, ExecutorKind
from .executors import get_executor
from .models import ExecutionAttempt

log = logging.getLogger(__name__)


@shared_task(name="jobs.dispatch_job", acks_late=True, time_limit=120, soft_time_limit=100)
def dispatch_job_task(job_id: int) -> None:
    started = services.start_attempt(job_id)
    if started is None:
        return
    attempt, token = started
    try:
        handle = get_executor(attempt.executor).launch(attempt, token)
    except Exception as exc:  # any launch failure ends the attempt with its reason
        log.exception("launching %s failed", attempt)
        services.fail_attempt(attempt.pk, f"the {attempt.executor} executor could not start the job: {exc}")
        return
    services.record_launch(attempt.pk, handle)


@shared_task(name="jobs.cancel_attempt", acks_late=True, time_limit=60, soft_time_limit=50)
def cancel_attempt_task(attempt_id: int) -> None:
    attempt = ExecutionAttempt.objects.select_related("job").get(pk=attempt_id)
    get_executor(attempt.executor).cancel(attempt)
    services.mark_cancelled_attempt(attempt_id)


@shared_task(name="jobs.sweep_local_attempts", time_limit=60, soft_time_limit=50)
def sweep_local_attempts() -> int:
    """Fail attempts whose runner died without reporting (killed, host rebooted)."""
    cutoff = timezone.now() - timedelta(seconds=settings.TUNEPLANE_RUNNER_LOST_SECONDS)
    lost = 0
    executor = get_executor(ExecutorKind.LOCAL)
    attempts = ExecutionAttempt.objects.select_related("job").filter(
        executor=ExecutorKind.LOCAL, state__in=[AttemptState.LAUNCHING, AttemptState.RUNNING], created_at__lt=cutoff
    )
    for attempt in attempts:
        alive = executor.is_alive(attempt)
        if alive is False or (alive is None and (attempt.last_seen_at or attempt.created_at) < cutoff):
            services.fail_attempt(attempt.pk, "the runner stopped without reporting an exit code", lost=True)
            lost += 1
    return lost


# The Kubernetes executor's periodic tasks (state sync, GPU watchdog) register here so
# Celery's autodiscovery of apps.jobs.tasks finds them.
from .k8s import tasks as _kubernetes_tasks  # noqa: E402, F401
