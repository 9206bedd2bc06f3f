"""The Charts tab in headless Chromium against a real daphne: a 1,000,000-point series
drawn and zoomed, metrics grouped by what they observe with their units, the SDK's
transport health, the run's capability snapshot, and the events panel (latest 100
events, histograms with the spec's bucket labels, health snapshots latest per name).

Screenshots land in /tmp/charts-*.png."""

from __future__ import annotations

import math
import time
from datetime import timedelta

import pytest
from django.utils import timezone

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "alice-password-1"  # tests/conftest.py's alice
MILLION = 1_000_000
SPIKE_STEP = 777_777
SPIKE = 9.5
REWARD_BOUNDS = [0, 1, 2, 4, 8]
REWARD_COUNTS = [3, 10, 25, 40, 15, 7]
SPEC_LABELS = ["(-inf,0]", "(0,1]", "(1,2]", "(2,4]", "(4,8]", "(8,+inf)"]


# Data -------------------------------------------------------------------------------


def running_job(owner, public_id: str = "charts-demo-4d5e6f"):
    """A running job with one running attempt, written straight to the database."""
    from apps.jobs.models import ExecutionAttempt, Job, JobPackage
    from apps.recipes.models import Recipe
    from apps.recipes.services import load_catalogue

    load_catalogue()
    recipe = Recipe.objects.get(name="custom/custom")
    package = JobPackage.objects.create(sha256="cd" * 32, size=1024, storage_name="packages/cd/test.tar.gz")
    started = timezone.now() - timedelta(hours=3)
    spec = {
        "apiVersion": "tuneplane/job/v1",
        "experiment": "charts-demo",
        "operation": "train",
        "recipe": {"name": recipe.name, "version": recipe.version, "digest": recipe.digest},
        "framework": {"name": "custom", "observability": "platform", "entrypoint": "experiments/charts-demo/train.sh"},
        "runtime": {"image": "registry.example.com/my-trainer@sha256:" + "ef" * 32, "pinned": True},
        "resources": {"profile": "h200:8", "gpu_type": "h200", "num_nodes": 1, "gpus_per_node": 8, "fleet": "gpu"},
        "hyperparams": {},
        "package": {"sha256": package.sha256, "size": package.size},
    }
    job = Job.objects.create(
        public_id=public_id, owner=owner, experiment="charts-demo", recipe=recipe, spec=spec, package=package,
        state="running", queued_at=started, started_at=started,
    )
    attempt = ExecutionAttempt.objects.create(job=job, number=1, executor="local", state="running", started_at=started)
    return job, attempt


def ingest(attempt, key: str, values) -> None:
    """Points through the real ingest module (COPY, summaries and rollups), 2,048 a batch
    as the SDK sends them. `values` is an iterable of (step, value)."""
    from apps.telemetry.scalars import ingest_scalars

    ts = time.time()
    batch = []
    for step, value in values:
        batch.append({"key": key, "step": step, "value": value, "ts": ts})
        if len(batch) == 2048:
            ingest_scalars(attempt, {"points": batch})
            batch = []
    if batch:
        ingest_scalars(attempt, {"points": batch})


def loss(step: int) -> float:
    """A decaying, noisy loss between about 0.3 and 2.6; one spike at SPIKE_STEP."""
    if step == SPIKE_STEP:
        return SPIKE
    noise = ((step * 7919) % 1000) / 1000.0
    return 2.2 * math.exp(-step / 250_000) + 0.3 + 0.08 * math.sin(step / 1500) + 0.05 * noise


def send_events(attempt, events: list[dict]) -> None:
    """Through the ingest module, at most 32 a batch, as the SDK sends them."""
    from apps.telemetry.observations import ingest_events

    for i in range(0, len(events), 32):
        ingest_events(attempt, {"events": events[i:i + 32]})


def sign_in(page, server) -> None:
    page.goto(f"{server.url}/login/")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{server.url}/")


def card(page, key: str):
    return page.locator(f".chart-card[data-series-key='{key}']")


def wait_drawn(page, count: int) -> None:
    page.wait_for_function(
        "n => document.querySelectorAll('.chart-card[data-drawn=true]').length === n", arg=count, timeout=20000
    )


# Tests ------------------------------------------------------------------------------


def test_a_million_point_series_is_drawn_grouped_zoomed_and_the_events_panel_is_complete(
    page, daphne_server, alice
):
    from apps.telemetry.models import RunCapabilities, ScalarPoint, ScalarSeries

    job, attempt = running_job(alice)

    t0 = time.perf_counter()
    ingest(attempt, "train/loss", ((s, loss(s)) for s in range(MILLION)))
    seconds = time.perf_counter() - t0
    print(f"\n1,000,000 points through ingest_scalars in 2,048-point batches: {seconds:.1f} s")
    assert ScalarPoint.objects.filter(series__job=job, series__key="train/loss").count() == MILLION

    # Percent (already 0-100), ratio (0-1) and a key outside the known groups whose value
    # goes past 1: it must not be clipped to a 0-1 axis or coloured as a ratio.
    ingest(attempt, "hardware/gpu_util", ((s, 60 + 37.5 * ((s // 10) % 40) / 39) for s in range(0, 4000, 10)))
    ingest(attempt, "env/tool_success_rate", ((s, 0.35 + 0.5 * s / 4000) for s in range(0, 4000, 20)))
    ingest(attempt, "custom/score_rate", ((s, 0.5 + 1.2 * ((s // 25) % 10) / 9) for s in range(0, 4000, 25)))
    RunCapabilities.objects.create(
        job=job, capabilities=["tools", "async_rollouts"], requirements={"min_turns": 2, "verifier": "math"}
    )

    # The health snapshot is the oldest observation: 130 events arrive after it.
    now = time.time()
    send_events(attempt, [{
        "event_id": "health-1", "kind": "health", "name": "env-server", "step": 5, "ts": now - 3600,
        "fields": {"ok": True, "latency_ms": 12, "note": "<b>bold?</b>"},
    }])
    send_events(attempt, [{
        "event_id": f"ev-{i}", "kind": "event", "name": "rollout_batch", "step": 100 * i, "ts": now - 600 + i,
        "fields": {"index": i, "reward_mean": round(0.25 + i / 400, 4), "env": "math", "html": "<img src=x>"},
    } for i in range(130)])
    send_events(attempt, [{
        "event_id": "dist-1", "kind": "distribution", "name": "reward", "step": 12_900, "ts": now - 5,
        "histogram": {"bounds": REWARD_BOUNDS, "counts": REWARD_COUNTS},
    }])

    sign_in(page, daphne_server)
    page.goto(f"{daphne_server.url}/jobs/{job.public_id}/#charts")
    wait_drawn(page, 4)

    # The million-point chart: drawn on a canvas from one bucket per pixel, every point
    # counted, the spike kept as the max of the drawn band and of the summary.
    big = card(page, "train/loss")
    assert big.locator("canvas").count() == 1
    assert int(big.get_attribute("data-point-count")) == MILLION
    width = big.locator(".chart-plot").evaluate("el => el.clientWidth")
    assert 0 < int(big.get_attribute("data-bucket-count")) <= width
    assert float(big.get_attribute("data-drawn-max")) == SPIKE
    assert big.locator("[data-field=max]").text_content() == "9.5"
    assert big.locator("[data-field=count]").text_content() == "1,000,000"

    # Grouping and units.
    observation = page.locator("[data-group-section=observation]")
    training = page.locator("[data-group-section=training]")
    other = page.locator("[data-group-section=other]")
    assert observation.locator("h2").text_content().startswith("Observation coverage")
    assert training.locator("h2").text_content().startswith("Training health")
    assert other.locator("h2").text_content().startswith("Other metrics")
    assert observation.locator(".chart-card").evaluate_all("els => els.map(e => e.dataset.seriesKey)") == [
        "env/tool_success_rate"
    ]
    assert training.locator(".chart-card").evaluate_all("els => els.map(e => e.dataset.seriesKey)") == [
        "hardware/gpu_util", "train/loss"
    ]
    assert other.locator(".chart-card").evaluate_all("els => els.map(e => e.dataset.seriesKey)") == [
        "custom/score_rate"
    ]
    rate = card(page, "env/tool_success_rate")
    assert rate.get_attribute("data-unit") == "ratio"
    assert rate.locator("[data-role=unit]").text_content() == "0–1"
    assert (float(rate.get_attribute("data-y-min")), float(rate.get_attribute("data-y-max"))) == (0.0, 1.0)
    gpu = card(page, "hardware/gpu_util")
    assert gpu.get_attribute("data-unit") == "percent"
    assert gpu.locator("[data-role=unit]").text_content() == "%"
    assert gpu.locator("[data-field=max]").text_content() == "97.5%"  # 0-100 as sent, never multiplied
    assert (float(gpu.get_attribute("data-y-min")), float(gpu.get_attribute("data-y-max"))) == (0.0, 100.0)
    neutral = card(page, "custom/score_rate")
    assert neutral.get_attribute("data-unit") == ""
    assert neutral.locator("[data-role=unit]").count() == 0
    assert neutral.locator("[data-field=max]").text_content() == "1.7"
    assert float(neutral.get_attribute("data-y-max")) >= 1.7  # not clipped to a ratio axis

    # Transport: no heartbeat was ever received, so "unknown" with the reason; never "stopped".
    transport = page.locator("[data-role=transport]")
    page.wait_for_function("document.querySelector('[data-role=transport]').dataset.loaded === 'true'")
    assert transport.get_attribute("data-state") == "unknown"
    assert transport.locator("[data-role=transport-state]").text_content() == "unknown"
    assert transport.locator("[data-role=transport-reason]").text_content() == "no heartbeat received"
    assert transport.locator("[data-field=last_heartbeat]").text_content() == "never"
    assert transport.locator("[data-field=lost]").text_content() == "—"  # not known, so not 0
    assert "stopped" not in transport.text_content().lower()

    # The run's capability snapshot.
    snapshot = page.locator("[data-role=snapshot]")
    assert snapshot.is_visible()
    assert snapshot.locator("[data-role=capabilities] .chip").all_text_contents() == ["tools", "async_rollouts"]
    assert snapshot.locator("[data-role=requirements]").text_content() == "min_turns=2verifier=math"

    # Events: the latest 100 of 130, newest first; markup in a field stays text.
    page.wait_for_function("document.querySelectorAll('[data-role=event-rows] tr').length === 100")
    rows = page.locator("[data-role=event-rows] tr")
    assert rows.first.get_attribute("data-event-id") == "ev-129"
    assert rows.last.get_attribute("data-event-id") == "ev-30"
    first_cells = rows.first.locator("td").all_text_contents()
    assert first_cells[1:4] == ["rollout_batch", "12,900", "1"]
    assert "index=129" in first_cells[4] and "env=math" in first_cells[4] and "html=<img src=x>" in first_cells[4]
    assert page.locator("[data-role=event-rows] img").count() == 0
    assert "latest 100" in page.locator("[data-role=recent-events-count]").text_content()

    # The health snapshot, older than all 130 events, is still shown (latest per name).
    health = page.locator("[data-role=health-rows] tr")
    assert health.count() == 1
    assert health.first.locator("td").nth(1).text_content() == "env-server"
    assert "note=<b>bold?</b>" in health.first.text_content()
    assert page.locator("[data-role=health-rows] b").count() == 0

    # The histogram, separately, as bars labelled with the API's bucket labels.
    reward = page.locator(".histogram[data-name=reward]")
    assert reward.locator(".hbar-label").all_text_contents() == SPEC_LABELS
    assert reward.locator(".hbar-count").all_text_contents() == [str(c) for c in REWARD_COUNTS]
    fills = reward.locator(".hbar-fill").evaluate_all("els => els.map(e => e.getBoundingClientRect().width)")
    assert fills.index(max(fills)) == REWARD_COUNTS.index(max(REWARD_COUNTS))
    assert fills[3] > 3 * fills[0] > 0
    assert "100 in all" in reward.text_content()

    # CSV: all series, and per series, streamed from the API.
    csv_all = page.locator("[data-role=csv-all]")
    assert csv_all.get_attribute("href") == f"/api/v1/jobs/{job.public_id}/series.csv"
    rate_csv = rate.locator("[data-role=series-csv]").get_attribute("href")
    assert rate_csv == f"/api/v1/jobs/{job.public_id}/series.csv?key=env%2Ftool_success_rate"
    response = page.request.get(f"{daphne_server.url}{rate_csv}")
    assert response.status == 200
    assert response.headers["content-type"].startswith("text/csv")
    lines = response.text().strip().splitlines()
    assert lines[0] == "key,step,value,attempt,ts"
    assert len(lines) == 1 + ScalarSeries.objects.get(job=job, key="env/tool_success_rate").count

    page.screenshot(path="/tmp/charts-overview.png", full_page=True)
    assert page.script_errors == []

    # Drag across the million-point chart around the spike: the window is asked for again
    # and drawn at finer resolution; Reset zoom goes back to the whole series.
    before_per_bucket = MILLION / int(big.get_attribute("data-bucket-count"))
    big.scroll_into_view_if_needed()
    over = big.locator(".u-over").bounding_box()
    y = over["y"] + over["height"] / 2
    page.mouse.move(over["x"] + over["width"] * 0.70, y)
    page.mouse.down()
    page.mouse.move(over["x"] + over["width"] * 0.85, y, steps=8)
    page.mouse.up()
    page.wait_for_function(
        "document.querySelector(\".chart-card[data-series-key='train/loss']\").dataset.zoomed === 'true' && "
        "document.querySelector(\".chart-card[data-series-key='train/loss']\").dataset.drawn === 'true'"
    )
    start, end = int(big.get_attribute("data-zoom-start")), int(big.get_attribute("data-zoom-end"))
    assert 650_000 < start < SPIKE_STEP < end < 900_000
    assert start <= int(big.get_attribute("data-first-step")) and int(big.get_attribute("data-last-step")) <= end
    points = int(big.get_attribute("data-point-count"))
    assert points == end - start + 1  # every step of the window, and nothing outside it
    after_per_bucket = points / int(big.get_attribute("data-bucket-count"))
    assert after_per_bucket * 3 < before_per_bucket  # finer detail, not stretched pixels
    assert float(big.get_attribute("data-drawn-max")) == SPIKE
    assert big.locator("[data-role=reset-zoom]").is_visible()
    page.mouse.move(over["x"] + over["width"] * 0.5, y)
    page.wait_for_function(
        "document.querySelector(\".chart-card[data-series-key='train/loss'] .chart-readout\").textContent.includes('mean')"
    )
    readout = big.locator(".chart-readout").text_content()
    assert "first" in readout and "last" in readout and "n " in readout
    big.screenshot(path="/tmp/charts-zoomed.png")

    big.locator("[data-role=reset-zoom]").click()
    page.wait_for_function(
        "document.querySelector(\".chart-card[data-series-key='train/loss']\").dataset.zoomed === 'false' && "
        "document.querySelector(\".chart-card[data-series-key='train/loss']\").dataset.drawn === 'true'"
    )
    assert int(big.get_attribute("data-point-count")) == MILLION
    assert big.locator("[data-role=reset-zoom]").is_hidden()
    assert page.script_errors == []


def test_transport_health_reads_healthy_with_its_counters_then_unknown_when_the_heartbeat_is_stale(
    page, daphne_server, alice
):
    from apps.telemetry.models import TransportHealth

    job, attempt = running_job(alice)
    ingest(attempt, "train/loss", ((s, 1.0 / (s + 1)) for s in range(50)))
    counters = {"queued": 0, "sent": 123_456, "lost": 12, "rejected": 0, "failed_requests": 3,
                "events_queued": 0, "events_sent": 40, "events_lost": 0, "events_rejected": 1}
    health = TransportHealth.objects.create(
        attempt=attempt, last_heartbeat_at=timezone.now(), counters=counters, queue_occupancy=0.375
    )

    sign_in(page, daphne_server)
    page.goto(f"{daphne_server.url}/jobs/{job.public_id}/#charts")
    page.wait_for_function("document.querySelector('[data-role=transport]').dataset.state === 'healthy'")
    transport = page.locator("[data-role=transport]")
    assert transport.locator("[data-role=transport-state]").text_content() == "healthy"
    assert transport.locator("[data-field=sent]").text_content() == "123,456"
    assert transport.locator("[data-field=lost]").text_content() == "12"
    assert "warn-text" in transport.locator("[data-field=lost]").get_attribute("class")
    assert "warn-text" not in transport.locator("[data-field=rejected]").get_attribute("class")
    assert transport.locator("[data-field=failed_requests]").text_content() == "3"
    assert transport.locator("[data-field=events_rejected]").text_content() == "1"
    assert transport.locator("[data-field=queue_occupancy]").text_content() == "37.5%"
    assert "UTC" in transport.locator("[data-field=last_heartbeat]").text_content()
    # No capability snapshot was sent: the strip for it stays out of the way.
    assert page.locator("[data-role=snapshot]").is_hidden()
    transport.screenshot(path="/tmp/charts-transport-healthy.png")

    # The SDK falls silent: on the next refresh the page says "unknown", with why.
    TransportHealth.objects.filter(pk=health.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=20))
    page.wait_for_function(
        "document.querySelector('[data-role=transport]').dataset.state === 'unknown'", timeout=12000
    )
    assert transport.locator("[data-role=transport-reason]").text_content() == "the last heartbeat is stale"
    assert "20 min ago" in transport.locator("[data-field=last_heartbeat]").text_content()
    assert "stopped" not in transport.text_content().lower()
    # The last counters it did send stay visible.
    assert transport.locator("[data-field=lost]").text_content() == "12"
    transport.screenshot(path="/tmp/charts-transport-stale.png")
    assert page.script_errors == []


def test_an_empty_run_says_so_in_every_part_of_the_tab(page, daphne_server, alice):
    job, _ = running_job(alice)

    sign_in(page, daphne_server)
    page.goto(f"{daphne_server.url}/jobs/{job.public_id}/#charts")
    page.locator("[data-role=charts-empty]").wait_for(state="visible")
    page.wait_for_function("document.querySelector('[data-role=transport]').dataset.loaded === 'true'")
    for name in ("observation", "training", "other"):
        assert page.locator(f"[data-group-section={name}]").is_hidden()
    page.locator("[data-role=recent-events-empty]").wait_for(state="visible")
    assert page.locator("[data-role=recent-events-table]").is_hidden()
    assert page.locator("[data-role=histograms-empty]").is_visible()
    assert page.locator("[data-role=health-empty]").is_visible()
    assert page.locator("[data-role=transport-state]").text_content() == "unknown"
    page.screenshot(path="/tmp/charts-empty.png", full_page=True)
    assert page.script_errors == []
