"""The console's Environments pages and the admin, through Django's test client."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.utils import timezone

from apps.environments.models import EnvironmentVersion, Runner
from apps.jobs import services as jobs
from tests.conftest import experiment_package, submission

from .conftest import EVAL_SENTINEL, TRAIN_SENTINEL, manifest_bytes, push

pytestmark = pytest.mark.django_db
VERSION_URL = "/environments/alice/calculator-tasks/1.0.0/"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def calculator(alice, alice_api):
    assert push(alice_api).status_code == 201
    job, _ = jobs.submit_job(
        alice,
        json.dumps(submission(environment="alice/calculator-tasks@1.0.0")),
        experiment_package(),
    )
    return job


def test_the_environments_page_lists_protocol_verifier_tools_and_sandbox(
    alice, calculator, django_assert_max_num_queries
):
    client = signed_in(alice)
    with django_assert_max_num_queries(8):
        page = client.get("/environments/")
    assert page.status_code == 200
    html = page.content.decode()
    for text in (
        "alice/calculator-tasks",
        "1.0.0",
        "openenv",
        "local",
        "rubric: alice/arithmetic-correctness",
        "calculator",
        "not required",
    ):
        assert text in html
    assert 'href="/environments/"' in client.get("/").content.decode()  # the nav link


def test_the_list_page_does_not_grow_queries_with_environments(
    alice, alice_api, django_assert_max_num_queries
):
    for index in range(6):
        assert push(alice_api, name=f"env-{index}").status_code == 201
        assert push(alice_api, name=f"env-{index}", version="2").status_code == 201
    client = signed_in(alice)
    with django_assert_max_num_queries(8):
        assert client.get("/environments/").status_code == 200


def test_a_version_page_shows_the_same_plus_the_runs_that_referenced_it(alice, calculator):
    page = signed_in(alice).get(VERSION_URL)
    assert page.status_code == 200
    html = page.content.decode()
    for text in (
        "openenv",
        "rubric: alice/arithmetic-correctness",
        "/tools/calculator",
        "not required",
        "3 tasks",
        "2 tasks",
        calculator.public_id,
        "manifest.json",
        "tasks.jsonl",
    ):
        assert text in html
    assert TRAIN_SENTINEL not in html and EVAL_SENTINEL not in html
    assert signed_in(alice).get("/environments/alice/calculator-tasks/").url == VERSION_URL


def test_another_users_private_version_page_is_a_404(bob, calculator):
    assert signed_in(bob).get(VERSION_URL).status_code == 404
    assert (
        'data-environment="alice/calculator-tasks"'
        not in signed_in(bob).get("/environments/").content.decode()
    )


def test_runners_are_listed_whatever_their_state_and_drained_from_the_console(
    alice, bob, alice_api
):
    files = {"manifest.json": manifest_bytes(deployment="remote", fleet="pool")}
    assert push(alice_api, files, name="sim", public=True).status_code == 201
    version = EnvironmentVersion.objects.get()
    now = timezone.now()
    up = Runner.objects.create(
        version=version,
        url="http://10.1.0.1:8000",
        registered_by=alice,
        answering=True,
        last_answered_at=now,
        fleet="pool",
    )
    Runner.objects.create(
        version=version, url="http://10.1.0.2:8000", registered_by=alice, answering=False
    )
    page = signed_in(alice).get("/environments/alice/sim/1.0.0/").content.decode()
    assert "http://10.1.0.1:8000" in page and "http://10.1.0.2:8000" in page
    assert ">answering<" in page and ">not answering<" in page

    drain_url = f"/environments/alice/sim/1.0.0/runners/{up.pk}/drain"
    refused = signed_in(bob).post(drain_url, follow=True)
    assert "only alice can drain runners of alice/sim@1.0.0" in refused.content.decode()
    assert Runner.objects.get(pk=up.pk).drained_at is None

    done = signed_in(alice).post(drain_url, follow=True)
    assert done.status_code == 200
    assert "drained: it stays listed" in done.content.decode()
    assert Runner.objects.get(pk=up.pk).drained_by == alice
    assert ">drained<" in done.content.decode() and Runner.objects.count() == 2


def test_the_admin_searches_filters_and_keeps_versions_read_only(sam, calculator):
    sam.is_superuser = True
    sam.save()
    client = signed_in(sam)
    listing = client.get(
        "/admin/environments/environmentversion/?q=calculator&protocol__exact=openenv"
    )
    assert listing.status_code == 200 and "alice/calculator-tasks@1.0.0" in listing.content.decode()
    empty = client.get("/admin/environments/environmentversion/?q=nothing-like-this")
    assert "alice/calculator-tasks@1.0.0" not in empty.content.decode()
    version = EnvironmentVersion.objects.get()
    change = client.get(f"/admin/environments/environmentversion/{version.pk}/change/")
    assert change.status_code == 200
    html = change.content.decode()
    assert 'name="_save"' not in html  # view-only
    assert TRAIN_SENTINEL not in html and EVAL_SENTINEL not in html
    posted = client.post(
        f"/admin/environments/environmentversion/{version.pk}/change/", {"version": "9"}
    )
    assert posted.status_code == 403
    assert EnvironmentVersion.objects.get().version == "1.0.0"
    assert (
        client.post(
            f"/admin/environments/environmentversion/{version.pk}/delete/", {"post": "yes"}
        ).status_code
        == 403
    )
    assert EnvironmentVersion.objects.count() == 1


def test_the_admin_drains_runners_and_never_deletes_them(sam, alice, alice_api):
    sam.is_superuser = True
    sam.save()
    assert (
        push(
            alice_api,
            {"manifest.json": manifest_bytes(deployment="remote", fleet="pool")},
            name="sim",
        ).status_code
        == 201
    )
    runner = Runner.objects.create(
        version=EnvironmentVersion.objects.get(), url="http://10.1.0.1:8000", registered_by=alice
    )
    client = signed_in(sam)
    response = client.post(
        "/admin/environments/runner/", {"action": "drain_runners", "_selected_action": [runner.pk]}
    )
    assert response.status_code == 302
    runner.refresh_from_db()
    assert runner.drained_by == sam and runner.drained_at is not None
    filtered = client.get("/admin/environments/runner/?drained_at__isnull=False").content.decode()
    assert "http://10.1.0.1:8000" in filtered
    assert (
        client.post(f"/admin/environments/runner/{runner.pk}/delete/", {"post": "yes"}).status_code
        == 403
    )
    assert Runner.objects.count() == 1
