"""Live logs over SSE under a real daphne: resume without gap or duplicate, keep-alives,
and the same authorisation as the REST API."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime

import pytest
import requests

from apps.jobs import services as jobs
from apps.telemetry.models import LogLine
from tests.conftest import token_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def add_lines(job, attempt, start: int, count: int) -> None:
    LogLine.objects.bulk_create([
        LogLine(job=job, attempt_number=attempt.number, seq=s, stream=1, text=f"line {s}", ts=datetime.now(UTC))
        for s in range(start, start + count)
    ])


def events(response):
    """Parse SSE frames: yields (id, event, data) and ('comment', text) for comments."""
    frame: dict[str, str] = {}
    for raw in response.iter_lines(decode_unicode=True):
        if raw is None:
            continue
        if raw == "":
            if frame:
                yield frame.get("id"), frame.get("event", "message"), frame.get("data")
                frame = {}
            continue
        if raw.startswith(":"):
            yield None, "comment", raw[1:].strip()
            continue
        name, _, value = raw.partition(":")
        frame[name] = value[1:] if value.startswith(" ") else value


def stream(web, job, token, last_id: str | None = None):
    headers = {"Authorization": f"Bearer {token}"}
    if last_id:
        headers["Last-Event-ID"] = last_id
    return requests.get(f"{web.url}/api/v1/jobs/{job.public_id}/logs/stream", headers=headers, stream=True, timeout=30)


def test_a_reconnect_resumes_without_gap_or_duplicate(web, make_job, alice):
    job, attempt, _ = make_job()
    token = token_for(alice)
    add_lines(job, attempt, 1, 5)
    seen: list[str] = []
    with stream(web, job, token) as response:
        assert response.headers["Content-Type"] == "text/event-stream"
        for event_id, kind, data in events(response):
            if kind == "log":
                seen.append(json.loads(data)["text"])
                last = event_id
                if len(seen) == 3:
                    break  # the client drops the connection mid-stream
    add_lines(job, attempt, 6, 5)
    jobs.record_exited(attempt, 0)
    with stream(web, job, token, last_id=last) as response:
        kinds = []
        for _event_id, kind, data in events(response):
            kinds.append(kind)
            if kind == "log":
                seen.append(json.loads(data)["text"])
            if kind == "state":
                assert json.loads(data) == {"state": "succeeded", "exit_code": 0}
            if kind == "end":
                break
    assert seen == [f"line {i}" for i in range(1, 11)]
    assert kinds[-2:] == ["state", "end"]


def test_lines_arriving_later_are_pushed_and_idle_streams_get_keepalives(web, make_job, alice):
    job, attempt, _ = make_job()
    token = token_for(alice)
    got: list[str] = []
    comments: list[str] = []

    def later():
        time.sleep(2.5)  # longer than the keep-alive interval (2 s in this stack)
        add_lines(job, attempt, 1, 2)
        time.sleep(0.5)
        jobs.record_exited(attempt, 0)

    threading.Thread(target=later).start()
    with stream(web, job, token) as response:
        for _event_id, kind, data in events(response):
            if kind == "comment":
                comments.append(data)
            if kind == "log":
                got.append(json.loads(data)["text"])
            if kind == "end":
                break
    assert got == ["line 1", "line 2"]
    assert "keepalive" in comments


def test_the_stream_refuses_other_users_and_ingest_tokens(web, make_job, bob):
    job, _, ingest_secret = make_job()
    response = requests.get(f"{web.url}/api/v1/jobs/{job.public_id}/logs/stream",
                            headers={"Authorization": f"Bearer {token_for(bob)}"}, timeout=10)
    assert response.status_code == 404
    response = requests.get(f"{web.url}/api/v1/jobs/{job.public_id}/logs/stream",
                            headers={"Authorization": f"Bearer {ingest_secret}"}, timeout=10)
    assert response.status_code == 401
    assert response.json()["detail"] == "ingest tokens are accepted only on ingest routes"
    response = requests.get(f"{web.url}/api/v1/jobs/{job.public_id}/logs/stream", timeout=10)
    assert response.status_code == 401
