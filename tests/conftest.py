"""Shared fixtures. Personas as in Healthchecks' tests: Alice owns jobs, Bob is another
user who should see none of hers, Sam is staff."""

from __future__ import annotations

import gzip
import io
import tarfile

import pytest

# The suite runs on PostgreSQL; DATABASE_URL must name it (the Makefile sets it, and
# TUNEPLANE_BROKER_URL=memory:// so that the test process itself enqueues nowhere real).

ALLOWED_REGISTRY = "registry.example.com"
IMAGE = f"{ALLOWED_REGISTRY}/trainer:v1"
OBS_URL = "https://wandb.example/proj"


@pytest.fixture(autouse=True)
def _tuneplane_settings(settings, tmp_path):
    settings.TUNEPLANE_ALLOWED_IMAGE_REGISTRIES = ALLOWED_REGISTRY
    settings.TUNEPLANE_LOCAL_ROOT = tmp_path / "local"
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "objects")},
        },
    }


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password-1")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="bob-password-1")


@pytest.fixture
def sam(django_user_model):
    return django_user_model.objects.create_user("sam", password="sam-password-1", is_staff=True)


def token_for(user) -> str:
    from apps.accounts.services import issue_api_token

    return issue_api_token(user)[1]


def api_client(user=None, secret: str | None = None):
    from rest_framework.test import APIClient

    client = APIClient()
    if user is not None or secret is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret or token_for(user)}")
    return client


@pytest.fixture
def alice_api(alice):
    return api_client(alice)


@pytest.fixture
def bob_api(bob):
    return api_client(bob)


def build_package(files: dict[str, str | bytes], symlinks: dict[str, str] | None = None) -> bytes:
    """A gzip'd tar like `tp submit` makes; paths are package-relative."""
    buf = io.BytesIO()
    # mtime=0 in the gzip header, as `tp submit` does: the same files give the same bytes
    # (and sha256) whatever second they are packed in; tests comparing two packages relied on
    # both being built within one second.
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for name, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o755 if name.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(data))
        for name, target in (symlinks or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    return buf.getvalue()


TRAIN_SH = "#!/usr/bin/env bash\nset -euo pipefail\necho hello\n"


def experiment_package(name: str = "exp", train_sh: str = TRAIN_SH) -> bytes:
    return build_package({f"experiments/{name}/train.sh": train_sh, f"experiments/{name}/config.yaml": "lr: 1\n"})


def submission(**overrides) -> dict:
    request = {
        "experiment": "exp",
        "recipe": "custom/custom",
        "operation": "train",
        "profile": "cpu",
        "image": IMAGE,
        "observability_url": OBS_URL,
        "hyperparams": {},
    }
    request.update(overrides)
    return request


@pytest.fixture
def submit(db):
    """POST a submission; returns the response."""
    import json

    def _submit(client, package: bytes | None = None, path: str = "/api/v1/jobs", **overrides):
        data = {"request": json.dumps(submission(**overrides))}
        if package is None:
            package = experiment_package(overrides.get("experiment", "exp"))
        if package != b"":
            data["package"] = io.BytesIO(package)
            data["package"].name = "package.tar.gz"
        return client.post(path, data, format="multipart")

    return _submit


@pytest.fixture
def make_job(db, alice):
    """A submitted job row, with an attempt and its ingest token when `attempt=True`."""
    from apps.jobs import services

    def _make(owner=None, experiment: str = "exp", attempt: bool = True):
        import json

        job, _ = services.submit_job(
            owner or alice, json.dumps(submission(experiment=experiment)), experiment_package(experiment)
        )
        if not attempt:
            return job, None, None
        started = services.start_attempt(job.pk)
        assert started is not None
        job.refresh_from_db()
        return job, started[0], started[1]

    return _make
