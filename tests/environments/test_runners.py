"""Runners of remote environments, against a real OpenEnv server (openenv-core, the
integration facts' arith_env) started by the test on 127.0.0.1."""

from __future__ import annotations

import http.server
import threading

import pytest

from apps.environments import services
from apps.environments.models import Environment, EnvironmentVersion, Runner

from .conftest import free_port

pytestmark = pytest.mark.django_db


def register(client, url: str, **extra):
    body = {
        "url": url,
        "name": "shared-sim",
        "version": "1.0.0",
        "description": "Shared simulator, ops-managed",
        **extra,
    }
    return client.post("/api/v1/environments/remote", body, format="json")


def runners(client, ref: str = "alice/shared-sim/versions/1.0.0") -> list[dict]:
    response = client.get(f"/api/v1/environments/{ref}/runners")
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_a_runner_is_registered_while_answering_then_marked_not_answering_drained_and_still_listed(
    alice_api, openenv_server
):
    response = register(alice_api, openenv_server.url)
    assert response.status_code == 201, response.content
    body = response.json()
    env = body["environment"]
    assert env["ref"] == "alice/shared-sim@1.0.0"
    assert (env["protocol"], env["deployment"], env["endpoint"]) == (
        "openenv",
        "remote",
        openenv_server.url,
    )
    # By default the environment scores its own turns, and the manifest says so.
    assert env["verifier"] == {"kind": "endpoint", "ref": openenv_server.url}
    assert body["runner"]["state"] == "answering"
    [runner] = runners(alice_api)
    assert (runner["url"], runner["state"], runner["answering"]) == (
        openenv_server.url,
        "answering",
        True,
    )

    openenv_server.stop()
    assert services.probe_all_runners() == 1
    [runner] = runners(alice_api)
    assert (runner["state"], runner["answering"]) == ("not answering", False)
    assert runner["last_error"] == f"GET {openenv_server.url}/health failed: connection refused"
    assert (
        runner["last_answered_at"] is not None
    )  # it did answer once: "registered and not answering"

    drained = alice_api.post(
        f"/api/v1/environments/alice/shared-sim/versions/1.0.0/runners/{runner['id']}/drain"
    )
    assert drained.status_code == 200, drained.content
    [runner] = runners(alice_api)
    assert (runner["state"], runner["drained"], runner["drained_by"]) == ("drained", True, "alice")
    assert Runner.objects.count() == 1  # drained, not forgotten

    # A drained runner is not probed, and comes back only when served again.
    openenv_server.start()
    assert services.probe_all_runners() == 0
    assert runners(alice_api)[0]["state"] == "drained"


def test_registering_is_refused_when_nothing_answers_and_nothing_is_stored(alice_api):
    url = f"http://127.0.0.1:{free_port()}"
    response = register(alice_api, url)
    assert response.status_code == 400
    assert response.json() == {
        "detail": f"no OpenEnv service is answering at {url}: GET {url}/health failed: connection refused",
        "field": "url",
    }
    assert (
        Environment.objects.count(),
        EnvironmentVersion.objects.count(),
        Runner.objects.count(),
    ) == (0, 0, 0)


class _NotOpenEnv(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"status": "healthy"}' if self.path == "/health" else b"not here"
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_web_server_that_only_says_healthy_is_not_taken_for_an_environment(alice_api):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotOpenEnv)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        response = register(alice_api, url)
    finally:
        server.shutdown()
    assert response.status_code == 400
    assert response.json()["detail"] == (
        f"no OpenEnv service is answering at {url}: not an OpenEnv server: GET {url}/schema answered HTTP 404"
    )
    assert EnvironmentVersion.objects.count() == 0


def test_rubric_fleet_and_refusals_of_register(alice_api, bob_api, openenv_server):
    response = register(
        alice_api, openenv_server.url, rubric="alice/arithmetic-correctness", fleet="gpu-a"
    )
    assert response.status_code == 201, response.content
    env = response.json()["environment"]
    assert env["verifier"] == {"kind": "rubric", "ref": "alice/arithmetic-correctness"}
    assert (env["fleet"], env["endpoint"]) == ("gpu-a", None)
    assert response.json()["runner"]["fleet"] == "gpu-a"

    again = register(alice_api, openenv_server.url)
    assert again.status_code == 409
    assert (
        again.json()["detail"]
        == "alice/shared-sim@1.0.0 already exists; versions are immutable: push a new version"
    )
    other = register(alice_api, openenv_server.url, name="bob/shared-sim")
    assert other.status_code == 403
    assert (
        other.json()["detail"]
        == "you can push only into your own namespace (alice/shared-sim), not 'bob'"
    )
    bad = register(alice_api, "file:///etc/passwd", version="2")
    assert bad.json() == {
        "detail": "url must be an http(s) URL, not 'file:///etc/passwd'",
        "field": "url",
    }
    assert EnvironmentVersion.objects.count() == 1

    # Bob cannot add or drain runners of Alice's environment, even a public one.
    Environment.objects.update(public=True)
    serve = bob_api.post(
        "/api/v1/environments/alice/shared-sim/versions/1.0.0/runners",
        {"url": openenv_server.url},
        format="json",
    )
    assert serve.status_code == 403
    assert serve.json()["detail"] == "only alice can add runners to alice/shared-sim@1.0.0"
    runner_id = Runner.objects.get().pk
    drain = bob_api.post(
        f"/api/v1/environments/alice/shared-sim/versions/1.0.0/runners/{runner_id}/drain"
    )
    assert drain.status_code == 403
    assert drain.json()["detail"] == "only alice can drain runners of alice/shared-sim@1.0.0"
    assert Runner.objects.get().drained_at is None


def test_serve_registers_machines_and_a_job_resolves_to_the_most_recent_answer(
    alice, alice_api, openenv_server
):
    assert register(alice_api, openenv_server.url, fleet="pool").status_code == 201
    version = EnvironmentVersion.objects.get()
    served = alice_api.post(
        "/api/v1/environments/alice/shared-sim/versions/1.0.0/runners",
        {"url": openenv_server.url.replace("127.0.0.1", "localhost"), "name": "box-2"},
        format="json",
    )
    assert served.status_code == 201, served.content
    assert (served.json()["label"], served.json()["state"], served.json()["fleet"]) == (
        "box-2",
        "answering",
        "pool",
    )
    assert services.resolve_address(version) == served.json()["url"]

    beat = alice_api.post(
        f"/api/v1/environments/alice/shared-sim/versions/1.0.0/runners/{served.json()['id']}/heartbeat"
    )
    assert beat.status_code == 200 and beat.json()["last_heartbeat_at"] is not None

    first = Runner.objects.get(url=openenv_server.url)
    services.probe_runner(first.pk)  # now the first machine answered most recently
    assert services.resolve_address(version) == openenv_server.url

    nothing = f"http://127.0.0.1:{free_port()}"
    refused = alice_api.post(
        "/api/v1/environments/alice/shared-sim/versions/1.0.0/runners",
        {"url": nothing},
        format="json",
    )
    assert refused.status_code == 400
    assert refused.json()["detail"].startswith(f"no OpenEnv service is answering at {nothing}")
    assert Runner.objects.count() == 2
