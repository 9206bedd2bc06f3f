"""Packages in S3-compatible object storage: moto's S3 server over real HTTP."""

from __future__ import annotations

import io
import json

import boto3
import pytest
from moto.server import ThreadedMotoServer

from apps.jobs.models import JobPackage
from tests.conftest import api_client, experiment_package, submission

pytestmark = pytest.mark.django_db

BUCKET = "tuneplane-test-packages"


@pytest.fixture(scope="module")
def s3_endpoint():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_storage(settings, s3_endpoint):
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket=BUCKET)
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {"bucket_name": BUCKET, "endpoint_url": s3_endpoint, "access_key": "testing",
                        "secret_key": "testing", "region_name": "us-east-1", "addressing_style": "path",
                        "file_overwrite": False},
        },
    }
    return client


def test_a_submitted_package_lands_in_s3_and_the_runner_route_serves_it(alice, s3_storage):
    from apps.jobs import services

    package = experiment_package()
    response = api_client(alice).post(
        "/api/v1/jobs",
        {"request": json.dumps(submission()), "package": io.BytesIO(package)},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    stored = JobPackage.objects.get()
    body = s3_storage.get_object(Bucket=BUCKET, Key=stored.storage_name)["Body"].read()
    assert body == package

    job_id = response.json()["id"]
    from apps.jobs.models import Job

    attempt, secret = services.start_attempt(Job.objects.get(public_id=job_id).pk)
    download = api_client(secret=secret).get(f"/api/ingest/v1/runs/{job_id}/package")
    assert download.status_code == 200
    assert b"".join(download.streaming_content) == package
    assert download["X-Package-Sha256"] == stored.sha256
