"""The console in headless Chromium against a real daphne: sign in, watch a running job's
logs arrive live, see its charts drawn, and survive a server restart mid-stream."""

from __future__ import annotations

import math
import re
from datetime import timedelta

import pytest
from django.utils import timezone

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "alice-password-1"  # tests/conftest.py's alice


# Data -------------------------------------------------------------------------------


def running_job(owner, public_id: str = "browser-demo-1a2b3c"):
    """A running job with one running attempt, written straight to the database (the
    server under test only reads it)."""
    from apps.jobs.models import ExecutionAttempt, Job, JobPackage
    from apps.recipes.models import Recipe
    from apps.recipes.services import load_catalogue

    load_catalogue()
    recipe = Recipe.objects.get(name="custom/custom")
    package = JobPackage.objects.create(sha256="ab" * 32, size=48213, storage_name="packages/ab/test.tar.gz")
    started = timezone.now() - timedelta(minutes=7, seconds=12)
    spec = {
        "apiVersion": "tuneplane/job/v1",
        "experiment": "browser-demo",
        "operation": "train",
        "recipe": {"name": recipe.name, "version": recipe.version, "digest": recipe.digest},
        "framework": {
            "name": "custom",
            "observability": "external",
            "observability_url": "https://wandb.example/my-proj",
            "entrypoint": "experiments/browser-demo/train.sh",
        },
        "runtime": {"image": "registry.example.com/my-trainer:v1", "pinned": False},
        "resources": {"profile": "h200:8", "gpu_type": "h200", "num_nodes": 1, "gpus_per_node": 8, "fleet": "gpu"},
        "hyperparams": {"lr": "1e-5", "batch_size": "8"},
        "package": {"sha256": package.sha256, "size": package.size},
    }
    job = Job.objects.create(
        public_id=public_id, owner=owner, experiment="browser-demo", recipe=recipe, spec=spec, package=package,
        state="running", queued_at=started, started_at=started,
    )
    ExecutionAttempt.objects.create(job=job, number=1, executor="local", state="running", started_at=started)
    return job


def add_lines(job, first_seq: int, count: int, attempt: int = 1) -> list[str]:
    """Log lines first_seq..; every seventh goes to stderr. Returns their texts."""
    from apps.telemetry.models import LogLine, LogStream

    now = timezone.now()
    rows = [
        LogLine(
            job=job, attempt_number=attempt, seq=seq,
            stream=LogStream.STDERR if seq % 7 == 0 else LogStream.STDOUT,
            # Markup in a log line must show as text, never become DOM.
            text=(f"step {seq}: loss={1 / seq:.4f}" if seq % 7 else f"warning <b>{seq}</b> & grad-norm spike"),
            ts=now,
        )
        for seq in range(first_seq, first_seq + count)
    ]
    LogLine.objects.bulk_create(rows)
    return [r.text for r in rows]


def add_points(job, key: str, values: dict[int, float]) -> None:
    """Scalar points by step; a non-finite value is stored as the ingest path stores it."""
    from apps.telemetry.models import ScalarPoint, ScalarSeries
    from apps.telemetry.scalars import rebuild_series

    series, _ = ScalarSeries.objects.get_or_create(job=job, key=key)
    now = timezone.now()
    points = []
    for step, value in values.items():
        if math.isfinite(value):
            points.append(ScalarPoint(series=series, step=step, value=value, attempt_number=1, ts=now))
        else:
            kind = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
            points.append(ScalarPoint(series=series, step=step, value=None, invalid=kind, attempt_number=1, ts=now))
    ScalarPoint.objects.bulk_create(points, update_conflicts=True, unique_fields=["series", "step"],
                                    update_fields=["value", "invalid"])
    rebuild_series(series.pk)  # rollups and summary, as ingest keeps them


def finish(job, state: str = "succeeded", exit_code: int = 0) -> None:
    from apps.jobs.models import ExecutionAttempt, Job

    now = timezone.now()
    ExecutionAttempt.objects.filter(job=job).update(state=state, exit_code=exit_code, finished_at=now)
    Job.objects.filter(pk=job.pk).update(state=state, exit_code=exit_code, finished_at=now)


# Browser helpers --------------------------------------------------------------------


def sign_in(page, server, username: str = "alice", password: str = PASSWORD) -> None:
    page.goto(f"{server.url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{server.url}/")


def log_texts(page) -> list[str]:
    return page.locator(".logview .ln .ln-text").all_text_contents()


def wait_for_line_count(page, count: int) -> None:
    page.wait_for_function(
        "n => document.querySelectorAll('.logview .ln').length === n", arg=count, timeout=15000
    )


# Tests ------------------------------------------------------------------------------


def test_logs_stream_in_order_and_new_lines_appear_live(page, daphne_server, alice):
    job = running_job(alice)
    first = add_lines(job, 1, 40)

    sign_in(page, daphne_server)
    page.screenshot(path="/tmp/console-jobs.png", full_page=True)
    assert page.locator(f"a[href='/jobs/{job.public_id}/']").is_visible()

    page.goto(f"{daphne_server.url}/jobs/{job.public_id}/")
    # A running job opens on Logs.
    assert page.locator("[data-panel=logs]").is_visible()
    wait_for_line_count(page, 40)
    assert log_texts(page) == first
    assert page.locator(".stream-status").get_attribute("data-status") == "live"
    stderr = page.locator(".logview .ln.err .ln-text").all_text_contents()
    assert stderr == [t for i, t in enumerate(first, start=1) if i % 7 == 0]
    assert page.locator(".logview b").count() == 0  # markup stayed text

    more = add_lines(job, 41, 15)
    wait_for_line_count(page, 55)
    assert log_texts(page) == first + more
    assert page.locator("[data-role=line-count]").text_content() == "55"
    page.screenshot(path="/tmp/console-logs.png", full_page=True)

    # The job ends: the stream sends `state` then `end`; the page closes the stream and
    # updates the badge and the status without a reload.
    finish(job, "failed", exit_code=3)
    page.wait_for_function("document.querySelector('.stream-status').dataset.status === 'finished'")
    assert page.locator(".job-title [data-live=state-badge]").text_content() == "failed"
    assert "failed" in page.locator(".stream-status-text").text_content()
    page.wait_for_function("document.querySelector('[data-live=exit_code]').textContent === '3'")
    page.screenshot(path="/tmp/console-finished.png")
    # No reconnect after `end`: the count stays put.
    page.wait_for_timeout(2500)
    assert len(log_texts(page)) == 55
    assert page.script_errors == []


def test_charts_draw_one_canvas_per_series_and_refresh_while_running(page, daphne_server, alice):
    job = running_job(alice)
    add_lines(job, 1, 5)
    # More steps than the chart has pixels, so the server buckets them; noisy, so the
    # min-max band shows; and one spike the band must keep after the mean smooths it.
    loss = {step: 2.0 * math.exp(-step / 900) + 0.08 * math.sin(step * 1.7) for step in range(1, 3001)}
    loss[1800] = 3.5
    add_points(job, "train/loss", loss)
    add_points(job, "train/lr", {step: 1e-5 * min(1, step / 50) for step in range(1, 201)})
    add_points(job, "eval/accuracy", {10: 0.41, 20: 0.55, 30: float("nan"), 40: 0.68, 50: 0.71})
    expected = {"train/loss": 3000, "train/lr": 200, "eval/accuracy": 4}  # NaN is counted, not drawn

    sign_in(page, daphne_server)
    page.goto(f"{daphne_server.url}/jobs/{job.public_id}/#charts")
    page.wait_for_function("document.querySelectorAll('.chart-card[data-drawn=true]').length === 3")

    cards = page.locator(".chart-card")
    keys = [cards.nth(i).get_attribute("data-series-key") for i in range(cards.count())]
    assert keys == ["eval/accuracy", "train/loss", "train/lr"]  # the API's order
    for key, count in expected.items():
        card = page.locator(f".chart-card[data-series-key='{key}']")
        assert card.locator("canvas").count() == 1
        assert card.get_attribute("data-point-count") == str(count)
        assert card.locator(".chart-title").text_content() == key
    loss_card = page.locator(".chart-card[data-series-key='train/loss']")
    plot_width = loss_card.locator(".chart-plot").evaluate("el => el.clientWidth")
    assert int(loss_card.get_attribute("data-bucket-count")) <= plot_width < 3000
    accuracy = page.locator(".chart-card[data-series-key='eval/accuracy']")
    assert accuracy.locator("[data-field=invalid_count]").text_content() == "1"
    assert accuracy.locator("[data-field=count]").text_content() == "5"
    assert accuracy.locator("[data-field=last]").text_content() == "0.71"
    assert page.locator(".chart-card[data-series-key='train/loss'] [data-field=max]").text_content() == "3.5"
    assert page.locator("[data-role=charts-empty]").is_hidden()
    page.screenshot(path="/tmp/console-charts.png", full_page=True)

    # While the job runs the charts refresh on their own (every ~5 s).
    add_points(job, "eval/accuracy", {60: 0.74, 70: 0.77})
    page.wait_for_function(
        "document.querySelector(\".chart-card[data-series-key='eval/accuracy']\").dataset.pointCount === '6'",
        timeout=12000,
    )

    page.click("#tab-overview")
    assert page.url.endswith("#overview")
    overview = page.locator("[data-panel=overview]")
    assert overview.is_visible()
    assert "h200:8" in overview.text_content()
    assert job.package.sha256 in overview.text_content()
    page.screenshot(path="/tmp/console-overview.png", full_page=True)
    assert page.script_errors == []


def test_a_job_without_points_explains_how_charts_get_them(page, daphne_server, alice):
    job = running_job(alice)
    finish(job)

    sign_in(page, daphne_server)
    page.goto(f"{daphne_server.url}/jobs/{job.public_id}/")
    # A finished job opens on Overview.
    assert page.locator("[data-panel=overview]").is_visible()
    page.click("#tab-charts")
    empty = page.locator("[data-role=charts-empty]")
    empty.wait_for(state="visible")
    assert "No points yet" in empty.text_content()
    assert "log()" in empty.text_content()
    assert page.locator(".chart-card").count() == 0
    assert page.script_errors == []


def test_the_log_stream_resumes_without_gaps_or_duplicates_after_a_server_restart(page, daphne_server, alice):
    job = running_job(alice)
    first = add_lines(job, 1, 20)

    sign_in(page, daphne_server)
    page.goto(f"{daphne_server.url}/jobs/{job.public_id}/#logs")
    wait_for_line_count(page, 20)

    daphne_server.stop()
    page.wait_for_function("document.querySelector('.stream-status').dataset.status === 'reconnecting'")
    more = add_lines(job, 21, 10)  # written while nobody serves the stream
    daphne_server.start()

    wait_for_line_count(page, 30)
    page.wait_for_function("document.querySelector('.stream-status').dataset.status === 'live'")
    assert log_texts(page) == first + more
    # The browser logs the refused connections while the server is down; nothing else.
    assert [e for e in page.script_errors if not re.search(r"ERR_CONNECTION_REFUSED|Failed to load resource", e)] == []


def test_another_users_job_page_is_not_found_in_the_browser(page, daphne_server, alice, bob):
    job = running_job(alice)
    add_lines(job, 1, 3)

    page.goto(f"{daphne_server.url}/jobs/{job.public_id}/")
    assert "/login/?next=" in page.url
    page.fill("input[name=username]", "bob")
    page.fill("input[name=password]", "wrong-password")
    page.click("button[type=submit]")
    assert page.locator("[role=alert]").is_visible()
    page.screenshot(path="/tmp/console-login.png")

    sign_in(page, daphne_server, "bob", "bob-password-1")
    assert "No jobs yet" in page.content()  # alice's job is not in bob's list
    page.screenshot(path="/tmp/console-empty.png")
    response = page.goto(f"{daphne_server.url}/jobs/{job.public_id}/")

    assert response.status == 404
    assert "Not found" in page.content()
    assert "step 1" not in page.content() and job.package.sha256 not in page.content()
    # The stream answers the same way.
    stream = page.request.get(f"{daphne_server.url}/api/v1/jobs/{job.public_id}/logs/stream")
    assert stream.status == 404


def test_a_huge_log_is_capped_in_the_page_and_the_badge_follows_the_job(page, daphne_server, alice):
    from apps.jobs.models import Job

    job = running_job(alice)
    Job.objects.filter(pk=job.pk).update(state="queued")
    texts = add_lines(job, 1, 25000)

    sign_in(page, daphne_server)
    page.goto(f"{daphne_server.url}/jobs/{job.public_id}/#logs")
    assert page.locator(".job-title [data-live=state-badge]").text_content() == "queued"
    page.wait_for_function("document.querySelector('[data-role=line-count]').textContent === '25,000'")

    # Only the newest 20,000 lines stay in the DOM, with a note saying so.
    assert page.locator(".logview .ln").count() == 20000
    assert page.locator(".logview .ln-text").last.text_content() == texts[-1]
    assert page.locator(".logview .ln-text").first.text_content() == texts[5000]
    assert "last 20,000 lines" in page.locator("[data-role=cap-note]").text_content()

    # The stream reports only the final state; the page polls the job for the rest.
    Job.objects.filter(pk=job.pk).update(state="running")
    page.wait_for_function(
        "document.querySelector('.job-title [data-live=state-badge]').textContent === 'running'", timeout=12000
    )
    assert page.script_errors == []
