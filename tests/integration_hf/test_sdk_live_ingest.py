"""The SDK's observation path end to end: Reporter events, distributions and health
snapshots, the strict observations() API, the capability snapshot in init and the
transport heartbeat, through the real ingest routes into PostgreSQL. Needs no
transformers: it runs wherever the server's test suite runs."""

from __future__ import annotations

from typing import Any

import pytest
from tuneplane import report
from tuneplane.reporter import ObservationDeliveryError, Reporter

from apps.telemetry.models import ObservationEvent, RunCapabilities, TransportHealth

pytestmark = pytest.mark.django_db(transaction=True)  # the live server commits for real


def test_observations_capabilities_and_heartbeat_land_on_the_server(
    bound_to_live_server: Any,
) -> None:
    job = bound_to_live_server
    report.init(hparams={"lr": 0.1}, capabilities=["tools"], requirements={"min_gpus": 1})
    reporter = Reporter.from_env()

    assert reporter.event("rollout", {"reward": 0.5}, step=3) is True
    assert reporter.event("rollout", {"reward": 0.7}, step=3) is True  # same step, distinct
    assert reporter.event("eval", {"score": 1}, step=3, event_id="eval-3") is True
    assert reporter.event("eval", {"score": 1}, step=3, event_id="eval-3") is True  # a retry
    assert reporter.distribution("reward", [0, 1, 2, 4, 8], [3, 1, 4, 1, 5, 9], step=3) is True
    assert reporter.health("env-server", {"ok": True, "latency_ms": 12}) is True
    assert reporter.distribution("reward", [1, 0], [1, 2, 3]) is False  # refused here
    report.log({"loss": 1.0}, step=3)
    assert report.finish(timeout=20) is True

    trials = [
        {"event_id": f"trial-{i}", "kind": "event", "name": "trial", "step": 4, "fields": {"i": i}}
        for i in range(40)
    ]
    assert reporter.observations(trials) == {"accepted": 40, "duplicates": 0}
    assert reporter.observations(trials[:5]) == {"accepted": 0, "duplicates": 5}

    rows = ObservationEvent.objects.filter(job=job)
    rollouts = list(rows.filter(name="rollout").values_list("event_id", "step"))
    assert len(rollouts) == 2 and rollouts[0][0] != rollouts[1][0]
    assert {step for _, step in rollouts} == {3}
    assert rows.filter(event_id="eval-3").count() == 1
    (dist,) = rows.filter(kind="distribution")
    assert dist.histogram == {"bounds": [0.0, 1.0, 2.0, 4.0, 8.0], "counts": [3, 1, 4, 1, 5, 9]}
    assert rows.get(kind="health").fields == {"ok": True, "latency_ms": 12}
    assert rows.filter(name="trial").count() == 40

    snapshot = RunCapabilities.objects.get(job=job)
    assert (snapshot.capabilities, snapshot.requirements) == (["tools"], {"min_gpus": 1})
    job.refresh_from_db()
    assert job.hparams == {"lr": 0.1}

    stats = report.stats()
    assert (stats["events_sent"], stats["events_dropped"], stats["events_rejected"]) == (6, 1, 0)
    health = TransportHealth.objects.get(attempt__job=job)
    assert health.counters["events_sent"] == 6 and health.counters["sent"] == 1


def test_observations_raises_when_the_server_refuses_the_batch(bound_to_live_server: Any) -> None:
    # The strict API validates before sending, so only a server-side rule can refuse it:
    # here an ingest token that is not this run's.
    reporter = Reporter.from_env()
    assert reporter._core is not None and reporter._core.binding is not None
    reporter._core.binding = type(reporter._core.binding)(
        endpoint=reporter._core.binding.endpoint,
        run_id=reporter._core.binding.run_id,
        token="tpi_not-a-token",
    )

    with pytest.raises(ObservationDeliveryError, match="401") as caught:
        reporter.observations([{"event_id": "e1", "kind": "event", "name": "x"}])
    assert caught.value.status == 401
    assert not ObservationEvent.objects.filter(job=bound_to_live_server).exists()
