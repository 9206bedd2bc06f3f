"""The job state machine as the runner and users drive it."""

from __future__ import annotations

import pytest

from apps.jobs import services
from apps.jobs.choices import AttemptState, JobState
from apps.jobs.models import ExecutionAttempt

pytestmark = pytest.mark.django_db


def test_dispatch_creates_one_attempt_even_if_retried(make_job):
    job, attempt, _ = make_job()
    assert job.state == JobState.QUEUED
    assert services.start_attempt(job.pk) is None  # a duplicate delivery of the task
    assert ExecutionAttempt.objects.filter(job=job).count() == 1
    assert attempt.number == 1


def test_started_then_exited_zero_succeeds(make_job):
    job, attempt, _ = make_job()
    assert services.record_started(attempt, 1234) == JobState.RUNNING
    assert services.record_exited(attempt, 0) == JobState.SUCCEEDED
    job.refresh_from_db()
    attempt.refresh_from_db()
    assert (job.exit_code, attempt.state, attempt.child_pid) == (0, AttemptState.SUCCEEDED, 1234)
    assert job.finished_at is not None


def test_a_non_zero_exit_fails_with_the_code(make_job):
    job, attempt, _ = make_job()
    services.record_started(attempt, None)
    assert services.record_exited(attempt, 3) == JobState.FAILED
    job.refresh_from_db()
    assert job.exit_code == 3
    assert job.failure_reason == "train.sh exited with code 3"


def test_a_repeated_exit_report_changes_nothing(make_job):
    job, attempt, _ = make_job()
    services.record_exited(attempt, 0)
    services.record_exited(attempt, 1)  # a retry with a different code must not flip it
    job.refresh_from_db()
    assert (job.state, job.exit_code) == (JobState.SUCCEEDED, 0)


def test_cancel_is_terminal_and_absorbs_the_exit(make_job, django_capture_on_commit_callbacks):
    job, attempt, _ = make_job()
    services.record_started(attempt, 10)
    with django_capture_on_commit_callbacks() as callbacks:
        services.cancel_job(job)
    assert len(callbacks) == 1  # the executor is told to stop the processes
    assert services.record_exited(attempt, 143) == JobState.CANCELLED
    attempt.refresh_from_db()
    assert attempt.state == AttemptState.CANCELLED


def test_cancelling_a_finished_job_is_a_conflict(make_job, alice_api):
    job, attempt, _ = make_job()
    services.record_exited(attempt, 0)
    response = alice_api.post(f"/api/v1/jobs/{job.public_id}/cancel")
    assert response.status_code == 409
    assert response.json()["detail"] == f"job {job.public_id} is already succeeded"


def test_bob_cannot_see_or_cancel_alices_job(make_job, bob_api):
    job, _, _ = make_job()
    assert bob_api.get(f"/api/v1/jobs/{job.public_id}").status_code == 404
    assert bob_api.post(f"/api/v1/jobs/{job.public_id}/cancel").status_code == 404
    assert bob_api.get(f"/api/v1/jobs/{job.public_id}/logs").status_code == 404
    assert bob_api.get("/api/v1/jobs").json()["results"] == []
    job.refresh_from_db()
    assert job.state == JobState.QUEUED and not job.cancel_requested


def test_staff_see_every_namespace(make_job, sam):
    from tests.conftest import api_client

    job, _, _ = make_job()
    assert api_client(sam).get(f"/api/v1/jobs/{job.public_id}").status_code == 200


def test_a_failed_launch_fails_the_job_with_the_reason(make_job):
    job, attempt, _ = make_job()
    services.fail_attempt(attempt.pk, "the local executor could not start the job: boom")
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    assert "boom" in job.failure_reason


def test_the_job_list_is_newest_first_and_filters_by_state(make_job, alice_api):
    first, attempt, _ = make_job()
    second, _, _ = make_job()
    services.record_exited(attempt, 0)
    ids = [j["id"] for j in alice_api.get("/api/v1/jobs").json()["results"]]
    assert ids == [second.public_id, first.public_id]
    ids = [j["id"] for j in alice_api.get("/api/v1/jobs?state=succeeded").json()["results"]]
    assert ids == [first.public_id]
    assert alice_api.get("/api/v1/jobs?state=bogus").status_code == 400


def test_the_job_list_query_count_is_pinned(make_job, alice_api, django_assert_max_num_queries):
    for _ in range(20):
        make_job(attempt=False)
    with django_assert_max_num_queries(6):
        assert len(alice_api.get("/api/v1/jobs").json()["results"]) == 20


def test_packages_cannot_be_added_by_hand_in_the_admin(sam):
    from django.test import Client

    from apps.jobs.models import JobPackage

    sam.is_superuser = True
    sam.save()
    client = Client()
    client.force_login(sam)
    assert client.get("/admin/jobs/jobpackage/add/").status_code == 403
    assert client.post("/admin/jobs/jobpackage/add/", {}).status_code == 403
    assert not JobPackage.objects.exists()
