"""Jobs that reference an environment: admission refusals, the implied split, the
variables, and the ingest route that serves the split only inside the runtime."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
from tuneplane.contracts import environment as C
from tuneplane.contracts.environment_bundle import build_archive

from apps.environments.models import HarnessPluginVersion, Runner
from apps.jobs import services as jobs
from apps.jobs.contract import job_environment
from apps.jobs.models import Job, JobPackage
from apps.recipes.models import Recipe
from tests.conftest import api_client, experiment_package, submission

from .conftest import EVAL_SENTINEL, TRAIN_SENTINEL, calculator_files, manifest_bytes, push

pytestmark = pytest.mark.django_db
REF = "alice/calculator-tasks@1.0.0"


@pytest.fixture
def eval_recipe(db) -> Recipe:
    """A catalogue entry whose operations include eval and whose entrypoint is train.sh
    (custom/custom compiles only train; the spec's 'same job as an evaluation')."""
    return Recipe.objects.create(
        name="tests/env-probe",
        version="1.0.0",
        digest="sha256:" + "0" * 64,
        framework="script",
        observability="external",
        entrypoint="train.sh",
        parameters={},
        operations=["train", "eval"],
        runtime={"default_version": "user-managed"},
    )


@pytest.fixture
def calculator(alice_api):
    response = push(alice_api)
    assert response.status_code == 201, response.content
    return response.json()


def post_job(client, path: str = "/api/v1/jobs", **overrides):
    data = {"request": json.dumps(submission(**overrides))}
    upload = io.BytesIO(experiment_package(overrides.get("experiment", "exp")))
    upload.name = "package.tar.gz"
    data["package"] = upload
    return client.post(path, data, format="multipart")


def assert_refused(response, detail: str, field: str = "environment", status: int = 400) -> None:
    assert response.status_code == status, response.content
    assert response.json() == {"detail": detail, "field": field}
    assert Job.objects.count() == 0
    assert JobPackage.objects.count() == 0


def start(job: Job) -> tuple[Job, object, str]:
    started = jobs.start_attempt(job.pk)
    assert started is not None
    job.refresh_from_db()
    return job, started[0], started[1]


def served(secret: str, run_id: str):
    return api_client(secret=secret).get(f"/api/ingest/v1/runs/{run_id}/environment")


def archive_files(content: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(content)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_a_training_job_gets_the_train_split_inside_its_runtime(alice, alice_api, calculator):
    response = post_job(alice_api, environment=REF)
    assert response.status_code == 201, response.content
    block = response.json()["spec"]["environment"]
    assert (
        block["ref"] == REF and block["split"] == "train" and block["splits"] == ["train", "eval"]
    )
    assert block["digest"] == calculator["digest"] and block["address"] is None

    job, attempt, secret = start(Job.objects.get())
    variables = job_environment(attempt, secret, out_dir="/o", work_root="/w")
    assert variables[C.ENV_JOB_ENVIRONMENT] == REF
    assert variables[C.ENV_JOB_ENVIRONMENT_SPLIT] == "train"
    assert json.loads(variables[C.ENV_RUNNER_ENVIRONMENT])["version_id"] == block["version_id"]

    answer = served(secret, job.public_id)
    assert answer.status_code == 200, answer.content
    assert answer["X-Environment-Split"] == "train"
    files = archive_files(answer.content)
    assert set(files) == {"environment/manifest.json", "environment/tasks.jsonl"}
    tasks = list(C.iter_tasks(files["environment/tasks.jsonl"]))
    assert [t.split for t in tasks] == ["train"] * 3
    assert TRAIN_SENTINEL.encode() in files["environment/tasks.jsonl"]
    assert EVAL_SENTINEL.encode() not in answer.content

    # The version page lists the run that referenced it.
    runs = alice_api.get("/api/v1/environments/alice/calculator-tasks/versions/1.0.0").json()[
        "runs"
    ]
    assert [(r["id"], r["split"]) for r in runs] == [(job.public_id, "train")]


def test_the_same_job_as_an_evaluation_gets_only_eval_tasks(alice_api, calculator, eval_recipe):
    response = post_job(alice_api, environment=REF, recipe=eval_recipe.name, operation="eval")
    assert response.status_code == 201, response.content
    assert response.json()["spec"]["environment"]["split"] == "eval"
    job, _attempt, secret = start(Job.objects.get())
    files = archive_files(served(secret, job.public_id).content)
    tasks = list(C.iter_tasks(files["environment/tasks.jsonl"]))
    assert [t.split for t in tasks] == ["eval", "eval"]
    assert TRAIN_SENTINEL.encode() not in files["environment/tasks.jsonl"]


def test_an_evaluation_against_an_undeclared_split_is_refused_at_submission(alice_api, eval_recipe):
    train_only = b'{"prompt": "What is 2+2?", "reference": "4"}\n'
    assert push(alice_api, calculator_files(tasks__jsonl=train_only)).status_code == 201
    response = post_job(alice_api, environment=REF, recipe=eval_recipe.name, operation="eval")
    assert_refused(
        response,
        f"environment {REF} declares no eval tasks; an evaluation is refused rather than "
        "served the train split",
    )


def test_training_against_an_eval_only_taskset_is_refused(alice_api):
    eval_only = b'{"prompt": "What is 2+2?", "reference": "4", "split": "eval"}\n'
    assert push(alice_api, calculator_files(tasks__jsonl=eval_only)).status_code == 201
    assert_refused(
        post_job(alice_api, environment=REF),
        f"environment {REF} declares no train tasks; a training job is refused rather than served the "
        "eval split",
    )


@pytest.mark.parametrize(
    ("reference", "detail"),
    [
        (
            "alice/calculator-tasks",
            "environment 'alice/calculator-tasks' needs a version: owner/name@version",
        ),
        (
            "alice/calculator-tasks@9.9.9",
            "environment alice/calculator-tasks@9.9.9 does not exist or is not visible to you",
        ),
        ("alice/../x@1", "environment 'alice/../x@1' must be written owner/name@version"),
    ],
)
def test_it_refuses_references_that_do_not_resolve(alice_api, calculator, reference, detail):
    assert_refused(post_job(alice_api, environment=reference), detail)


def test_another_users_private_environment_cannot_be_referenced(bob_api, calculator):
    assert_refused(
        post_job(bob_api, environment=REF),
        "environment alice/calculator-tasks does not exist or is not visible to you",
    )


def test_a_public_environment_can_be_referenced_by_others(alice_api, bob_api):
    assert push(alice_api, public=True).status_code == 201
    response = post_job(bob_api, environment=REF)
    assert response.status_code == 201, response.content
    # Bob sees his run on the version; Alice (the owner) does not see Bob's job.
    job_id = response.json()["id"]
    assert [
        r["id"]
        for r in bob_api.get("/api/v1/environments/alice/calculator-tasks/versions/1.0.0").json()[
            "runs"
        ]
    ] == [job_id]
    assert (
        alice_api.get("/api/v1/environments/alice/calculator-tasks/versions/1.0.0").json()["runs"]
        == []
    )


def test_validate_shows_the_environment_and_stores_nothing(alice_api, calculator):
    response = post_job(alice_api, path="/api/v1/jobs/validate", environment=REF)
    assert response.status_code == 200, response.content
    assert response.json()["spec"]["environment"]["split"] == "train"
    assert Job.objects.count() == 0


def test_a_sandbox_requirement_without_a_provider_is_refused(alice_api):
    from apps.governance.models import SandboxProvider
    from apps.governance.services import SANDBOX_REQUIRED_NONE

    SandboxProvider.objects.all().delete()
    files = calculator_files(manifest__json=manifest_bytes(sandbox={"required": True}))
    assert push(alice_api, files).status_code == 201
    assert_refused(post_job(alice_api, environment=REF), SANDBOX_REQUIRED_NONE)
    # With a provider configured, the same job is admitted and names it.
    SandboxProvider.objects.create(name="e2b", kind="e2b")
    response = post_job(alice_api, environment=REF)
    assert response.status_code == 201, response.content
    assert response.json()["spec"]["environment"]["sandbox_provider"] == "e2b"


def test_a_container_environment_is_refused_on_a_fleet_that_cannot_host_it(alice_api):
    files = {
        "manifest.json": manifest_bytes(
            deployment="container", image="ghcr.io/acme/env:1", image_port=8000
        )
    }
    assert push(alice_api, files).status_code == 201
    response = post_job(alice_api, environment=REF)
    assert response.status_code == 400 and response.json()["field"] == "profile"
    assert "is deployed as a container, which needs a kubernetes fleet" in response.json()["detail"]
    assert Job.objects.count() == 0


PLUGIN_FILES = {
    "plugin.yaml": b"schema: tuneplane/plugin/v1\nname: calculator-harness\nversion: 1.0.0\n"
    b"capability: environment\nentrypoint: harness:CalculatorResources\n",
    "harness.py": b"class CalculatorResources:\n    pass\n",
}


def nemo_gym_manifest(digest: str = "") -> bytes:
    harness = {
        "plugin": "alice/calculator-harness",
        "version": "1.0.0",
        "entrypoint": "harness:CalculatorResources",
        "digest": digest,
    }
    return manifest_bytes(protocol="nemo-gym", category="math", harness=harness)


def push_plugin(client) -> dict:
    upload = io.BytesIO(build_archive(PLUGIN_FILES))
    upload.name = "bundle.tar.gz"
    response = client.post("/api/v1/plugins", {"bundle": upload}, format="multipart")
    assert response.status_code == 201, response.content
    return response.json()


def test_the_harness_digest_is_verified_at_submission(alice_api):
    wrong = "sha256:" + "a" * 64
    assert (
        push(alice_api, calculator_files(manifest__json=nemo_gym_manifest(wrong))).status_code
        == 201
    )
    assert_refused(
        post_job(alice_api, environment=REF),
        f"environment {REF} names harness alice/calculator-harness@1.0.0, which has not been pushed "
        "(tp plugin push)",
    )
    plugin = push_plugin(alice_api)
    assert_refused(
        post_job(alice_api, environment=REF),
        f"harness digest mismatch: environment {REF} pins alice/calculator-harness@1.0.0 at {wrong}, "
        f"but the pushed plugin is {plugin['digest']}",
    )

    right = calculator_files(manifest__json=nemo_gym_manifest(plugin["digest"]))
    assert push(alice_api, right, version="1.0.1").status_code == 201
    response = post_job(alice_api, environment="alice/calculator-tasks@1.0.1")
    assert response.status_code == 201, response.content
    harness = response.json()["spec"]["environment"]["harness"]
    assert harness["digest"] == plugin["digest"]
    assert harness["plugin_version_id"] == HarnessPluginVersion.objects.get().pk

    # The runtime receives the harness code beside the environment, and never at rollout
    # is the digest looked at again.
    job, _attempt, secret = start(Job.objects.get())
    files = archive_files(served(secret, job.public_id).content)
    assert files["harness/harness.py"] == PLUGIN_FILES["harness.py"]


def test_a_remote_environment_needs_an_answering_runner(alice, alice_api):
    from django.utils import timezone

    from apps.environments import services

    files = {
        "manifest.json": manifest_bytes(
            deployment="remote", verifier={"kind": "endpoint", "ref": "self"}
        )
    }
    assert push(alice_api, files).status_code == 201
    assert_refused(
        post_job(alice_api, environment=REF),
        f"environment {REF} has no answering runner (0 registered; see tp env runner ls)",
    )
    version = services.access_version(alice, REF)
    now = timezone.now()
    Runner.objects.create(
        version=version, url="http://10.0.0.9:8000", registered_by=alice, answering=False
    )
    old = Runner.objects.create(
        version=version,
        url="http://10.0.0.1:8000",
        registered_by=alice,
        answering=True,
        last_answered_at=now - timezone.timedelta(seconds=20),
    )
    recent = Runner.objects.create(
        version=version,
        url="http://10.0.0.2:8000",
        registered_by=alice,
        answering=True,
        last_answered_at=now,
    )
    response = post_job(alice_api, environment=REF)
    assert response.status_code == 201, response.content
    assert response.json()["spec"]["environment"]["address"] == recent.url
    services.drain_runner(alice, recent)
    assert services.resolve_address(version) == old.url  # drained: no new job goes there


def test_the_ingest_route_is_closed_to_users_other_runs_and_finished_jobs(
    alice, alice_api, calculator
):
    assert post_job(alice_api, environment=REF).status_code == 201
    job, attempt, secret = start(Job.objects.get())

    user = api_client(alice).get(f"/api/ingest/v1/runs/{job.public_id}/environment")
    assert user.status_code == 401
    assert (
        EVAL_SENTINEL.encode() not in user.content and TRAIN_SENTINEL.encode() not in user.content
    )

    assert post_job(alice_api, experiment="other").status_code == 201
    other, _a, other_secret = start(Job.objects.get(experiment="other"))
    wrong_run = served(other_secret, job.public_id)
    assert wrong_run.status_code == 401
    assert wrong_run.json()["detail"] == "ingest token is not valid for this run"
    no_env = served(other_secret, other.public_id)
    assert no_env.status_code == 404
    assert no_env.json()["detail"] == f"job {other.public_id} references no environment"

    jobs.record_exited(attempt, 0)
    finished = served(secret, job.public_id)
    assert finished.status_code == 409
    assert (
        finished.json()["detail"]
        == f"job {job.public_id} is succeeded; its environment is served only while it runs"
    )
    assert TRAIN_SENTINEL.encode() not in finished.content


def test_a_container_environment_becomes_a_sidecar_in_the_kubernetes_pod(alice_api, settings):
    """openenv + container on a kubernetes fleet: the executor's renderer puts the image
    beside the trainer, on the Pod's loopback at image_port, with no GPU and no mounts."""
    from apps.governance.models import Fleet
    from apps.jobs.k8s.manifests import render_job

    settings.TUNEPLANE_EXECUTOR = "kubernetes"
    files = {
        "manifest.json": manifest_bytes(
            deployment="container", image="ghcr.io/acme/env:1", image_port=8000
        )
    }
    assert push(alice_api, files).status_code == 201
    response = post_job(alice_api, environment=REF, profile="h200:8")
    assert response.status_code == 201, response.content
    block = response.json()["spec"]["environment"]
    assert (block["address"], block["image_port"]) == ("http://127.0.0.1:8000", 8000)
    _job, attempt, _secret = start(Job.objects.get())
    fleet = Fleet.objects.get(name="gpu")
    pod = render_job(attempt, {**fleet.settings, "name": fleet.name})["spec"]["template"]["spec"]
    trainer, sidecar = pod["containers"]
    assert sidecar["image"] == "ghcr.io/acme/env:1"
    assert sidecar["ports"][0]["containerPort"] == 8000
    assert sidecar["volumeMounts"] == [] and "nvidia.com/gpu" not in json.dumps(sidecar)
    assert trainer["resources"]["limits"]["nvidia.com/gpu"] == "8"
    trainer_env = {e["name"]: e.get("value") for e in trainer["env"]}
    assert trainer_env[C.ENV_JOB_ENVIRONMENT_URL] == "http://127.0.0.1:8000"
    assert trainer_env[C.ENV_JOB_ENVIRONMENT_SPLIT] == "train"
    assert pod["automountServiceAccountToken"] is False
