"""The OpenAPI schema holds every environment route `tp` and the runner call."""

from __future__ import annotations

import pytest
from drf_spectacular.generators import SchemaGenerator

pytestmark = pytest.mark.django_db

V = "/api/v1/environments/{owner}/{name}/versions/{version}"
CLIENT_ROUTES = {
    ("get", "/api/v1/environments"),
    ("post", "/api/v1/environments"),
    ("post", "/api/v1/environments/remote"),
    ("get", "/api/v1/environments/{owner}/{name}"),
    ("get", V),
    ("get", f"{V}/runners"),
    ("post", f"{V}/runners"),
    ("post", f"{V}/runners/{{runner_id}}/heartbeat"),
    ("post", f"{V}/runners/{{runner_id}}/drain"),
    ("post", "/api/v1/plugins"),
    ("get", "/api/v1/plugins/{owner}/{name}/versions/{version}"),
    ("get", "/api/ingest/v1/runs/{run_id}/environment"),
}


def test_the_schema_has_every_environment_route_with_a_unique_operation_id():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    routes = {(method, path) for path, ops in schema["paths"].items() for method in ops}
    assert CLIENT_ROUTES <= routes, CLIENT_ROUTES - routes
    ids = [
        op["operationId"]
        for path, ops in schema["paths"].items()
        for op in ops.values()
        if "environment" in path or "plugins" in path
    ]
    assert len(ids) == len(set(ids))
    assert not any(i[-1].isdigit() for i in ids), ids  # no numeral suffixes from collisions
