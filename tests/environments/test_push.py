"""Pushing environments and plugins through the API: versions, namespaces, refusals."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
from django.core.files.storage import default_storage
from tuneplane.contracts import environment as C
from tuneplane.contracts.environment_bundle import build_archive

from apps.environments.models import (
    Environment,
    EnvironmentFile,
    EnvironmentVersion,
    HarnessPlugin,
    HarnessPluginVersion,
    ImmutableError,
)
from tests.conftest import api_client

from .conftest import calculator_files, manifest_bytes, push

pytestmark = pytest.mark.django_db


def stored_blobs() -> list[str]:
    if not default_storage.exists("environments/blobs"):
        return []
    names: list[str] = []
    dirs, _files = default_storage.listdir("environments/blobs")
    for d in dirs:
        names += default_storage.listdir(f"environments/blobs/{d}")[1]
    return names


def assert_refused(response, status: int, detail: str, field: str | None) -> None:
    assert response.status_code == status, response.content
    assert response.json() == {"detail": detail, "field": field}


def assert_nothing_stored() -> None:
    assert Environment.objects.count() == 0
    assert EnvironmentVersion.objects.count() == 0
    assert EnvironmentFile.objects.count() == 0
    assert stored_blobs() == []


def test_the_calculator_example_pushes_and_shows(alice_api):
    response = push(alice_api)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["ref"] == "alice/calculator-tasks@1.0.0"
    assert (body["protocol"], body["deployment"]) == ("openenv", "local")
    assert body["verifier"] == {"kind": "rubric", "ref": "alice/arithmetic-correctness"}
    assert [t["name"] for t in body["tools"]] == ["calculator"]
    assert body["sandbox_required"] is False
    assert body["splits"] == {"train": 3, "eval": 2}
    assert body["public"] is False
    assert C.DIGEST_RE.match(body["digest"])
    version = EnvironmentVersion.objects.get()
    assert sorted(version.files.values_list("path", flat=True)) == ["manifest.json", "tasks.jsonl"]
    assert len(stored_blobs()) == 2

    shown = alice_api.get("/api/v1/environments/alice/calculator-tasks/versions/1.0.0").json()
    assert shown["files"][1]["path"] == "tasks.jsonl" and set(shown["files"][1]) == {
        "path",
        "size",
        "sha256",
    }
    listed = alice_api.get("/api/v1/environments").json()["results"]
    assert [e["ref"] for e in listed] == ["alice/calculator-tasks"]
    assert listed[0]["latest"]["version"] == "1.0.0"


def test_it_refuses_pushing_a_version_again_and_changes_nothing(alice_api):
    assert push(alice_api).status_code == 201
    before = (EnvironmentVersion.objects.get().digest, sorted(stored_blobs()))
    changed = calculator_files(tasks__jsonl=b'{"prompt": "new", "reference": "1"}\n')
    assert_refused(
        push(alice_api, changed),
        409,
        "alice/calculator-tasks@1.0.0 already exists; versions are immutable: push a new version",
        "version",
    )
    assert EnvironmentVersion.objects.count() == 1
    assert (EnvironmentVersion.objects.get().digest, sorted(stored_blobs())) == before


def test_a_bare_name_goes_into_the_pushers_namespace_and_another_namespace_is_refused(
    alice_api, bob_api
):
    assert_refused(
        push(alice_api, name="bob/calculator-tasks"),
        403,
        "you can push only into your own namespace (alice/calculator-tasks), not 'bob'",
        "name",
    )
    assert_nothing_stored()
    assert push(alice_api, name="alice/calculator-tasks").status_code == 201
    assert push(bob_api).json()["ref"] == "bob/calculator-tasks@1.0.0"


def test_public_applies_only_when_first_created(alice_api, bob_api):
    assert push(alice_api, public=False).status_code == 201
    assert push(alice_api, version="1.1.0", public=True).json()["public"] is False
    assert bob_api.get("/api/v1/environments").json()["results"] == []
    assert push(alice_api, name="shared", public=True).status_code == 201
    assert push(alice_api, name="shared", version="2", public=False).json()["public"] is True
    assert [e["ref"] for e in bob_api.get("/api/v1/environments").json()["results"]] == [
        "alice/shared"
    ]


def test_another_users_private_environment_is_not_visible(alice_api, bob_api):
    push(alice_api)
    response = bob_api.get("/api/v1/environments/alice/calculator-tasks/versions/1.0.0")
    assert_refused(
        response,
        404,
        "environment alice/calculator-tasks does not exist or is not visible to you",
        "environment",
    )


@pytest.mark.parametrize(
    ("files", "status", "detail", "field"),
    [
        (
            calculator_files(manifest__json=manifest_bytes(protocol="openenv-local")),
            400,
            'manifest.json: protocol \'openenv-local\' is a former compound name; write "protocol": "openenv", '
            '"deployment": "local"',
            "protocol",
        ),
        (
            calculator_files(manifest__json=manifest_bytes(schema="v1")),
            400,
            'manifest.json: schema "v1" is no longer accepted; write "schema": "tuneplane/environment/v1"',
            "schema",
        ),
        (
            calculator_files(manifest__json=manifest_bytes(verifier={"kind": "vibes", "ref": "x"})),
            400,
            "manifest.json: verifier.kind must be one of rubric, plugin, endpoint, not 'vibes'",
            "verifier.kind",
        ),
        (calculator_files(tasks__jsonl=None), 400, C.TASKS_REQUIRED, "tasks.jsonl"),
        (
            calculator_files(tasks__jsonl=b'{"prompt": "a", "reference": "1", "split": "test"}\n'),
            400,
            "tasks.jsonl line 1: field 'split' must be 'train' or 'eval', not \"test\"",
            "tasks.jsonl",
        ),
        (
            calculator_files(manifest__json=None),
            400,
            "manifest.json is missing from the environment directory",
            "manifest",
        ),
    ],
)
def test_it_refuses_bad_bundles_and_stores_nothing(alice_api, files, status, detail, field):
    assert_refused(push(alice_api, files), status, detail, field)
    assert_nothing_stored()


def _evil_tar(kind: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in calculator_files().items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("../../escape.txt" if kind == "traversal" else "link")
        if kind == "symlink":
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            tar.addfile(info)
        else:
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    return buf.getvalue()


def test_it_refuses_path_traversal_and_symlinks_in_the_upload(alice_api):
    assert_refused(
        push(alice_api, _evil_tar("traversal")),
        400,
        "bundle: path '../../escape.txt' escapes the directory",
        "bundle",
    )
    assert_refused(
        push(alice_api, _evil_tar("symlink")),
        400,
        "bundle: link is a link; links are refused in a bundle",
        "bundle",
    )
    assert_nothing_stored()


def test_it_refuses_over_limit_uploads(alice_api, monkeypatch):
    monkeypatch.setattr(C, "BUNDLE_MAX_BYTES", 1000)
    # Compressed, this is tiny; unpacked, it is over the limit (a zip bomb in miniature).
    bomb = build_archive(calculator_files(big__bin=b"\0" * 5000))
    assert len(bomb) < 1000
    assert_refused(push(alice_api, bomb), 413, "bundle unpacks to more than 1000 bytes", "bundle")
    noise = build_archive(calculator_files(big__bin=bytes(range(256)) * 40))
    assert_refused(
        push(alice_api, noise), 413, f"bundle is {len(noise)} bytes; the limit is 1000", "bundle"
    )
    assert_nothing_stored()


@pytest.mark.parametrize(
    ("request_body", "detail", "field"),
    [
        (
            {"name": "Calc Tasks", "version": "1"},
            "name 'Calc Tasks': the name must be " + C.NAME_RULE,
            "name",
        ),
        (
            {"name": "calc", "version": "../1"},
            "version must be " + C.VERSION_RULE + ", not '../1'",
            "version",
        ),
        (
            {"name": "calc", "version": 1},
            "version must be " + C.VERSION_RULE + ", not 1",
            "version",
        ),
        (
            {"name": "calc", "version": "1", "public": "yes"},
            "public must be true or false",
            "public",
        ),
        (
            {"name": "calc@2", "version": "1"},
            "name must not carry a version; pass --version",
            "name",
        ),
    ],
)
def test_it_refuses_bad_push_requests(alice_api, request_body, detail, field):
    assert_refused(push(alice_api, request=request_body), 400, detail, field)
    assert_nothing_stored()


def test_versions_are_immutable_in_the_model_too(alice_api):
    push(alice_api)
    version = EnvironmentVersion.objects.get()
    version.description = "changed"
    with pytest.raises(ImmutableError):
        version.save()
    with pytest.raises(ImmutableError):
        version.delete()
    assert (
        EnvironmentVersion.objects.get().description
        == "Arithmetic word problems with a calculator tool."
    )


PLUGIN_YAML = b"""schema: tuneplane/plugin/v1
name: calculator-harness
version: 1.0.0
capability: environment
entrypoint: harness:CalculatorResources
"""
HARNESS_PY = b"class CalculatorResources:\n    pass\n"


def push_plugin(client, files: dict[str, bytes]):
    upload = io.BytesIO(build_archive(files))
    upload.name = "bundle.tar.gz"
    return client.post("/api/v1/plugins", {"bundle": upload}, format="multipart")


def test_plugins_push_once_and_are_immutable(alice_api):
    response = push_plugin(alice_api, {"plugin.yaml": PLUGIN_YAML, "harness.py": HARNESS_PY})
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["ref"] == "alice/calculator-harness@1.0.0"
    assert body["digest"] == C.bundle_digest([(f["path"], f["sha256"]) for f in body["files"]])
    again = push_plugin(
        alice_api, {"plugin.yaml": PLUGIN_YAML, "harness.py": HARNESS_PY + b"# changed\n"}
    )
    assert_refused(
        again,
        409,
        "alice/calculator-harness@1.0.0 already exists; versions are immutable: push a new version",
        "version",
    )
    assert HarnessPluginVersion.objects.get().digest == body["digest"]


def test_it_refuses_a_plugin_whose_entrypoint_module_is_missing(alice_api):
    response = push_plugin(alice_api, {"plugin.yaml": PLUGIN_YAML})
    assert_refused(
        response,
        400,
        "plugin.yaml: entrypoint harness:CalculatorResources names module 'harness', "
        "which is not in the directory (harness.py)",
        "entrypoint",
    )
    bad = push_plugin(
        alice_api,
        {
            "plugin.yaml": PLUGIN_YAML.replace(b"environment\n", b"trainer\n"),
            "harness.py": HARNESS_PY,
        },
    )
    assert_refused(
        bad, 400, "plugin.yaml: capability must be environment, not 'trainer'", "capability"
    )
    assert HarnessPlugin.objects.count() == 0 and HarnessPluginVersion.objects.count() == 0


def test_anonymous_and_ingest_tokens_cannot_push(db, make_job):
    anonymous = push(api_client())
    assert anonymous.status_code == 401
    _job, _attempt, secret = make_job()
    with_ingest_token = push(api_client(secret=secret))
    assert with_ingest_token.status_code == 401
    assert with_ingest_token.json()["detail"] == "ingest tokens are accepted only on ingest routes"
    assert_nothing_stored()
    assert json  # keep the import for readers of the request bodies above
