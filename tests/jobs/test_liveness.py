"""The liveness sweep: a runner that died without reporting fails its job, a live one
is left alone."""

from __future__ import annotations

import subprocess
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.jobs.choices import AttemptState, JobState
from apps.jobs.models import ExecutionAttempt
from apps.jobs.tasks import sweep_local_attempts

pytestmark = pytest.mark.django_db


def age(attempt, seconds: int) -> None:
    ExecutionAttempt.objects.filter(pk=attempt.pk).update(created_at=timezone.now() - timedelta(seconds=seconds))


def test_a_dead_runner_fails_its_job_as_lost(make_job, settings):
    job, attempt, _ = make_job()
    dead = subprocess.Popen(["true"])
    dead.wait()
    ExecutionAttempt.objects.filter(pk=attempt.pk).update(handle={"runner_pid": dead.pid})
    age(attempt, settings.TUNEPLANE_RUNNER_LOST_SECONDS + 5)
    assert sweep_local_attempts() == 1
    job.refresh_from_db()
    attempt.refresh_from_db()
    assert job.state == JobState.FAILED
    assert attempt.state == AttemptState.LOST
    assert job.failure_reason == "the runner stopped without reporting an exit code"


def test_a_live_runner_is_left_alone(make_job, settings):
    job, attempt, _ = make_job()
    alive = subprocess.Popen(["sleep", "30"])
    try:
        ExecutionAttempt.objects.filter(pk=attempt.pk).update(handle={"runner_pid": alive.pid})
        age(attempt, settings.TUNEPLANE_RUNNER_LOST_SECONDS + 5)
        assert sweep_local_attempts() == 0
        job.refresh_from_db()
        assert job.state == JobState.QUEUED
    finally:
        alive.kill()
        alive.wait()


def test_a_young_attempt_is_not_swept(make_job):
    job, attempt, _ = make_job()
    ExecutionAttempt.objects.filter(pk=attempt.pk).update(handle={"runner_pid": 2**22 + 1})
    assert sweep_local_attempts() == 0
    job.refresh_from_db()
    assert job.state == JobState.QUEUED
