"""Tasksets never leave: every URL pattern of the project, walked with every kind of
caller, and no answer carries task content, except the one route that hands a running
job its own split, with that job's ingest token, and only that split.

The walk reads the patterns from django.urls.get_resolver(), so a route added later
(an export, a CSV, an admin page) is walked too without anyone remembering to add it.
"""

from __future__ import annotations

import asyncio
import gzip
import io
import itertools
import json
import re
import tarfile
import zipfile
from dataclasses import dataclass

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from tuneplane.contracts.environment_bundle import build_archive

from apps.environments.models import EnvironmentVersion, HarnessPluginVersion, Runner
from apps.jobs import services as jobs
from apps.jobs.models import Job
from tests.conftest import experiment_package, submission, token_for

from .conftest import calculator_files, manifest_bytes, push

pytestmark = pytest.mark.django_db

TRAIN_PROMPT = "SENTINEL-TRAIN-PROMPT-4c1d9e"
TRAIN_REFERENCE = "SENTINEL-TRAIN-REFERENCE-77aa01"
EVAL_PROMPT = "SENTINEL-EVAL-PROMPT-b03f52"
EVAL_REFERENCE = "SENTINEL-EVAL-REFERENCE-e9d410"
SENTINELS = (TRAIN_PROMPT, TRAIN_REFERENCE, EVAL_PROMPT, EVAL_REFERENCE)
TASKS = (
    json.dumps({"prompt": TRAIN_PROMPT, "reference": TRAIN_REFERENCE, "split": "train"})
    + "\n"
    + json.dumps({"prompt": EVAL_PROMPT, "reference": EVAL_REFERENCE, "split": "eval"})
    + "\n"
).encode()


def walk(resolver: URLResolver, prefix: str = "") -> list[str]:
    routes: list[str] = []
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            routes += walk(pattern, prefix + str(pattern.pattern))
        else:
            assert isinstance(pattern, URLPattern)
            routes.append(prefix + str(pattern.pattern))
    return routes


PARAM = re.compile(r"<(?:(?P<conv>[^>:]+):)?(?P<name>[^>]+)>|\(\?P<(?P<rname>[^>]+)>[^)]*\)")


def params(route: str) -> list[str]:
    return [m.group("name") or m.group("rname") for m in PARAM.finditer(route)]


def fill(route: str, values: dict[str, str]) -> str:
    url = PARAM.sub(lambda m: values.get(m.group("name") or m.group("rname"), "1"), route)
    return "/" + url.replace("^", "").replace("$", "")


@dataclass
class World:
    job: Job
    secret: str
    clients: dict[str, Client]


def build_world(alice, bob, sam, alice_api) -> World:
    files = calculator_files(tasks__jsonl=TASKS)
    assert push(alice_api, files).status_code == 201
    assert push(alice_api, files, name="public-calc", public=True).status_code == 201
    remote = {"manifest.json": manifest_bytes(deployment="remote", endpoint="http://127.0.0.1:9")}
    assert push(alice_api, remote, name="remote-calc").status_code == 201
    version = EnvironmentVersion.objects.get(environment__name="remote-calc")
    Runner.objects.create(version=version, url="http://127.0.0.1:9", registered_by=alice)
    upload = io.BytesIO(
        build_archive(
            {
                "plugin.yaml": b"schema: tuneplane/plugin/v1\nname: h\nversion: '1'\ncapability: environment\n"
                b"entrypoint: harness:H\n",
                "harness.py": b"class H: ...\n",
            }
        )
    )
    upload.name = "b.tar.gz"
    assert (
        alice_api.post("/api/v1/plugins", {"bundle": upload}, format="multipart").status_code == 201
    )

    job, _ = jobs.submit_job(
        alice,
        json.dumps(submission(environment="alice/calculator-tasks@1.0.0")),
        experiment_package(),
    )
    started = jobs.start_attempt(job.pk)
    assert started is not None
    job.refresh_from_db()

    # A crash elsewhere (a 500) is not this test's business: its answer is still
    # checked for task content, like every other answer.
    def session(user) -> Client:
        client = Client(raise_request_exception=False)
        client.force_login(user)
        return client

    def bearer(secret: str) -> Client:
        return Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {secret}")

    clients = {
        "anonymous": Client(raise_request_exception=False),
        "alice-session": session(alice),
        "bob-session": session(bob),
        "sam-session (staff, superuser)": session(sam),
        "alice-token": bearer(token_for(alice)),
        "sam-token": bearer(token_for(sam)),
        "job-ingest-token": bearer(started[1]),
    }
    return World(job=job, secret=started[1], clients=clients)


def candidates(route: str, world: World) -> list[dict[str, str]]:
    names = params(route)
    if not names:
        return [{}]
    if "object_id" in names:
        for model, _model_admin in admin.site._registry.items():
            if f"{model._meta.app_label}/{model._meta.model_name}/" in route:
                pks = [
                    str(pk) for pk in model._default_manager.values_list("pk", flat=True)[:25]
                ] or ["1"]
                return [{"object_id": pk} for pk in pks]
        return [{"object_id": "1"}]
    if {"owner", "name", "version"} <= set(names):
        triplets = {
            (v.environment.owner.username, v.environment.name, v.version)
            for v in EnvironmentVersion.objects.select_related("environment__owner")
        }
        triplets |= {
            (v.plugin.owner.username, v.plugin.name, v.version)
            for v in HarnessPluginVersion.objects.select_related("plugin__owner")
        }
        runner_ids = [str(pk) for pk in Runner.objects.values_list("pk", flat=True)] or ["1"]
        combos = []
        for (owner, name, version), runner in itertools.product(sorted(triplets), runner_ids):
            combos.append({"owner": owner, "name": name, "version": version, "runner_id": runner})
        return combos
    if {"owner", "name"} <= set(names):
        return [
            {"owner": o, "name": n}
            for o, n in {
                (v.environment.owner.username, v.environment.name)
                for v in EnvironmentVersion.objects.all()
            }
        ]
    values: dict[str, list[str]] = {
        "job_id": list(Job.objects.values_list("public_id", flat=True)),
        "run_id": list(Job.objects.values_list("public_id", flat=True)),
        "namespace": ["custom"],
        "name": ["custom"],
        "app_label": ["environments", "jobs"],
        "url": ["environments/environmentversion/export/"],
    }
    lists = [values.get(name, ["x"]) for name in names]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*lists)]


async def _first_chunks(stream, limit: int = 50, seconds: float = 2.0) -> bytes:
    """A live stream (SSE) never ends while its job runs: read what comes in `seconds`."""
    chunks: list[bytes] = []

    async def read() -> None:
        async for chunk in stream:
            chunks.append(chunk if isinstance(chunk, bytes) else str(chunk).encode())
            if len(chunks) >= limit:
                return

    try:
        await asyncio.wait_for(read(), seconds)
    except TimeoutError:
        pass
    return b"".join(chunks)


def bodies(response) -> list[bytes]:
    """The response's bytes, plus whatever is inside them if they are an archive."""
    if getattr(response, "streaming", False) and getattr(response, "is_async", False):
        raw = asyncio.run(_first_chunks(response.streaming_content))
    elif getattr(response, "streaming", False):
        raw = b"".join(itertools.islice(response.streaming_content, 50))
    else:
        raw = response.content
    found = [raw]
    try:
        if raw[:2] == b"\x1f\x8b":
            found.append(gzip.decompress(raw))
        for blob in list(found):
            if len(blob) > 512:
                with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
                    found += [tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()]
    except (OSError, tarfile.TarError, EOFError):
        pass
    if raw[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            found += [archive.read(name) for name in archive.namelist()]
    return found


def leaks(response) -> set[str]:
    return {s for s in SENTINELS for blob in bodies(response) if s.encode() in blob}


def test_no_route_returns_task_content(alice, bob, sam, alice_api):
    sam.is_superuser = True
    sam.save()
    world = build_world(alice, bob, sam, alice_api)
    routes = walk(get_resolver())
    assert any("environment" in r for r in routes) and any(r.startswith("admin/") for r in routes)

    served: list[tuple[str, str, set[str]]] = []
    requests = 0
    # GET everything first, then POST everything (a POST may change state: cancel the
    # job, drain a runner); logout routes are not POSTed, so the sessions stay signed in.
    for method in ("get", "post"):
        for route in routes:
            if method == "post" and "logout" in route:
                continue
            for values in candidates(route, world):
                url = fill(route, values)
                for who, client in world.clients.items():
                    response = getattr(client, method)(url, follow=False)
                    requests += 1
                    found = leaks(response)
                    if found:
                        served.append((f"{method.upper()} {url}", who, found))

    # Exactly one answer carried task content: the running job's own environment, with
    # its own ingest token, and only the training half of the taskset.
    assert served == [
        (
            f"GET /api/ingest/v1/runs/{world.job.public_id}/environment",
            "job-ingest-token",
            {TRAIN_PROMPT, TRAIN_REFERENCE},
        ),
    ], served
    assert requests > 1000  # the walk really walked

    # Once the job is over (the POST pass cancelled it), even that route is closed.
    attempt = world.job.attempts.get()
    jobs.record_exited(attempt, 0)
    assert Job.objects.get(pk=world.job.pk).is_finished
    after = world.clients["job-ingest-token"].get(
        f"/api/ingest/v1/runs/{world.job.public_id}/environment"
    )
    assert after.status_code == 409 and not leaks(after)
