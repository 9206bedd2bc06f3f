"""The SDK against the real ingest path: pytest-django's live server (a real HTTP server
in a thread, on the test database) and a job attempt's ingest token. Tests here use
`@pytest.mark.django_db(transaction=True)`: the live server's requests commit for real."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from tuneplane import report
from tuneplane.contracts import env


@pytest.fixture
def bound_to_live_server(live_server, make_job, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A job with an attempt, its ingest binding in the environment as an executor sets
    it for train.sh, and a fresh `tuneplane.report`; yields the job."""
    for name in list(os.environ):
        if name.startswith("TUNEPLANE_") or name in ("RANK", "LOCAL_RANK"):
            monkeypatch.delenv(name)
    job, _attempt, token = make_job()
    monkeypatch.setenv(env.JOB_ENDPOINT, f"{live_server.url}/api/ingest/v1")
    monkeypatch.setenv(env.JOB_RUN_ID, job.public_id)
    monkeypatch.setenv(env.JOB_TOKEN, token)
    monkeypatch.setenv(env.JOB_ENABLED, "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # nothing here needs the Hub; never try it
    report._reset()
    yield job
    report._reset()
