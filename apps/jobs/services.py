"""The job rules: submission, the state machine, dispatch, lifecycle, cancel.

Views, ingest routes and Celery tasks call these functions and hold no rules of their
own. Every state change takes the job's row lock first (then the attempt's), so a
runner's report, a user's cancel and the liveness sweep cannot interleave.
"""

from __future__ import annotations

import logging
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.http import Http404
from django.utils import timezone

from apps.accounts.errors import Conflict, DomainError

from .choices import TERMINAL_STATES, TRANSITIONS, AttemptState, JobState
from .models import ExecutionAttempt, Job, JobPackage
from .submission import CompiledJob, compile_job, parse_request

log = logging.getLogger(__name__)


# Access -------------------------------------------------------------------------------


def visible_jobs(user: AbstractBaseUser):
    """Jobs a user may see: their own namespace; staff see every namespace."""
    qs = Job.objects.select_related("owner", "recipe", "package")
    return qs if user.is_staff else qs.filter(owner=user)


def access_job_by_public_id(user: AbstractBaseUser, public_id: str) -> Job:
    """The one answer to "can this user see this job?". Another user's job is a 404,
    so job IDs cannot be probed."""
    job = visible_jobs(user).filter(public_id=public_id).first()
    if job is None:
        raise Http404(f"no job {public_id!r}")
    return job


# Submission ---------------------------------------------------------------------------


def check_submission(
    request_text: str | bytes | None, package_bytes: bytes | None, user: AbstractBaseUser | None = None
) -> CompiledJob:
    return compile_job(parse_request(request_text), package_bytes, user)


def _store_package(data: bytes, sha256: str) -> JobPackage:
    existing = JobPackage.objects.filter(sha256=sha256).first()
    if existing is not None:
        return existing
    name = f"packages/{sha256[:2]}/{sha256}.tar.gz"
    if not default_storage.exists(name):
        name = default_storage.save(name, ContentFile(data))
    try:
        with transaction.atomic():
            return JobPackage.objects.create(sha256=sha256, size=len(data), storage_name=name)
    except IntegrityError:  # the same package uploaded concurrently
        return JobPackage.objects.get(sha256=sha256)


def _new_public_id(experiment: str) -> str:
    for _ in range(10):
        candidate = f"{experiment}-{secrets.token_hex(3)}"
        if not Job.objects.filter(public_id=candidate).exists():
            return candidate
    return f"{experiment}-{secrets.token_hex(8)}"


def submit_job(user: AbstractBaseUser, request_text: str | bytes | None, package_bytes: bytes | None) -> tuple[Job, list[str]]:
    """Run every gate (never trusting an earlier validate), store the package, create the
    job and hand it to the dispatcher once the row is committed."""
    compiled = check_submission(request_text, package_bytes, user)
    assert package_bytes is not None
    # The object-storage upload happens before the transaction: it is slow, and a
    # package without a job is harmless (content-addressed, reused by the next submit).
    package = _store_package(package_bytes, compiled.package.sha256)
    with transaction.atomic():
        # Quota again, with the namespace's quota rows locked: two submissions racing for
        # the last GPUs cannot both pass the check compile_job made without a lock.
        from .admission import check_quota

        check_quota(user, compiled.profile, lock=True)
        job = Job.objects.create(
            public_id=_new_public_id(compiled.spec["experiment"]),
            owner=user,
            experiment=compiled.spec["experiment"],
            recipe=compiled.recipe,
            operation=compiled.spec["operation"],
            spec=compiled.spec,
            package=package,
        )
        from .tasks import dispatch_job_task

        transaction.on_commit(lambda: dispatch_job_task.delay(job.pk))
    return job, compiled.warnings


# State machine ------------------------------------------------------------------------


def _transition(job: Job, new_state: str, **fields) -> bool:
    """Move a locked job to `new_state` if the state machine allows it."""
    if new_state not in TRANSITIONS[job.state]:
        return False
    job.state = new_state
    for name, value in fields.items():
        setattr(job, name, value)
    job.save(update_fields=["state", *fields])
    return True


def _lock(job_id: int, attempt_id: int | None = None) -> tuple[Job, ExecutionAttempt | None]:
    job = Job.objects.select_for_update().get(pk=job_id)
    attempt = ExecutionAttempt.objects.select_for_update().get(pk=attempt_id) if attempt_id else None
    return job, attempt


def _latest_attempt_number(job: Job) -> int:
    return job.attempts.order_by("-number").values_list("number", flat=True).first() or 0


def start_attempt(job_id: int) -> tuple[ExecutionAttempt, str] | None:
    """Create the next execution attempt and its ingest token; None if the job is no
    longer waiting (a retried or duplicate dispatch is a no-op)."""
    from apps.telemetry.tokens import issue_ingest_token

    with transaction.atomic():
        job, _ = _lock(job_id)
        if job.state != JobState.PENDING:
            return None
        attempt = ExecutionAttempt.objects.create(
            job=job, number=_latest_attempt_number(job) + 1, executor=settings.TUNEPLANE_EXECUTOR
        )
        secret = issue_ingest_token(attempt)
        _transition(job, JobState.QUEUED, queued_at=timezone.now())
    return attempt, secret


def record_launch(attempt_id: int, handle: dict) -> None:
    ExecutionAttempt.objects.filter(pk=attempt_id).update(handle=handle)


def fail_attempt(attempt_id: int, reason: str, *, lost: bool = False) -> None:
    """The attempt ended without a reported exit code (could not start, or was lost)."""
    attempt = ExecutionAttempt.objects.get(pk=attempt_id)
    with transaction.atomic():
        job, attempt = _lock(attempt.job_id, attempt.pk)
        if attempt.state in {AttemptState.LAUNCHING, AttemptState.RUNNING}:
            attempt.state = AttemptState.LOST if lost else AttemptState.FAILED
            attempt.failure_reason = reason
            attempt.finished_at = timezone.now()
            attempt.save(update_fields=["state", "failure_reason", "finished_at"])
        if attempt.number == _latest_attempt_number(job):
            _transition(job, JobState.FAILED, failure_reason=reason, finished_at=timezone.now())


def record_started(attempt: ExecutionAttempt, pid: int | None) -> str:
    with transaction.atomic():
        job, attempt = _lock(attempt.job_id, attempt.pk)
        now = timezone.now()
        if attempt.state == AttemptState.LAUNCHING:
            attempt.state = AttemptState.RUNNING
            attempt.started_at = now
            attempt.child_pid = pid
            attempt.last_seen_at = now
            attempt.save(update_fields=["state", "started_at", "child_pid", "last_seen_at"])
        if attempt.number == _latest_attempt_number(job):
            _transition(job, JobState.RUNNING, started_at=job.started_at or now)
        return job.state


def record_exited(attempt: ExecutionAttempt, exit_code: int) -> str:
    """The runner's final report. Idempotent: the runner retries until it is heard, so a
    second copy must change nothing."""
    with transaction.atomic():
        job, attempt = _lock(attempt.job_id, attempt.pk)
        now = timezone.now()
        if attempt.state in {AttemptState.LAUNCHING, AttemptState.RUNNING}:
            if job.cancel_requested:
                attempt.state = AttemptState.CANCELLED
            else:
                attempt.state = AttemptState.SUCCEEDED if exit_code == 0 else AttemptState.FAILED
            attempt.exit_code = exit_code
            attempt.finished_at = now
            attempt.started_at = attempt.started_at or now
            attempt.save(update_fields=["state", "exit_code", "finished_at", "started_at"])
        if attempt.number == _latest_attempt_number(job) and job.state not in TERMINAL_STATES:
            if exit_code == 0:
                _transition(job, JobState.SUCCEEDED, exit_code=0, finished_at=now)
            else:
                _transition(
                    job,
                    JobState.FAILED,
                    exit_code=exit_code,
                    finished_at=now,
                    failure_reason=f"train.sh exited with code {exit_code}",
                )
        return job.state


def cancel_job(job: Job) -> Job:
    with transaction.atomic():
        job, _ = _lock(job.pk)
        if job.state in TERMINAL_STATES:
            raise Conflict(f"job {job.public_id} is already {job.state}", field="state")
        job.cancel_requested = True
        job.save(update_fields=["cancel_requested"])
        _transition(job, JobState.CANCELLED, finished_at=timezone.now())
        attempt = job.attempts.order_by("-number").first()
        if attempt is not None and attempt.state in {AttemptState.LAUNCHING, AttemptState.RUNNING}:
            from .tasks import cancel_attempt_task

            transaction.on_commit(lambda: cancel_attempt_task.delay(attempt.pk))
    return job


def touch_attempt(attempt: ExecutionAttempt) -> None:
    """Note that the runner is alive; at most one write every few seconds per attempt."""
    now = timezone.now()
    ExecutionAttempt.objects.filter(pk=attempt.pk, last_seen_at__lt=now - timedelta(seconds=5)).update(
        last_seen_at=now
    )
    ExecutionAttempt.objects.filter(pk=attempt.pk, last_seen_at__isnull=True).update(last_seen_at=now)


def mark_cancelled_attempt(attempt_id: int) -> None:
    """After the executor stopped a cancelled attempt that never reported its exit."""
    with transaction.atomic():
        attempt = ExecutionAttempt.objects.select_for_update().get(pk=attempt_id)
        if attempt.state in {AttemptState.LAUNCHING, AttemptState.RUNNING}:
            attempt.state = AttemptState.CANCELLED
            attempt.finished_at = timezone.now()
            attempt.save(update_fields=["state", "finished_at"])


def require_open(job: Job) -> None:
    if job.state in TERMINAL_STATES:
        raise DomainError(f"job {job.public_id} is {job.state}", status_code=409)
