"""Log and scalar ingest: idempotent, validated whole, ordered for readers."""

from __future__ import annotations

import math

import pytest

from apps.jobs import services as jobs
from apps.telemetry.models import LogLine, ScalarPoint, ScalarSeries
from tests.conftest import api_client
from tuneplane.contracts import limits

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(make_job):
    job, attempt, secret = make_job()
    client = api_client(secret=secret)

    def post(route: str, body):
        return client.post(f"/api/ingest/v1/runs/{job.public_id}/{route}", body, format="json")

    return job, attempt, post


def batch(seqs, stream="stdout"):
    return {"lines": [{"seq": s, "stream": stream, "text": f"line {s}", "ts": 1.7e9 + s} for s in seqs]}


def test_a_retried_batch_is_stored_once(run):
    job, _, post = run
    assert post("logs", batch([1, 2, 3])).json()["acked_through"] == 3
    assert post("logs", batch([2, 3, 4])).json()["acked_through"] == 4
    assert list(LogLine.objects.filter(job=job).order_by("seq").values_list("text", flat=True)) == [
        "line 1", "line 2", "line 3", "line 4"
    ]


def test_a_malformed_batch_stores_nothing(run):
    job, _, post = run
    body = batch([1, 2])
    body["lines"].append({"seq": 0, "stream": "stdout", "text": "x"})
    response = post("logs", body)
    assert response.status_code == 400
    assert response.json()["field"] == "lines[2].seq"
    assert not LogLine.objects.exists()


def test_an_oversized_log_batch_is_refused_whole(run):
    _, _, post = run
    response = post("logs", batch(range(1, limits.LOG_BATCH_MAX_LINES + 2)))
    assert response.status_code == 413
    assert "limit is 1000" in response.json()["detail"]
    assert not LogLine.objects.exists()


def test_a_nul_byte_does_not_lose_the_line(run):
    job, _, post = run
    post("logs", {"lines": [{"seq": 1, "stream": "stderr", "text": "a\x00b", "ts": 1.7e9}]})
    assert LogLine.objects.get(job=job).text == "a\ufffdb"


def test_logs_page_by_cursor_across_attempts(run, alice_api):
    job, attempt, post = run
    post("logs", batch([1, 2, 3]))
    page = alice_api.get(f"/api/v1/jobs/{job.public_id}/logs?limit=2").json()
    assert [l["cursor"] for l in page["lines"]] == ["1.1", "1.2"]
    page = alice_api.get(f"/api/v1/jobs/{job.public_id}/logs?after={page['next_cursor']}").json()
    assert [l["text"] for l in page["lines"]] == ["line 3"]
    assert page["complete"] is False
    jobs.record_exited(attempt, 0)
    page = alice_api.get(f"/api/v1/jobs/{job.public_id}/logs?after=1.3").json()
    assert page["lines"] == [] and page["complete"] is True
    assert alice_api.get(f"/api/v1/jobs/{job.public_id}/logs?after=x").status_code == 400


def test_cancel_is_signalled_in_the_ack(run, alice_api):
    job, _, post = run
    alice_api.post(f"/api/v1/jobs/{job.public_id}/cancel")
    assert post("logs", {"lines": []}).json()["cancel_requested"] is True


def test_lifecycle_reports_move_the_job(run):
    job, _, post = run
    assert post("lifecycle", {"event": "started", "pid": 42}).json() == {"state": "running"}
    assert post("lifecycle", {"event": "exited", "exit_code": 0}).json() == {"state": "succeeded"}
    assert post("lifecycle", {"event": "exited", "exit_code": "0"}).status_code == 400
    assert post("lifecycle", {"event": "boom"}).json()["field"] == "event"


def test_scalars_are_stored_and_summarised(run, alice_api):
    job, _, post = run
    points = [{"key": "train/loss", "step": s, "value": 1.0 / (s + 1), "ts": 1.7e9} for s in range(10)]
    assert post("scalars", {"points": points}).json() == {"accepted": 10}
    series = ScalarSeries.objects.get(job=job, key="train/loss")
    assert (series.count, series.first_step, series.last_step) == (10, 0, 9)
    assert series.max == 1.0 and series.last == pytest.approx(0.1)
    body = alice_api.get(f"/api/v1/jobs/{job.public_id}/series/points?key=train/loss&buckets=5").json()
    assert [b["step"] for b in body["buckets"]] == [0, 2, 4, 6, 8]
    assert [b["last"] for b in body["buckets"]][0] == 0.5
    assert body["buckets"][0]["max"] == 1.0 and body["buckets"][0]["min"] == 0.5


def test_a_resent_step_replaces_its_value_and_repairs_the_max(run):
    job, _, post = run
    post("scalars", {"points": [{"key": "loss", "step": 1, "value": 100.0}, {"key": "loss", "step": 2, "value": 2.0}]})
    post("scalars", {"points": [{"key": "loss", "step": 1, "value": 1.0}]})
    series = ScalarSeries.objects.get(job=job, key="loss")
    assert (series.count, series.max) == (2, 2.0)


def test_non_finite_values_are_invalids_not_zeros(run):
    job, _, post = run
    post("scalars", {"points": [{"key": "loss", "step": 1, "value": "NaN"}, {"key": "loss", "step": 2, "value": "Infinity"},
                                {"key": "loss", "step": 3, "value": 0.5}]})
    series = ScalarSeries.objects.get(job=job, key="loss")
    assert (series.invalid_count, series.min, series.max) == (2, 0.5, 0.5)
    assert ScalarPoint.objects.get(series=series, step=1).value is None
    assert ScalarPoint.objects.get(series=series, step=1).invalid == "NaN"


def test_a_2049_point_batch_is_rejected_whole(run):
    _, _, post = run
    points = [{"key": "k", "step": s, "value": 1.0} for s in range(limits.SCALAR_BATCH_MAX_POINTS + 1)]
    response = post("scalars", {"points": points})
    assert response.status_code == 413
    assert "the limit is 2048" in response.json()["detail"]
    assert not ScalarPoint.objects.exists()


@pytest.mark.parametrize(
    ("point", "field"),
    [
        ({"key": "", "step": 1, "value": 1}, "points[0].key"),
        ({"key": "k", "step": -1, "value": 1}, "points[0].step"),
        ({"key": "k", "step": 1.5, "value": 1}, "points[0].step"),
        ({"key": "k", "step": 1, "value": "1"}, "points[0].value"),
        ({"key": "k", "step": 1, "value": True}, "points[0].value"),
        ({"key": "k" * 300, "step": 1, "value": 1}, "points[0].key"),
    ],
)
def test_bad_points_are_named(run, point, field):
    _, _, post = run
    response = post("scalars", {"points": [point]})
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert not ScalarSeries.objects.exists()


def test_the_4097th_series_is_refused(run):
    job, _, post = run
    ScalarSeries.objects.bulk_create(
        [ScalarSeries(job=job, key=f"s{i}") for i in range(limits.SCALAR_SERIES_MAX_PER_RUN)]
    )
    response = post("scalars", {"points": [{"key": "one-more", "step": 0, "value": 1.0}]})
    assert response.status_code == 413
    assert "at most 4096 scalar series" in response.json()["detail"]
    assert not ScalarSeries.objects.filter(key="one-more").exists()
    # An existing series still takes points.
    assert post("scalars", {"points": [{"key": "s1", "step": 0, "value": 1.0}]}).status_code == 200


def test_init_records_hparams(run):
    job, _, post = run
    assert post("init", {"hparams": {"lr": 0.1}}).json() == {"ok": True}
    job.refresh_from_db()
    assert job.hparams == {"lr": 0.1}
    assert math.isclose(job.hparams["lr"], 0.1)


def test_a_body_over_the_ingest_cap_is_refused_unread(run):
    from apps.telemetry.api.parsers import MAX_INGEST_BODY

    job, _, post = run
    huge = {"points": [], "padding": "x" * (MAX_INGEST_BODY + 10)}
    response = post("scalars", huge)
    assert response.status_code == 413
    assert f"request body exceeds {MAX_INGEST_BODY} bytes" == response.json()["detail"]


def test_malformed_json_is_a_parse_error(make_job):
    job, _, secret = make_job()
    response = api_client(secret=secret).post(
        f"/api/ingest/v1/runs/{job.public_id}/scalars", data=b'{"points": [NaN]}', content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["detail"].startswith("JSON parse error")
