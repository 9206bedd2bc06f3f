"""The Environments pages in headless Chromium against a real daphne: the list, a
version's detail with its tools, task counts and the runs that referenced it, and a
runner drained from the console."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone
from tuneplane.contracts.environment_bundle import build_archive, collect_directory

from tests.browser.test_console import sign_in
from tests.conftest import experiment_package, submission
from tests.environments.conftest import CALCULATOR, EVAL_SENTINEL, TRAIN_SENTINEL

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def publish(owner):
    """The spec's calculator example, pushed by Alice, and one training run that used it."""
    from apps.environments import services
    from apps.jobs import services as jobs

    version = services.push_environment(
        owner,
        json.dumps({"name": "calculator-tasks", "version": "1.0.0"}),
        build_archive(collect_directory(CALCULATOR)),
    )
    job, _ = jobs.submit_job(
        owner,
        json.dumps(submission(experiment="calc-agent", environment="alice/calculator-tasks@1.0.0")),
        experiment_package("calc-agent"),
    )
    return version, job


def remote_with_runners(owner):
    from apps.environments import services
    from apps.environments.models import Runner

    manifest = {
        "schema": "tuneplane/environment/v1",
        "protocol": "openenv",
        "deployment": "remote",
        "verifier": {"kind": "endpoint", "ref": "self"},
        "fleet": "pool",
    }
    version = services.push_environment(
        owner,
        json.dumps({"name": "shared-sim", "version": "1.0.0"}),
        build_archive({"manifest.json": json.dumps(manifest).encode()}),
    )
    up = Runner.objects.create(
        version=version,
        url="http://10.2.0.1:8000",
        label="box-1",
        registered_by=owner,
        answering=True,
        last_answered_at=timezone.now(),
        fleet="pool",
    )
    down = Runner.objects.create(
        version=version,
        url="http://10.2.0.2:8000",
        label="box-2",
        registered_by=owner,
        answering=False,
        last_error="GET http://10.2.0.2:8000/health failed: connection refused",
    )
    return version, up, down


def test_the_environments_page_and_a_version_detail(page, daphne_server, alice):
    _version, job = publish(alice)
    sign_in(page, daphne_server)

    page.click("nav.topnav >> text=Environments")
    page.wait_for_url(f"{daphne_server.url}/environments/")
    row = page.locator("tr[data-environment='alice/calculator-tasks']")
    assert row.count() == 1
    cells = row.locator("td").all_text_contents()
    assert cells[0].strip() == "alice/calculator-tasks"
    assert cells[1:7] == [
        "1.0.0",
        "openenv",
        "local",
        "rubric: alice/arithmetic-correctness",
        "calculator",
        "not required",
    ]
    assert page.locator("nav.topnav a[aria-current=page]").text_content() == "Environments"

    row.locator("a").click()
    page.wait_for_url(f"{daphne_server.url}/environments/alice/calculator-tasks/1.0.0/")
    assert page.locator("h1").text_content() == "alice/calculator-tasks@1.0.0"
    assert page.locator("[data-field=protocol]").text_content() == "openenv"
    assert (
        page.locator("[data-field=verifier]").text_content()
        == "rubric: alice/arithmetic-correctness"
    )
    assert page.locator("[data-field=sandbox]").text_content() == "not required"
    assert page.locator("[data-split=train]").text_content() == "3 tasks"
    assert page.locator("[data-split=eval]").text_content() == "2 tasks"
    tools = page.locator(".tools-table tbody tr td").all_text_contents()
    assert tools[:2] == ["calculator", "/tools/calculator"]
    assert json.loads(tools[2])["required"] == ["expression"]
    body = page.locator("body").inner_text()
    assert TRAIN_SENTINEL not in body and EVAL_SENTINEL not in body  # counts, never content

    run_link = page.locator(".runs-table a", has_text=job.public_id)
    assert run_link.count() == 1
    run_link.click()
    page.wait_for_url(f"{daphne_server.url}/jobs/{job.public_id}/")
    assert page.script_errors == []


def test_runners_show_their_state_and_are_drained_from_the_console(page, daphne_server, alice):
    _version, up, _down = remote_with_runners(alice)
    sign_in(page, daphne_server)
    page.goto(f"{daphne_server.url}/environments/alice/shared-sim/1.0.0/")
    states = page.locator(".runners-table td .badge").all_text_contents()
    assert states == ["answering", "not answering"]
    page.locator(f"tr[data-runner='{up.pk}'] button", has_text="Drain").click()
    page.wait_for_url(f"{daphne_server.url}/environments/alice/shared-sim/1.0.0/")
    assert "drained: it stays listed" in page.locator(".env-messages").inner_text()
    assert page.locator(".runners-table td .badge").all_text_contents() == [
        "drained",
        "not answering",
    ]
    up.refresh_from_db()
    assert up.drained_by == alice
    assert page.script_errors == []
