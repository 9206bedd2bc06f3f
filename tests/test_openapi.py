"""The OpenAPI schema generates cleanly and holds every route the CLI and runner call."""

from __future__ import annotations

import pytest
from drf_spectacular.generators import SchemaGenerator

pytestmark = pytest.mark.django_db

CLIENT_ROUTES = {
    ("get", "/api/v1/me"),
    ("get", "/api/v1/recipes/{namespace}/{name}"),
    ("post", "/api/v1/jobs"),
    ("get", "/api/v1/jobs"),
    ("post", "/api/v1/jobs/validate"),
    ("get", "/api/v1/jobs/{job_id}"),
    ("post", "/api/v1/jobs/{job_id}/cancel"),
    ("get", "/api/v1/jobs/{job_id}/logs"),
    ("get", "/api/v1/jobs/{job_id}/series"),
    ("get", "/api/v1/jobs/{job_id}/series/points"),
    ("get", "/api/ingest/v1/runs/{run_id}/package"),
    ("post", "/api/ingest/v1/runs/{run_id}/lifecycle"),
    ("post", "/api/ingest/v1/runs/{run_id}/logs"),
    ("post", "/api/ingest/v1/runs/{run_id}/scalars"),
    ("post", "/api/ingest/v1/runs/{run_id}/init"),
    ("post", "/api/ingest/v1/runs/{run_id}/events"),
    ("post", "/api/ingest/v1/runs/{run_id}/heartbeat"),
    ("get", "/api/v1/jobs/{job_id}/events"),
    ("get", "/api/v1/jobs/{job_id}/observations"),
    ("get", "/api/v1/jobs/{job_id}/series.csv"),
}


def test_the_schema_has_every_client_route():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    routes = {(method, path) for path, ops in schema["paths"].items() for method in ops}
    assert CLIENT_ROUTES <= routes, CLIENT_ROUTES - routes
    assert set(schema["components"]["securitySchemes"]) == {"apiToken", "ingestToken", "cookieAuth"}


def test_the_schema_is_served(alice_api):
    response = alice_api.get("/api/schema/")
    assert response.status_code == 200
    assert b"/api/ingest/v1/runs/{run_id}/logs" in response.content
