"""Ingest tokens: scoped to one job's ingest routes, hashed, expiring; the web guard."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts.tokens import digest
from apps.jobs.models import Job
from apps.telemetry.models import IngestToken, LogLine
from tests.conftest import api_client, token_for
from tuneplane.contracts import errors

pytestmark = pytest.mark.django_db


def lines(*texts: str, start: int = 1) -> dict:
    return {"lines": [{"seq": start + i, "stream": "stdout", "text": t, "ts": 1.7e9} for i, t in enumerate(texts)]}


def test_the_token_is_stored_only_as_a_digest(make_job):
    _, attempt, secret = make_job()
    stored = IngestToken.objects.get(attempt=attempt)
    assert stored.key_hash == digest(secret)
    assert secret not in {stored.key_hash, stored.prefix}
    assert stored.expires_at > timezone.now() + timedelta(days=13)


def test_it_accepts_the_token_on_its_jobs_ingest_routes(make_job):
    job, _, secret = make_job()
    response = api_client(secret=secret).post(f"/api/ingest/v1/runs/{job.public_id}/logs", lines("hi"), format="json")
    assert response.status_code == 200
    assert response.json() == {"acked_through": 1, "cancel_requested": False}
    assert LogLine.objects.get(job=job).text == "hi"


@pytest.mark.parametrize(
    "path",
    ["/api/v1/jobs", "/api/v1/me", "/api/v1/recipes", "/admin/", "/", "/api/schema/"],
)
def test_the_web_guard_refuses_it_everywhere_else(make_job, path):
    job, _, secret = make_job()
    response = api_client(secret=secret).get(path)
    assert response.status_code == 401
    assert response.json()["detail"] == errors.INGEST_TOKEN_ON_REGULAR_API


def test_it_cannot_cancel_its_own_job_through_the_user_api(make_job):
    job, _, secret = make_job()
    response = api_client(secret=secret).post(f"/api/v1/jobs/{job.public_id}/cancel")
    assert response.status_code == 401
    job.refresh_from_db()
    assert not job.cancel_requested


def test_it_refuses_a_token_on_another_jobs_routes(make_job):
    job_a, _, secret_a = make_job()
    job_b, _, _ = make_job()
    response = api_client(secret=secret_a).post(f"/api/ingest/v1/runs/{job_b.public_id}/logs", lines("x"), format="json")
    assert response.status_code == 401
    assert response.json()["detail"] == errors.INGEST_TOKEN_WRONG_RUN
    assert not LogLine.objects.exists()


def test_it_refuses_an_expired_token(make_job):
    job, attempt, secret = make_job()
    IngestToken.objects.filter(attempt=attempt).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = api_client(secret=secret).post(f"/api/ingest/v1/runs/{job.public_id}/logs", lines("x"), format="json")
    assert response.status_code == 401
    assert response.json()["detail"] == errors.INGEST_TOKEN_EXPIRED
    assert not LogLine.objects.exists()


def test_it_refuses_a_user_token_on_ingest_routes(make_job, alice):
    job, _, _ = make_job()
    response = api_client(secret=token_for(alice)).post(
        f"/api/ingest/v1/runs/{job.public_id}/logs", lines("x"), format="json"
    )
    assert response.status_code == 401
    assert not LogLine.objects.exists()


def test_it_refuses_ingest_without_a_token(make_job):
    job, _, _ = make_job()
    response = api_client().post(f"/api/ingest/v1/runs/{job.public_id}/logs", lines("x"), format="json")
    assert response.status_code == 401


def test_the_token_expiry_follows_the_setting(make_job, settings):
    settings.TUNEPLANE_INGEST_TOKEN_DAYS = 2
    _, attempt, _ = make_job()
    expires = IngestToken.objects.get(attempt=attempt).expires_at
    assert timedelta(days=1, hours=23) < expires - timezone.now() <= timedelta(days=2)


def test_a_revoked_user_token_is_refused(alice):
    from apps.accounts.models import ApiToken
    from apps.accounts.services import revoke_api_token

    secret = token_for(alice)
    revoke_api_token(ApiToken.objects.get(user=alice))
    assert api_client(secret=secret).get("/api/v1/me").status_code == 401


def test_a_user_token_answers_me(alice):
    response = api_client(secret=token_for(alice)).get("/api/v1/me")
    assert response.json() == {"username": "alice", "is_staff": False}
    assert Job.objects.count() == 0
