"""The console pages, through Django's test client: who may see what, what each page
shows, and that the job list costs a fixed number of queries however many jobs exist."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from apps.jobs.models import Job

pytestmark = pytest.mark.django_db


def job_url(job: Job) -> str:
    return reverse("console:job-detail", args=[job.public_id])


# Authentication ---------------------------------------------------------------------


def test_the_login_page_has_the_form_fields(client):
    response = client.get(reverse("console:login"))

    assert response.status_code == 200
    html = response.content.decode()
    assert 'name="username"' in html
    assert 'name="password"' in html
    assert "csrfmiddlewaretoken" in html


def test_a_wrong_password_is_refused_with_a_message(client, alice):
    response = client.post(reverse("console:login"), {"username": "alice", "password": "nope"})

    assert response.status_code == 200
    assert 'role="alert"' in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_alice_signs_in_and_lands_on_the_job_list(client, alice):
    response = client.post(reverse("console:login"), {"username": "alice", "password": "alice-password-1"})

    assert response.status_code == 302
    assert response["Location"] == reverse("console:job-list")


@pytest.mark.parametrize("path", ["/", "/jobs/exp-abc123/"])
def test_it_redirects_anonymous_visitors_to_the_login_page(client, path):
    response = client.get(path)

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("console:login") + "?next=")


def test_logout_is_a_post_form_with_csrf(client, alice):
    client.force_login(alice)
    html = client.get("/").content.decode()
    form = re.search(r'<form method="post" action="/logout/".*?</form>', html, re.S)
    assert form is not None and "csrfmiddlewaretoken" in form.group(0)

    # A GET must not sign anyone out (Django 5 refuses it); the POST does.
    assert client.get(reverse("console:logout")).status_code == 405
    assert "_auth_user_id" in client.session
    assert client.post(reverse("console:logout")).status_code == 302
    assert "_auth_user_id" not in client.session


def test_the_admin_link_is_for_staff_only(client, alice, sam):
    client.force_login(alice)
    assert 'href="/admin/"' not in client.get("/").content.decode()
    client.force_login(sam)
    assert 'href="/admin/"' in client.get("/").content.decode()


# Job list ---------------------------------------------------------------------------


def test_the_empty_list_explains_tp_new_and_tp_submit(client, alice):
    client.force_login(alice)

    html = client.get("/").content.decode()

    assert "No jobs yet" in html
    assert "tp new my-custom --method custom/custom" in html
    assert "tp submit my-custom" in html


def test_alice_sees_her_jobs_with_state_recipe_and_profile(client, alice, make_job):
    job, _, _ = make_job(experiment="my-custom")
    client.force_login(alice)

    html = client.get("/").content.decode()

    assert f'href="{job_url(job)}"' in html
    assert 'class="badge state-queued"' in html
    assert "custom/custom" in html
    assert job.spec["resources"]["profile"] in html


def test_bob_does_not_see_alices_jobs_in_his_list(client, bob, make_job):
    job, _, _ = make_job()
    client.force_login(bob)

    html = client.get("/").content.decode()

    assert job.public_id not in html
    assert "No jobs yet" in html


def test_staff_see_every_owners_jobs(client, sam, bob, make_job):
    alices, _, _ = make_job(experiment="alices")
    bobs, _, _ = make_job(owner=bob, experiment="bobs")
    client.force_login(sam)

    html = client.get("/").content.decode()

    assert alices.public_id in html and bobs.public_id in html
    assert "<th>Owner</th>" in html


def test_the_state_filter_narrows_the_list(client, alice, make_job):
    queued, _, _ = make_job(experiment="queued-one")
    pending, _, _ = make_job(experiment="pending-one", attempt=False)
    client.force_login(alice)

    html = client.get("/?state=pending").content.decode()

    assert pending.public_id in html
    assert queued.public_id not in html


def test_the_job_list_does_not_grow_queries_with_the_number_of_jobs(
    client, alice, make_job, django_assert_max_num_queries
):
    client.force_login(alice)
    for i in range(30):
        make_job(experiment=f"exp-{i}", attempt=i % 2 == 0)

    # session + user + one query for the jobs with owner, recipe and package joined in
    with django_assert_max_num_queries(3):
        response = client.get("/")

    assert response.status_code == 200
    assert response.content.decode().count('class="badge state-') == 30


# Job page ---------------------------------------------------------------------------


def test_alice_sees_her_job_page(client, alice, make_job):
    job, attempt, _ = make_job(experiment="my-custom")
    client.force_login(alice)

    response = client.get(job_url(job))

    assert response.status_code == 200
    html = response.content.decode()
    assert job.public_id in html
    assert job.package.sha256 in html
    assert job.spec["runtime"]["image"] in html
    assert job.spec["framework"]["observability_url"] in html
    assert "&quot;apiVersion&quot;: &quot;tuneplane/job/v1&quot;" in html  # the compiled spec, escaped
    assert attempt.executor in html
    # The page's scripts get their endpoints from json_script, not from inline code.
    assert 'id="job-page-config"' in html
    assert f"/api/v1/jobs/{job.public_id}/logs/stream" in html


def test_the_job_page_costs_a_fixed_number_of_queries(client, alice, make_job, django_assert_max_num_queries):
    job, _, _ = make_job()
    client.force_login(alice)

    # session + user + the job (owner, recipe, package joined) + its attempts
    with django_assert_max_num_queries(4):
        assert client.get(job_url(job)).status_code == 200


def test_bob_gets_a_404_for_alices_job_page_and_sees_none_of_its_data(client, bob, make_job):
    job, _, _ = make_job(experiment="secret-experiment")
    client.force_login(bob)

    response = client.get(job_url(job))

    assert response.status_code == 404
    html = response.content.decode()
    assert job.package.sha256 not in html
    assert job.spec["runtime"]["image"] not in html
    assert "secret-experiment" not in html.replace(job.public_id, "")


def test_an_unknown_job_is_a_404(client, alice):
    client.force_login(alice)

    assert client.get("/jobs/no-such-job/").status_code == 404


def test_staff_see_any_job_page(client, sam, make_job):
    job, _, _ = make_job()
    client.force_login(sam)

    response = client.get(job_url(job))

    assert response.status_code == 200
    assert job.package.sha256 in response.content.decode()


def test_hyperparameters_and_failure_reasons_are_escaped(client, alice, make_job):
    job, _, _ = make_job()
    Job.objects.filter(pk=job.pk).update(
        spec={**job.spec, "hyperparams": {"note": "<script>alert(1)</script>"}},
        failure_reason="<img src=x onerror=alert(2)>",
        state="failed",
    )
    client.force_login(alice)

    html = client.get(job_url(job)).content.decode()

    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img src=x" not in html


def test_a_non_http_observability_url_is_not_made_a_link(client, alice, make_job):
    job, _, _ = make_job()
    spec = {**job.spec, "framework": {**job.spec["framework"], "observability_url": "javascript:alert(1)"}}
    Job.objects.filter(pk=job.pk).update(spec=spec)
    client.force_login(alice)

    html = client.get(job_url(job)).content.decode()

    assert 'href="javascript:' not in html


# Offline --------------------------------------------------------------------------


def test_pages_load_scripts_and_styles_from_our_own_static_files(client, alice, make_job):
    """The console must work with no internet: no CDN anywhere."""
    job, _, _ = make_job()
    client.force_login(alice)
    for path in ["/", job_url(job), reverse("console:login")]:
        html = client.get(path).content.decode()
        for attr in re.findall(r'<(?:script|link)\b[^>]*\b(?:src|href)="([^"]+)"', html):
            assert attr.startswith("/static/"), f"{path} loads {attr}"


def test_the_vendored_chart_library_is_served(client):
    from django.contrib.staticfiles import finders

    for name in ["vendor/uplot/uPlot.iife.min.js", "vendor/uplot/uPlot.min.css", "vendor/uplot/LICENSE"]:
        assert finders.find(name), name
