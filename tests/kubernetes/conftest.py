"""Fixtures for the kubernetes executor: the API stub over HTTP, the `gpu` fleet pointed
at it, and helpers that admit and dispatch jobs through the real services."""

from __future__ import annotations

import json
from collections.abc import Iterator

import kubernetes_validate
import pytest

from tests.conftest import experiment_package, submission

from .k8s_api_stub import KubernetesApiStub

# Every manifest is validated against the official OpenAPI schemas of this release,
# strictly: an unknown field (a typo) fails like a wrong type.
K8S_VERSION = "1.30.0"
NAMESPACE = "tuneplane-jobs"


def validate_manifest(obj: dict) -> None:
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


@pytest.fixture
def k8s_stub() -> Iterator[KubernetesApiStub]:
    stub = KubernetesApiStub().start()
    try:
        yield stub
    finally:
        stub.stop()


@pytest.fixture
def kubernetes_fleet(db, k8s_stub, settings):
    """The `gpu` fleet of fixtures/profiles.json, reached at the stub; the deployment's
    executor is kubernetes."""
    from apps.governance.models import Fleet

    settings.TUNEPLANE_EXECUTOR = "kubernetes"
    settings.TUNEPLANE_INGEST_URL = "https://tuneplane.example"
    fleet = Fleet.objects.get(name="gpu")
    fleet.settings = {
        **fleet.settings,
        "connection": "url",
        "api_url": k8s_stub.url,
        "ingest_url": "http://tuneplane-web.tuneplane.svc:8000",
        "runtime_image": "registry.example.com/tuneplane/runtime@sha256:" + "ab" * 32,
    }
    fleet.save()
    return fleet


@pytest.fixture
def admit(db, alice):
    """Submit a job through the services (every admission gate) and return it."""
    from apps.jobs import services

    def _admit(user=None, experiment: str = "exp", **overrides):
        request = submission(experiment=experiment, **{"profile": "h200:8", **overrides})
        job, _ = services.submit_job(user or alice, json.dumps(request), experiment_package(experiment))
        return job

    return _admit


@pytest.fixture
def dispatch(kubernetes_fleet):
    """Run the dispatch task body (what the Celery worker runs) for a job."""
    from apps.jobs.models import ExecutionAttempt
    from apps.jobs.tasks import dispatch_job_task

    def _dispatch(job) -> ExecutionAttempt:
        dispatch_job_task(job.pk)
        return ExecutionAttempt.objects.select_related("job").get(job=job)

    return _dispatch
