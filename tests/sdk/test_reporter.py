"""tuneplane.reporter.Reporter: events, distributions and health snapshots on the bounded
observation queue, and the strict synchronous observations() API."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import pytest
from ingest_stub import IngestStub
from tuneplane import report
from tuneplane.contracts import ingest, limits
from tuneplane.contracts.observations import ObservationError
from tuneplane.reporter import NoIngestBindingError, ObservationDeliveryError, Reporter

SPEC_BOUNDS = [0, 1, 2, 4, 8]  # (-inf,0], (0,1], (1,2], (2,4], (4,8], (8,+inf)


def an_event(event_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "kind": "event",
        "name": "trial",
        "step": 3,
        "fields": {"ok": True},
        **extra,
    }


@pytest.fixture
def reporter(bound: IngestStub) -> Reporter:
    return Reporter.from_env()


# -- without a binding -------------------------------------------------------------------


def test_outside_a_job_it_is_a_no_op_and_the_strict_api_says_why(fast_report: None) -> None:
    reporter = Reporter.from_env()

    assert reporter.enabled is False
    assert reporter.event("x", {"a": 1}) is False
    assert reporter.distribution("x", SPEC_BOUNDS, [0] * 6) is False
    assert reporter.health("x", {"ok": True}) is False
    with pytest.raises(NoIngestBindingError, match="no ingest binding"):
        reporter.observations([an_event("e1")])
    assert report._get()._sender is None  # nothing was started


# -- the bounded observation queue -------------------------------------------------------


def test_the_queue_holds_128_events_counts_the_overflow_and_sends_32_a_batch(
    bound: IngestStub, reporter: Reporter
) -> None:
    bound.hold()  # the sender gets stuck in its first request; events pile up
    report.log({"loss": 1.0}, step=0)
    assert bound.wait_for(lambda: bound.held >= 1, timeout=5)

    started = time.monotonic()
    answers = [reporter.event("tick", {"i": i}, step=i) for i in range(200)]
    assert time.monotonic() - started < 1.0  # a full queue never blocks the caller

    assert answers == [True] * limits.EVENT_QUEUE_MAX + [False] * (200 - limits.EVENT_QUEUE_MAX)
    stats = report.stats()
    assert (stats["events_pending"], stats["events_queued"], stats["events_lost"]) == (128, 128, 72)

    bound.release()
    assert report.finish(timeout=10) is True
    assert bound.event_batch_sizes == [limits.EVENT_BATCH_MAX] * 4
    assert sorted(e["fields"]["i"] for e in bound.events.values()) == list(range(128))
    stats = report.stats()
    assert (stats["events_sent"], stats["events_pending"], stats["events_lost"]) == (128, 0, 72)


def test_a_reused_event_id_sends_the_same_id_and_distinct_events_stay_distinct(
    bound: IngestStub, reporter: Reporter
) -> None:
    assert reporter.event("eval_done", {"score": 1.0}, step=5, event_id="round-1/eval") is True
    assert reporter.event("eval_done", {"score": 1.0}, step=5, event_id="round-1/eval") is True
    assert reporter.event("rollout", {"reward": 0.1}, step=5) is True
    assert reporter.event("rollout", {"reward": 0.9}, step=5) is True

    assert report.finish(timeout=5) is True
    sent_ids = [
        e["event_id"] for call in bound.calls(ingest.ROUTE_EVENTS) for e in call.body["events"]
    ]
    assert sent_ids[:2] == ["round-1/eval", "round-1/eval"]
    assert bound.duplicate_event_ids == ["round-1/eval"]
    rollouts = [e for e in bound.events.values() if e["name"] == "rollout"]
    assert len(rollouts) == 2 and rollouts[0]["event_id"] != rollouts[1]["event_id"]
    assert all(len(e["event_id"]) == 32 for e in rollouts)  # uuid4 hex
    assert report.stats()["events_sent"] == 4  # the server already had the duplicate


def test_distribution_and_health_are_sent_as_given(bound: IngestStub, reporter: Reporter) -> None:
    counts = [3, 1, 4, 1, 5, 9]
    assert reporter.distribution("reward", SPEC_BOUNDS, counts, step=2) is True
    # numpy output as a producer has it: int64 counts and a float array of bounds.
    assert reporter.distribution(
        "length", np.array([8.0, 64.0]), np.array([2, 5, 1]), step=np.int64(2)
    )
    assert (
        reporter.health("env-server", {"ok": np.bool_(True), "latency_ms": np.float32(12.5)})
        is True
    )

    assert report.finish(timeout=5) is True
    by_name = {e["name"]: e for e in bound.events.values()}
    assert by_name["reward"]["kind"] == "distribution"
    assert by_name["reward"]["histogram"] == {"bounds": [0.0, 1.0, 2.0, 4.0, 8.0], "counts": counts}
    assert by_name["length"]["histogram"] == {"bounds": [8.0, 64.0], "counts": [2, 5, 1]}
    assert by_name["length"]["step"] == 2
    assert by_name["env-server"]["kind"] == "health"
    assert by_name["env-server"]["fields"] == {"ok": True, "latency_ms": 12.5}
    assert all(isinstance(e["ts"], float) for e in bound.events.values())


def test_a_queued_event_is_a_copy_of_the_callers_fields(
    bound: IngestStub, reporter: Reporter
) -> None:
    fields = {"reward": 0.5}
    reporter.event("rollout", fields, step=1)
    fields["reward"] = 99.0

    assert report.finish(timeout=5) is True
    (stored,) = bound.events.values()
    assert stored["fields"] == {"reward": 0.5}


class BrokenFields(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("boom")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("boom")

    def __len__(self) -> int:
        return 1


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda r: r.distribution("h", [1, 0], [1, 2, 3]), id="descending-bounds"),
        pytest.param(lambda r: r.distribution("h", [0, 1], [1, 2]), id="counts-not-bounds+1"),
        pytest.param(lambda r: r.distribution("h", list(range(65)), [0] * 66), id="65-bounds"),
        pytest.param(lambda r: r.distribution("h", [0, math.inf], [0, 0, 0]), id="infinite-bound"),
        pytest.param(lambda r: r.distribution("h", [0, 1], [1, -1, 0]), id="negative-count"),
        pytest.param(lambda r: r.distribution("h", [], [0]), id="no-bounds"),
        pytest.param(lambda r: r.distribution("h", "0,1", [0, 0, 0]), id="bounds-a-string"),
        pytest.param(lambda r: r.event("e", {f"f{i}": i for i in range(33)}), id="33-fields"),
        pytest.param(lambda r: r.event("e", {"nested": {"a": 1}}), id="nested-field"),
        pytest.param(lambda r: r.event("e", {"x": math.nan}), id="nan-field"),
        pytest.param(lambda r: r.event("e", {"blob": "x" * 2000}), id="long-string"),
        pytest.param(lambda r: r.event("", {}), id="empty-name"),
        pytest.param(lambda r: r.event("e", {}, step=-1), id="negative-step"),
        pytest.param(lambda r: r.event("e", {}, event_id=""), id="empty-event-id"),
        pytest.param(lambda r: r.event("e", ["not", "a", "dict"]), id="fields-a-list"),
        pytest.param(lambda r: r.event("e", BrokenFields()), id="fields-that-raise"),
        pytest.param(
            lambda r: r.health("h", {f"s{i}": "x" * 1000 for i in range(17)}), id="over-16-kib"
        ),
    ],
)
def test_invalid_input_is_refused_at_the_call_site_without_raising(
    bound: IngestStub, reporter: Reporter, call: Callable[[Reporter], bool]
) -> None:
    assert call(reporter) is False

    assert report.finish(timeout=5) is True
    stats = report.stats()
    assert (stats["events_dropped"], stats["events_queued"]) == (1, 0)
    assert bound.calls(ingest.ROUTE_EVENTS) == []


def test_a_refused_event_batch_is_counted(bound: IngestStub, reporter: Reporter) -> None:
    bound.route_status[ingest.ROUTE_EVENTS] = 400
    reporter.event("a", {})
    reporter.event("b", {})

    assert report.finish(timeout=5) is True
    stats = report.stats()
    assert (stats["events_rejected"], stats["events_sent"], stats["events_lost"]) == (2, 0, 0)
    assert len(bound.calls(ingest.ROUTE_EVENTS)) == 1  # a verdict is not retried


def test_events_that_cannot_be_delivered_are_counted_lost(
    bind_to: Callable[..., None], closed_port: int
) -> None:
    bind_to(f"http://127.0.0.1:{closed_port}/api/ingest/v1")
    reporter = Reporter.from_env()

    assert reporter.event("a", {"x": 1}) is True  # queued; delivery is best effort

    assert report.finish(timeout=5) is True
    assert report.stats()["events_lost"] == 1


# -- observations(): strict and synchronous ------------------------------------------------


def test_observations_sends_batches_of_32_and_a_resend_duplicates_nothing(
    bound: IngestStub, reporter: Reporter
) -> None:
    events = [an_event(f"trial-{i}") for i in range(70)]

    assert reporter.observations(events) == {"accepted": 70, "duplicates": 0}
    assert bound.event_batch_sizes == [32, 32, 6]
    assert reporter.observations(events) == {"accepted": 0, "duplicates": 70}
    assert len(bound.events) == 70
    assert "ts" not in events[0]  # the caller's dicts are left alone


def test_observations_retries_transport_failures(bound: IngestStub, reporter: Reporter) -> None:
    bound.fail_next(2, 503, route=ingest.ROUTE_EVENTS)

    assert reporter.observations([an_event("e1")]) == {"accepted": 1, "duplicates": 0}
    assert [call.status for call in bound.calls(ingest.ROUTE_EVENTS)] == [503, 503, 200]


def test_observations_raises_on_final_failure(bound: IngestStub, reporter: Reporter) -> None:
    bound.route_status[ingest.ROUTE_EVENTS] = 503

    with pytest.raises(ObservationDeliveryError, match="after 4 attempts") as caught:
        reporter.observations([an_event("e1"), an_event("e2")])

    assert caught.value.delivered == 0 and caught.value.status == 503
    assert len(bound.calls(ingest.ROUTE_EVENTS)) == report.SEND_ATTEMPTS


def test_observations_raises_at_once_when_the_server_refuses(
    bound: IngestStub, reporter: Reporter
) -> None:
    events = [an_event(f"e{i}") for i in range(40)]
    bound.route_status[ingest.ROUTE_EVENTS] = 413

    with pytest.raises(ObservationDeliveryError, match=r"refused events\[0:32\]") as caught:
        reporter.observations(events)

    assert caught.value.status == 413
    assert len(bound.calls(ingest.ROUTE_EVENTS)) == 1


def test_observations_raises_when_the_server_is_down(
    bind_to: Callable[..., None], closed_port: int
) -> None:
    bind_to(f"http://127.0.0.1:{closed_port}/api/ingest/v1")

    with pytest.raises(
        ObservationDeliveryError, match="re-sending the same events is safe"
    ) as caught:
        Reporter.from_env().observations([an_event("e1")])
    assert caught.value.status is None


@pytest.mark.parametrize(
    ("events", "field"),
    [
        (
            [
                an_event("ok"),
                an_event("bad", kind="distribution", histogram={"bounds": [0, 1], "counts": [1]}),
            ],
            "events[1].histogram.counts",
        ),
        ([{"kind": "event", "name": "no-id"}], "events[0].event_id"),
        ([an_event("ok"), an_event("x", fields={"nested": {"a": 1}})], "events[1].fields.nested"),
        ([an_event("ok"), "not an event"], "events[1]"),
        ({"event_id": "a-dict-not-a-list"}, "events"),
    ],
)
def test_observations_raises_on_invalid_input_naming_the_field_and_sends_nothing(
    bound: IngestStub, reporter: Reporter, events: Any, field: str
) -> None:
    with pytest.raises(ValueError) as caught:
        reporter.observations(events)

    assert isinstance(caught.value, ObservationError) and caught.value.field == field
    assert bound.calls(ingest.ROUTE_EVENTS) == []


def test_observations_of_nothing_sends_nothing(bound: IngestStub, reporter: Reporter) -> None:
    assert reporter.observations([]) == {"accepted": 0, "duplicates": 0}
    assert bound.requests == []
