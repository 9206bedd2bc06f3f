"""Submission through the REST API: every refusal the spec words, and nothing stored."""

from __future__ import annotations

import pytest

from apps.jobs.models import Job, JobPackage
from tests.conftest import build_package, experiment_package
from tuneplane.contracts import errors

pytestmark = pytest.mark.django_db


def assert_refused(response, status: int, detail: str, field: str | None):
    assert response.status_code == status, response.content
    assert response.json() == {"detail": detail, "field": field}
    assert Job.objects.count() == 0
    assert JobPackage.objects.count() == 0


def test_it_admits_a_custom_job_and_compiles_the_spec(alice_api, submit, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        response = submit(alice_api, hyperparams={"lr": "1e-5", "epochs": "3"})
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["state"] == "pending"
    assert body["id"].startswith("exp-")
    spec = body["spec"]
    assert spec["hyperparams"] == {"lr": "1e-5", "epochs": "3"}
    assert spec["framework"] == {
        "name": "custom",
        "observability": "external",
        "observability_url": "https://wandb.example/proj",
        "entrypoint": "experiments/exp/train.sh",
    }
    assert spec["resources"]["profile"] == "cpu"
    assert body["package"]["sha256"] == JobPackage.objects.get().sha256
    assert any("not pinned by digest" in w for w in body["warnings"])
    assert len(callbacks) == 1  # the dispatch, enqueued only after commit


def test_it_refuses_custom_without_observability_url(alice_api, submit):
    response = submit(alice_api, observability_url="")
    assert_refused(response, 400, errors.CUSTOM_OBSERVABILITY_URL_REQUIRED, "observability_url")


def test_it_refuses_a_renamed_entrypoint(alice_api, submit):
    package = build_package({"experiments/exp/run.sh": "echo hi\n"})
    assert_refused(submit(alice_api, package=package), 400, errors.CUSTOM_ENTRYPOINT_INVALID, "package")


def test_it_refuses_a_symlinked_entrypoint_that_escapes(alice_api, submit):
    package = build_package({"outside.sh": "echo pwned\n"}, symlinks={"experiments/exp/train.sh": "../../outside.sh"})
    assert_refused(submit(alice_api, package=package), 400, errors.CUSTOM_ENTRYPOINT_INVALID, "package")


def test_it_refuses_an_absolute_symlinked_entrypoint(alice_api, submit):
    package = build_package({}, symlinks={"experiments/exp/train.sh": "/etc/passwd"})
    assert_refused(submit(alice_api, package=package), 400, errors.CUSTOM_ENTRYPOINT_INVALID, "package")


def test_it_refuses_traversal_in_package_paths(alice_api, submit):
    package = build_package({"experiments/exp/train.sh": "echo\n", "experiments/../../etc/evil": "x"})
    response = submit(alice_api, package=package)
    assert response.status_code == 400
    assert "escapes the package root" in response.json()["detail"]
    assert Job.objects.count() == 0


def test_it_refuses_an_image_from_a_registry_not_allowed(alice_api, submit):
    response = submit(alice_api, image="docker.io/library/python:3.11")
    assert_refused(
        response,
        400,
        errors.IMAGE_REGISTRY_NOT_ALLOWED.format(host="docker.io", allowed="registry.example.com"),
        "image",
    )


def test_it_treats_a_bare_image_name_as_docker_hub(alice_api, submit):
    response = submit(alice_api, image="ubuntu:22.04")
    assert response.status_code == 400
    assert "'docker.io'" in response.json()["detail"]


def test_an_empty_allowlist_refuses_custom_images(alice_api, submit, settings):
    settings.TUNEPLANE_ALLOWED_IMAGE_REGISTRIES = ""
    assert_refused(submit(alice_api), 400, errors.IMAGE_REGISTRIES_EMPTY, "image")


@pytest.mark.parametrize("operation", ["export", "eval"])
def test_it_refuses_export_and_eval_for_custom(alice_api, submit, operation):
    response = submit(alice_api, operation=operation)
    assert_refused(response, 400, errors.CUSTOM_NO_EXPORT_OR_EVAL.format(operation=operation), "operation")


def test_validate_checks_without_submitting(alice_api, submit):
    response = submit(alice_api, path="/api/v1/jobs/validate")
    assert response.status_code == 200
    assert response.json()["ok"] is True
    assert Job.objects.count() == 0


def test_validate_reports_the_same_errors(alice_api, submit):
    response = submit(alice_api, path="/api/v1/jobs/validate", observability_url="")
    assert response.json()["detail"] == errors.CUSTOM_OBSERVABILITY_URL_REQUIRED


@pytest.mark.parametrize(
    ("overrides", "field", "fragment"),
    [
        ({"experiment": "Bad Name"}, "experiment", "lowercase letters"),
        ({"experiment": 7}, "experiment", "must be a string"),
        ({"profile": "a100:64"}, "profile", "does not exist"),
        ({"hyperparams": ["lr"]}, "hyperparams", "key=value"),
        ({"hyperparams": {"lr": {"nested": 1}}}, "hyperparams", "string, number or boolean"),
        ({"observability_url": "ftp://x"}, "observability_url", "http(s) URL"),
        ({"recipe": "nope/nope"}, "recipe", "not in the catalogue"),
        ({"image": ""}, "image", "custom has no catalogue pin"),
    ],
)
def test_bad_fields_are_named(alice_api, submit, overrides, field, fragment):
    response = submit(alice_api, **overrides)
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert fragment in response.json()["detail"]
    assert Job.objects.count() == 0


def test_a_missing_package_is_named(alice_api, submit):
    response = submit(alice_api, package=b"")
    assert response.json() == {"detail": "package is required: the experiment's committed files", "field": "package"}


def test_a_garbage_package_is_refused(alice_api, submit):
    response = submit(alice_api, package=b"not a tarball")
    assert response.status_code == 400
    assert "not a readable tar archive" in response.json()["detail"]


def test_request_must_be_json(alice_api):
    response = alice_api.post("/api/v1/jobs", {"request": "{not json"}, format="multipart")
    assert response.status_code == 400
    assert response.json()["field"] == "request"


def test_identical_packages_are_stored_once(alice_api, submit):
    assert submit(alice_api).status_code == 201
    assert submit(alice_api).status_code == 201
    assert Job.objects.count() == 2
    assert JobPackage.objects.count() == 1


def test_an_anonymous_client_is_refused(submit):
    from rest_framework.test import APIClient

    response = submit(APIClient())
    assert response.status_code in (401, 403)
    assert Job.objects.count() == 0


def test_the_package_is_stored_with_its_sha256(alice_api, submit):
    import hashlib

    from django.core.files.storage import default_storage

    package = experiment_package()
    submit(alice_api, package=package)
    stored = JobPackage.objects.get()
    assert stored.sha256 == hashlib.sha256(package).hexdigest()
    with default_storage.open(stored.storage_name) as f:
        assert f.read() == package
