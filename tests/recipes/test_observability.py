"""Observability semantics both ways (spec, "Why --observability-url is required"):

- `external` (custom/custom): --observability-url is required; PYTHONPATH is left alone,
  so `import tuneplane` works only if the image has the wheel.
- `platform` (the catalogue frameworks): --observability-url is refused; the runner
  prepends the SDK capsule to PYTHONPATH, so `from tuneplane.report import log` works
  with no wheel in the image.

The end-to-end tests run the real runner (python -m tuneplane.runner, through the local
executor) against a live server, with a train.sh that imports tuneplane from a Python
started with -S: no site-packages, so the import can only come from PYTHONPATH.
"""

from __future__ import annotations

import json
import time

import pytest
from django.utils import timezone
from tuneplane.contracts import env as E
from tuneplane.contracts import errors
from tuneplane.runner.launch import apply_observability, capsule_root

from apps.jobs import services
from apps.jobs.models import Job
from apps.recipes.models import Recipe
from tests.conftest import api_client, build_package, submission

PROBE = """#!/usr/bin/env bash
set -uo pipefail
python -S -c "from tuneplane.report import log; print('capsule import ok')" 2>/dev/null || echo "capsule import failed"
echo "PYTHONPATH=${PYTHONPATH:-<unset>}"
"""


def test_platform_puts_the_capsule_first_and_keeps_the_rest():
    child = {"PYTHONPATH": "/opt/image/lib"}
    apply_observability(child, {E.RUNNER_OBSERVABILITY: "platform", E.RUNNER_CAPSULE: "/opt/tuneplane/capsule"})
    assert child["PYTHONPATH"] == "/opt/tuneplane/capsule:/opt/image/lib"


def test_external_leaves_pythonpath_exactly_alone():
    child = {"PYTHONPATH": "/opt/image/lib"}
    apply_observability(child, {E.RUNNER_OBSERVABILITY: "external", E.RUNNER_CAPSULE: "/opt/tuneplane/capsule"})
    assert child == {"PYTHONPATH": "/opt/image/lib"}
    unset: dict[str, str] = {}
    apply_observability(unset, {E.RUNNER_OBSERVABILITY: "external"})
    assert unset == {}


def test_the_capsule_holds_the_tuneplane_package():
    root = capsule_root()
    assert (root / "tuneplane" / "report.py").is_file()
    assert root.name not in {"site-packages", "dist-packages"}


@pytest.mark.django_db
def test_a_platform_recipe_refuses_an_observability_url(alice_api, submit):
    response = submit(alice_api, recipe="trl/sft", image="", model="m", train_data="d")
    assert response.status_code == 400
    assert response.json() == {
        "detail": errors.PLATFORM_OBSERVABILITY_URL_REFUSED.format(recipe="trl/sft"),
        "field": "observability_url",
    }
    assert Job.objects.count() == 0


@pytest.mark.django_db
def test_an_external_recipe_requires_an_observability_url(alice_api, submit):
    response = submit(alice_api, observability_url="")
    assert response.json() == {"detail": errors.CUSTOM_OBSERVABILITY_URL_REQUIRED, "field": "observability_url"}
    assert Job.objects.count() == 0


# --- the real runner -------------------------------------------------------------------


@pytest.fixture
def live_ingest(live_server, settings):
    settings.TUNEPLANE_INGEST_URL = live_server.url
    settings.TUNEPLANE_EXECUTOR = "local"
    return live_server


@pytest.fixture
def platform_probe_recipe(transactional_db):
    """A platform recipe whose launcher is bash, so the probe runs without torch."""
    return Recipe.objects.create(
        name="test/platform-probe", version="1.0.0", digest="sha256:" + "0" * 64, framework="probe",
        observability="platform", entrypoint="train.sh", launcher="bash", operations=["train"],
        runtime={"default_version": "1", "image": "registry.example.com/probe@sha256:" + "1" * 64},
    )


def run_to_the_end(job: Job, timeout: float = 60.0) -> list[str]:
    from apps.jobs.tasks import dispatch_job_task

    dispatch_job_task(job.pk)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.is_finished:
            break
        time.sleep(0.2)
    assert job.is_finished, f"job still {job.state} after {timeout}s"
    client = api_client(job.owner)
    lines = client.get(f"/api/v1/jobs/{job.public_id}/logs").json()["lines"]
    return [line["text"] for line in lines]


def test_the_runner_puts_the_capsule_on_pythonpath_for_a_platform_recipe(live_ingest, platform_probe_recipe, alice):
    request = submission(recipe="test/platform-probe", image="", observability_url="")
    job, _ = services.submit_job(alice, json.dumps(request), build_package({"experiments/exp/train.sh": PROBE}))

    lines = run_to_the_end(job)

    assert job.state == "succeeded", lines
    assert "capsule import ok" in lines
    assert f"PYTHONPATH={capsule_root()}" in lines


def test_the_runner_leaves_pythonpath_alone_for_an_external_recipe(live_ingest, alice):
    job, _ = services.submit_job(alice, json.dumps(submission()), build_package({"experiments/exp/train.sh": PROBE}))

    lines = run_to_the_end(job)

    assert job.state == "succeeded", lines
    assert "capsule import failed" in lines
    assert "PYTHONPATH=<unset>" in lines
    assert timezone.now() >= job.finished_at
