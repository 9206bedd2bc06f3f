"""The Charts tab's server-rendered part, through Django's test client: its sections, the
URLs it hands the script (and that they answer for the owner only), the CSV links, the
transport strip's starting state; and that its script stays offline and text-only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.contrib.staticfiles import finders
from django.urls import reverse

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def charts_panel(html: str) -> str:
    """The Charts tab panel: from its opening tag to the next tab panel."""
    start = html.index('id="panel-charts"')
    end = html.find('role="tabpanel"', start + 1)
    return html[start:end if end != -1 else len(html)]


def read_stream(response) -> str:
    """The body of a streamed response whose iterator is asynchronous (as daphne serves it)."""

    async def collect() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(collect)().decode()


def attr(tag_html: str, name: str) -> str:
    match = re.search(rf'\b{name}="([^"]*)"', tag_html)
    assert match, f"no {name} in {tag_html[:200]}"
    return match.group(1)


@pytest.fixture
def page(client, alice, make_job):
    job, _, _ = make_job()
    client.force_login(alice)
    response = client.get(reverse("console:job-detail", args=[job.public_id]))
    assert response.status_code == 200
    return job, charts_panel(response.content.decode())


def test_the_panel_hands_the_script_the_events_observations_and_csv_urls(page):
    job, panel = page
    opening = panel[: panel.index(">")]

    assert attr(opening, "data-events-url") == reverse("api:job-events", args=[job.public_id])
    assert attr(opening, "data-observations-url") == reverse("api:job-observations", args=[job.public_id])
    assert attr(opening, "data-csv-url") == f"/api/v1/jobs/{job.public_id}/series.csv"


def test_the_metrics_are_split_into_observation_coverage_training_health_and_other(page):
    _, panel = page

    sections = re.findall(r'data-group-section="(\w+)"[^>]*>\s*<h2[^>]*>([^<]+)<', panel)
    assert sections == [
        ("observation", "Observation coverage "),
        ("training", "Training health "),
        ("other", "Other metrics "),
    ]
    # Each section holds its own grid the script fills, and starts hidden until it has a chart.
    assert panel.count('data-role="group-charts"') == 3
    for name, _ in sections:
        tag = re.search(rf'<section[^>]*data-group-section="{name}"[^>]*>', panel).group(0)
        assert " hidden" in tag


def test_download_csv_links_to_the_streamed_export(page):
    job, panel = page

    link = re.search(r'<a [^>]*data-role="csv-all"[^>]*>([^<]*)</a>', panel)
    assert link is not None
    assert link.group(1) == "Download CSV"
    assert attr(link.group(0), "href") == reverse("api:job-series-csv", args=[job.public_id])
    assert " download" in link.group(0)


def test_transport_starts_unknown_and_the_tab_never_says_stopped(page):
    _, panel = page

    strip = re.search(r'<div class="transport" data-role="transport"[^>]*>', panel).group(0)
    assert attr(strip, "data-state") == "unknown"
    badge = re.search(r'data-role="transport-state">([^<]*)<', panel).group(1)
    assert badge == "unknown"
    for field in ["last_heartbeat", "sent", "lost", "rejected", "failed_requests", "events_lost", "queue_occupancy"]:
        assert f'data-field="{field}"' in panel, field
    assert "stopped" not in re.sub(r"does not mean training stopped", "", panel).lower()
    assert "does not mean training stopped" in panel


def test_the_events_panel_has_recent_events_histograms_and_health_apart(page):
    _, panel = page

    for role in ["recent-events-table", "event-rows", "histograms", "health-table", "health-rows"]:
        assert f'data-role="{role}"' in panel, role
    assert panel.index('data-role="event-rows"') < panel.index('data-role="histograms"') < panel.index(
        'data-role="health-rows"'
    )
    # The run snapshot stays hidden until the run sent one.
    snapshot = re.search(r'<div class="run-snapshot" data-role="snapshot"[^>]*>', panel).group(0)
    assert " hidden" in snapshot


def test_the_urls_in_the_page_answer_the_owner_and_no_one_else(client, alice, bob, make_job):
    job, _, _ = make_job()
    client.force_login(alice)
    panel = charts_panel(client.get(reverse("console:job-detail", args=[job.public_id])).content.decode())
    opening = panel[: panel.index(">")]
    events = f'{attr(opening, "data-events-url")}?kind=event&limit=100'
    observations = attr(opening, "data-observations-url")
    csv = attr(opening, "data-csv-url")

    assert client.get(events).json() == {"results": []}
    body = client.get(observations).json()
    assert body["transport"]["state"] == "unknown"
    assert body["transport"]["reason"] == "no heartbeat received"
    response = client.get(csv)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert read_stream(response) == "key,step,value,attempt,ts\r\n"

    client.force_login(bob)
    assert client.get(reverse("console:job-detail", args=[job.public_id])).status_code == 404
    for url in [events, observations, csv]:
        assert client.get(url).status_code == 404, url


def test_the_charts_script_is_served_offline_and_writes_text_only():
    path = finders.find("console/charts.js")
    assert path, "console/charts.js is not a static file"
    source = Path(path).read_text()

    # Offline: no CDN or any other absolute URL to fetch from.
    assert re.findall(r"https?://", source) == []
    # Text from the API goes in through textContent, never parsed as HTML.
    for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"]:
        assert sink not in source, sink


def test_the_job_page_loads_the_charts_script_after_the_vendored_chart_library(client, alice, make_job):
    job, _, _ = make_job()
    client.force_login(alice)
    html = client.get(reverse("console:job-detail", args=[job.public_id])).content.decode()

    scripts = re.findall(r'<script src="([^"]+)"', html)
    assert "/static/vendor/uplot/uPlot.iife.min.js" in scripts
    assert "/static/console/charts.js" in scripts
    assert scripts.index("/static/vendor/uplot/uPlot.iife.min.js") < scripts.index("/static/console/charts.js")
