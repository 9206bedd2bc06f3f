"""Events, distributions, health snapshots, transport heartbeats, the capability
snapshot, and the streamed CSV export."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.telemetry.models import ObservationEvent, RunCapabilities, TransportHealth
from tests.conftest import api_client

pytestmark = pytest.mark.django_db


def streamed(response) -> str:
    """Drain an async streaming response as daphne would."""
    from asgiref.sync import async_to_sync

    async def drain() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    assert response.is_async  # an async iterator: daphne streams it instead of buffering
    return async_to_sync(drain)().decode()


@pytest.fixture
def run(make_job):
    job, attempt, secret = make_job()
    client = api_client(secret=secret)

    def post(route: str, body):
        return client.post(f"/api/ingest/v1/runs/{job.public_id}/{route}", body, format="json")

    return job, attempt, post


def event(event_id: str, **extra) -> dict:
    return {"event_id": event_id, "kind": "event", "name": "rollout", "step": 7, "fields": {"reward": 0.5}, **extra}


def test_the_same_event_id_twice_is_stored_once_and_first_wins(run):
    job, _, post = run
    assert post("events", {"events": [event("e1")]}).json() == {"accepted": 1, "duplicates": 0}
    again = post("events", {"events": [event("e1", fields={"reward": 99})]})
    assert again.json() == {"accepted": 0, "duplicates": 1}
    stored = ObservationEvent.objects.get(job=job)
    assert stored.fields == {"reward": 0.5}


def test_distinct_events_at_one_step_stay_distinct_across_attempts(run, make_job):
    job, attempt, post = run
    post("events", {"events": [event("a"), event("b")]})
    from apps.jobs.models import ExecutionAttempt
    from apps.telemetry.api.ingest import IngestView  # noqa: F401  (route exists)

    second = ExecutionAttempt.objects.create(job=job, number=2, executor="local")
    from apps.telemetry.observations import ingest_events

    ingest_events(second, {"events": [event("c")]})
    rows = list(ObservationEvent.objects.filter(job=job).order_by("id").values_list("event_id", "step", "attempt_number"))
    assert rows == [("a", 7, 1), ("b", 7, 1), ("c", 7, 2)]


def test_histograms_keep_their_buckets(run, alice_api):
    job, _, post = run
    hist = {"bounds": [0, 1, 2, 4, 8], "counts": [3, 1, 4, 1, 5, 9]}
    post("events", {"events": [{"event_id": "h1", "kind": "distribution", "name": "reward", "step": 1, "histogram": hist}]})
    body = alice_api.get(f"/api/v1/jobs/{job.public_id}/observations").json()
    (dist,) = body["distributions"]
    assert dist["histogram"]["counts"] == [3, 1, 4, 1, 5, 9]
    assert dist["histogram"]["labels"] == ["(-inf,0]", "(0,1]", "(1,2]", "(2,4]", "(4,8]", "(8,+inf)"]


@pytest.mark.parametrize(
    ("bad", "field", "status"),
    [
        ({"kind": "distribution", "histogram": {"bounds": list(range(65)), "counts": [0] * 66}}, "events[0].histogram.bounds", 413),
        ({"kind": "distribution", "histogram": {"bounds": [0, 1], "counts": [1, 2]}}, "events[0].histogram.counts", 400),
        ({"kind": "distribution", "histogram": {"bounds": [1, 0], "counts": [1, 2, 3]}}, "events[0].histogram.bounds", 400),
        ({"fields": {f"f{i}": i for i in range(33)}}, "events[0].fields", 413),
        ({"fields": {"blob": "x" * 2000}}, "events[0].fields.blob", 400),
        ({"fields": {"nested": {"a": 1}}}, "events[0].fields.nested", 400),
        ({"event_id": ""}, "events[0].event_id", 400),
        ({"step": -1}, "events[0].step", 400),
    ],
)
def test_a_bad_event_refuses_the_batch_whole(run, bad, field, status):
    _, _, post = run
    response = post("events", {"events": [event("ok-1"), {**event("bad"), **bad}][::-1]})
    assert response.status_code == status, response.content
    assert response.json()["field"] == field
    assert not ObservationEvent.objects.exists()


def test_an_event_over_16_kib_is_refused(run):
    _, _, post = run
    fields = {f"f{i}": "x" * 1000 for i in range(20)}
    response = post("events", {"events": [event("big", fields=fields)]})
    assert response.status_code == 413
    assert "the limit is 16384 bytes" in response.json()["detail"]


def test_more_than_32_events_in_a_batch_are_refused(run):
    _, _, post = run
    response = post("events", {"events": [event(f"e{i}") for i in range(33)]})
    assert response.status_code == 413
    assert not ObservationEvent.objects.exists()


def test_health_snapshots_stay_discoverable_after_100_later_events(run, alice_api):
    job, _, post = run
    post("events", {"events": [{"event_id": "h", "kind": "health", "name": "env-server", "fields": {"ok": True}}]})
    for start in range(0, 128, 32):
        post("events", {"events": [event(f"e{i}") for i in range(start, start + 32)]})
    recent = alice_api.get(f"/api/v1/jobs/{job.public_id}/events").json()["results"]
    assert len(recent) == 100 and recent[0]["event_id"] == "e127"
    assert all(e["kind"] == "event" for e in recent)
    health = alice_api.get(f"/api/v1/jobs/{job.public_id}/observations").json()["health"]
    assert [(h["name"], h["fields"]) for h in health] == [("env-server", {"ok": True})]


def test_heartbeats_make_transport_healthy_and_staleness_unknown(run, alice_api):
    job, attempt, post = run
    url = f"/api/v1/jobs/{job.public_id}/observations"
    assert alice_api.get(url).json()["transport"]["state"] == "unknown"
    sdk = {"queued": 10, "sent": 8, "lost": 2, "rejected": 0, "failed_requests": 1}
    assert post("heartbeat", {"sdk": sdk, "queue_occupancy": 0.25}).json() == {"ok": True}
    transport = alice_api.get(url).json()["transport"]
    assert transport["state"] == "healthy"
    assert transport["counters"]["lost"] == 2 and transport["queue_occupancy"] == 0.25
    TransportHealth.objects.filter(attempt=attempt).update(last_heartbeat_at=timezone.now() - timedelta(hours=1))
    transport = alice_api.get(url).json()["transport"]
    assert transport["state"] == "unknown"  # never "stopped": a silent SDK proves nothing
    assert transport["reason"] == "the last heartbeat is stale"


def test_a_bad_heartbeat_is_named(run):
    _, _, post = run
    assert post("heartbeat", {"sdk": {"lost": -1}}).json()["field"] == "sdk.lost"
    assert post("heartbeat", {"sdk": {}, "queue_occupancy": 2}).json()["field"] == "queue_occupancy"
    assert not TransportHealth.objects.exists()


def test_init_snapshots_capabilities_and_requirements(run, alice_api):
    job, _, post = run
    post("init", {"hparams": {"lr": 0.1}, "capabilities": ["tools", "async_rollouts"], "requirements": {"min_gpus": 1}})
    snapshot = RunCapabilities.objects.get(job=job)
    assert snapshot.capabilities == ["tools", "async_rollouts"]
    body = alice_api.get(f"/api/v1/jobs/{job.public_id}/observations").json()
    assert body["requirements"] == {"min_gpus": 1}


def test_series_carry_their_group_and_unit(run, alice_api):
    job, _, post = run
    post("scalars", {"points": [{"key": k, "step": 1, "value": 1.0} for k in
                                ("env/tool_success_rate", "train/loss", "hardware/gpu_util", "custom_thing")]})
    series = {s["key"]: (s["group"], s["unit"]) for s in alice_api.get(f"/api/v1/jobs/{job.public_id}/series").json()["results"]}
    assert series == {
        "env/tool_success_rate": ("observation", "ratio"),
        "train/loss": ("training", None),
        "hardware/gpu_util": ("training", "percent"),
        "custom_thing": ("other", None),
    }


def test_csv_export_streams_the_original_scalars(run, alice_api):
    job, _, post = run
    post("scalars", {"points": [{"key": "loss", "step": s, "value": 1 / 3 + s} for s in range(5)]
                     + [{"key": "loss", "step": 5, "value": "NaN"}, {"key": "acc", "step": 0, "value": 0.1}]})
    response = alice_api.get(f"/api/v1/jobs/{job.public_id}/series.csv", HTTP_ACCEPT="text/csv")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv"
    body = streamed(response)
    rows = list(csv.reader(io.StringIO(body)))
    assert rows[0] == ["key", "step", "value", "attempt", "ts"]
    assert rows[1][:3] == ["acc", "0", "0.1"]
    loss = [r for r in rows[1:] if r[0] == "loss"]
    assert [float(r[2]) for r in loss[:5]] == [1 / 3 + s for s in range(5)]  # exact round trip
    assert loss[5][2] == "NaN"
    only = alice_api.get(f"/api/v1/jobs/{job.public_id}/series.csv?key=acc")
    assert len(streamed(only).splitlines()) == 2
    assert alice_api.get(f"/api/v1/jobs/{job.public_id}/series.csv?key=nope").status_code == 400


def test_bob_cannot_read_alices_observations(run, bob_api):
    job, _, _ = run
    for path in ("events", "observations", "series.csv"):
        assert bob_api.get(f"/api/v1/jobs/{job.public_id}/{path}").status_code == 404


def test_an_unknown_metric_gets_no_unit_even_with_a_suffix():
    from tuneplane.contracts.metrics import classify

    assert classify("custom/score_rate") == {"group": "other", "unit": None}
    assert classify("eval/accuracy") == {"group": "observation", "unit": "ratio"}


def test_csv_quotes_keys_and_both_backends_write_the_same_values(run):
    from unittest import mock

    from apps.telemetry import export
    from apps.telemetry.models import ScalarSeries

    job, _, post = run
    values = [0.1, 1e-05, 123456789.123456789, -2.5e300, 5e-324, "Infinity"]
    post("scalars", {"points": [{"key": 'odd,"key"', "step": s, "value": v} for s, v in enumerate(values)]})
    series = ScalarSeries.objects.get(job=job)
    _, fast = export.page(series.pk, series.key, -1)
    with mock.patch.object(export.connection, "vendor", "sqlite"):
        _, portable = export.page(series.pk, series.key, -1)
    fast_rows = list(csv.reader(io.StringIO(fast)))
    portable_rows = list(csv.reader(io.StringIO(portable)))
    assert [r[:4] for r in fast_rows] == [r[:4] for r in portable_rows]
    assert fast_rows[0][0] == 'odd,"key"'
    # The same text as Python's repr, which reads back as the very same double.
    assert [r[2] for r in fast_rows][:5] == [repr(float(v)) for v in values[:5]]
    assert fast_rows[5][2] == "Infinity"
