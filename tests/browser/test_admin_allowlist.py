"""An administrator changes the image-registry allowlist in the Django admin (headless
Chromium against a real daphne), and the next submission, over HTTP to the same server,
obeys it: refused before, admitted after the host is added, refused again once it is
disabled. The admin's history lists both changes with who made them."""

from __future__ import annotations

import json

import pytest
import requests
from tuneplane.contracts import errors

from apps.governance.models import AllowedImageRegistry, GovernanceAuditLog
from apps.jobs.models import Job
from tests.conftest import experiment_package, submission, token_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

IMAGE = "quay.io/acme/trainer:v1"


def submit(server_url: str, token: str) -> requests.Response:
    return requests.post(
        f"{server_url}/api/v1/jobs",
        headers={"Authorization": f"Bearer {token}"},
        data={"request": json.dumps(submission(image=IMAGE))},
        files={"package": ("package.tar.gz", experiment_package(), "application/gzip")},
        timeout=30,
    )


def admin_login(page, server_url: str) -> None:
    page.goto(f"{server_url}/admin/login/")
    page.fill("#id_username", "root")
    page.fill("#id_password", "root-password-1")
    page.click("input[type=submit]")
    page.wait_for_url(f"{server_url}/admin/")


def test_an_admin_changes_the_allowlist_and_the_next_submission_obeys(
    daphne_server, page, django_user_model, alice
):
    django_user_model.objects.create_superuser("root", password="root-password-1")
    token = token_for(alice)
    url = daphne_server.url
    assert AllowedImageRegistry.objects.count() == 0

    refused = submit(url, token)
    assert refused.status_code == 400
    assert refused.json() == {"detail": errors.IMAGE_REGISTRIES_EMPTY, "field": "image"}
    assert Job.objects.count() == 0

    # The administrator adds quay.io in the admin.
    admin_login(page, url)
    page.goto(f"{url}/admin/governance/allowedimageregistry/add/")
    page.fill("#id_host", "quay.io")
    page.fill("#id_note", "acme's trainers")
    page.click("input[name=_save]")
    page.wait_for_url(f"{url}/admin/governance/allowedimageregistry/")
    assert "was added successfully" in page.locator(".messagelist").text_content()

    admitted = submit(url, token)
    assert admitted.status_code == 201, admitted.text
    assert admitted.json()["spec"]["runtime"]["image"] == IMAGE
    assert Job.objects.count() == 1

    # ... then disables it again: the next submission is refused.
    page.click("text=quay.io")
    page.uncheck("#id_enabled")
    page.click("input[name=_save]")
    page.wait_for_url(f"{url}/admin/governance/allowedimageregistry/")
    refused_again = submit(url, token)
    assert refused_again.status_code == 400
    assert refused_again.json() == {"detail": errors.IMAGE_REGISTRIES_EMPTY, "field": "image"}
    assert Job.objects.count() == 1

    # The history, in the admin: who changed what, from which value to which.
    page.goto(f"{url}/admin/governance/governanceauditlog/?model=allowedimageregistry")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 2
    newest = rows.nth(0).text_content()
    assert "root" in newest and "Update" in newest and '{"enabled": true}' in newest and '{"enabled": false}' in newest
    assert "Create" in rows.nth(1).text_content()
    assert list(GovernanceAuditLog.objects.filter(model="allowedimageregistry")
                .values_list("actor__username", "action")) == [
        ("root", "update"), ("root", "create")]
    # Django's admin pages link no favicon, so Chromium's own /favicon.ico request 404s
    # (a console message); what must not happen is a script error.
    assert [e for e in page.script_errors if e.startswith("pageerror")] == []


def test_the_job_page_lists_pod_events_on_its_events_tab(daphne_server, page, alice):
    from django.utils import timezone

    from apps.jobs import services
    from apps.jobs.k8s.models import ClusterEvent

    job, _ = services.submit_job(alice, json.dumps(submission()), experiment_package())
    attempt, _ = services.start_attempt(job.pk)
    now = timezone.now()
    ClusterEvent.objects.create(
        attempt=attempt, uid="e1", type="Warning", reason="FailedScheduling", source="default-scheduler",
        message="0/4 nodes are available: 4 Insufficient nvidia.com/gpu. <b>not bold</b>",
        involved_object="Pod/tp-exp-a1-0-abcde", count=3, first_seen=now, last_seen=now,
    )

    page.goto(f"{daphne_server.url}/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-password-1")
    page.click("button[type=submit], input[type=submit]")
    page.goto(f"{daphne_server.url}/jobs/{job.public_id}/#events")

    rows = page.locator("[data-role=events] tr")
    rows.first.wait_for()
    assert rows.count() == 1
    text = rows.first.text_content()
    assert "FailedScheduling" in text and "Pod/tp-exp-a1-0-abcde" in text and "3" in text
    # Text, never markup: the message's tags show as typed.
    assert page.locator("[data-role=events] b").count() == 0
    assert "<b>not bold</b>" in text
    assert page.locator("#tab-events").get_attribute("aria-selected") == "true"
    assert page.locator("[data-role=events-status]").text_content() == "1 event"
    assert page.script_errors == []
