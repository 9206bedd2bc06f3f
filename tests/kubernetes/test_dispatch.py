"""Dispatch to Kubernetes: the objects created for h200:8 and h200:16, through the real
`kubernetes` client against the API stub, each validated against the official schemas."""

from __future__ import annotations

import json

import pytest
from tuneplane.contracts import env as E

from apps.jobs import services
from apps.jobs.choices import AttemptState, JobState
from apps.jobs.k8s.manifests import attempt_names
from apps.jobs.models import ExecutionAttempt
from tests.conftest import build_package, submission

from .conftest import NAMESPACE, validate_manifest

pytestmark = pytest.mark.django_db


def env_of(container: dict) -> dict[str, dict]:
    return {item["name"]: item for item in container["env"]}


def test_h200_8_is_one_pod_with_8_gpus_and_the_whole_contract(admit, dispatch, k8s_stub):
    job = admit(profile="h200:8", hyperparams={"lr": "1e-5"})
    attempt = dispatch(job)

    (secret,) = k8s_stub.created("Secret")
    (manifest,) = k8s_stub.created("Job")
    assert k8s_stub.created("Service") == []  # one node: no rendezvous service
    for obj in (secret, manifest):
        validate_manifest(obj)

    spec = manifest["spec"]
    assert manifest["metadata"]["namespace"] == NAMESPACE
    assert spec["completions"] == spec["parallelism"] == 1
    assert "completionMode" not in spec
    assert spec["backoffLimit"] == 0
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H200"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    trainer = pod["containers"][0]
    assert trainer["image"] == "registry.example.com/trainer:v1"
    assert trainer["resources"] == {"limits": {"nvidia.com/gpu": "8"}}
    env = env_of(trainer)
    # The whole contract: every variable a train.sh checks with :? (WORK_DIR and EXP_DIR
    # are set by the runner once it has unpacked the package) and the rest of the spec's table.
    for name in set(E.JOB_CONTRACT) - {E.WORK_DIR, E.EXP_DIR}:
        assert name in env, name
    assert env[E.CLUSTER_NUM_NODES]["value"] == "1"
    assert env[E.CLUSTER_GPUS_PER_NODE]["value"] == "8"
    assert env[E.FRAMEWORK]["value"] == env[E.RECIPE]["value"] == "custom"
    assert env[E.JOB_ENABLED]["value"] == "1"
    assert env[E.JOB_RUN_ID]["value"] == job.public_id
    assert env[E.JOB_ENDPOINT]["value"] == "http://tuneplane-web.tuneplane.svc:8000/api/ingest/v1"
    assert env[E.EXTERNAL_OBSERVABILITY_URL]["value"] == "https://wandb.example/proj"
    assert env[E.OUT_DIR]["value"] == "/tuneplane/out"
    assert env[E.RUNNER_OBSERVABILITY]["value"] == "external"
    # The token comes from the attempt's Secret, never inline in the pod spec.
    assert env[E.JOB_TOKEN] == {
        "name": E.JOB_TOKEN,
        "valueFrom": {"secretKeyRef": {"name": secret["metadata"]["name"], "key": "token"}},
    }
    assert secret["stringData"]["token"].startswith("tpi_")
    assert all(secret["stringData"]["token"] not in str(item) for item in trainer["env"])
    # TUNEPLANE_OUT_DIR lives on the fleet's claim, in a directory of its own per attempt.
    outputs = next(m for m in trainer["volumeMounts"] if m["mountPath"] == "/tuneplane/out")
    assert outputs["subPath"] == f"jobs/{job.public_id}/attempt-1"
    claim = next(v for v in pod["volumes"] if v["name"] == outputs["name"])
    assert claim == {"name": "outputs", "persistentVolumeClaim": {"claimName": "tuneplane-outputs"}}
    # The runner comes from the runtime image's capsule; the user's image needs only python3.
    assert trainer["command"] == ["python3", "/opt/tuneplane/capsule"]
    assert pod["initContainers"][0]["image"].startswith("registry.example.com/tuneplane/runtime@sha256:")

    job.refresh_from_db()
    assert job.state == JobState.QUEUED
    assert attempt.executor == "kubernetes"
    assert attempt.handle == {
        "fleet": "gpu", "namespace": NAMESPACE, "job_name": attempt_names(attempt).job,
        "secret": secret["metadata"]["name"], "service": None,
    }
    assert attempt.cluster_events.get().reason == "Created"


def test_h200_16_is_an_indexed_job_of_two_pods_with_torchrun_rendezvous(admit, dispatch, k8s_stub):
    job = admit(profile="h200:16")
    dispatch(job)

    (service,) = k8s_stub.created("Service")
    (manifest,) = k8s_stub.created("Job")
    validate_manifest(service)
    validate_manifest(manifest)
    name = manifest["metadata"]["name"]
    spec = manifest["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == 2
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"] == name
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == {"job-name": name}
    trainer = pod["containers"][0]
    assert trainer["resources"] == {"limits": {"nvidia.com/gpu": "8"}}
    env = env_of(trainer)
    master = f"{name}-0.{name}"
    assert env[E.CLUSTER_NUM_NODES]["value"] == "2"
    assert env[E.CLUSTER_GPUS_PER_NODE]["value"] == "8"
    assert env["PET_NNODES"]["value"] == "2"
    assert env["PET_NPROC_PER_NODE"]["value"] == "8"
    assert env["PET_RDZV_BACKEND"]["value"] == "c10d"
    assert env["PET_RDZV_ENDPOINT"]["value"] == f"{master}:29500"
    assert env["PET_RDZV_ID"]["value"] == name
    assert env["MASTER_ADDR"]["value"] == env[E.CLUSTER_MASTER_ADDR]["value"] == master
    assert env[E.CLUSTER_NODE_RANK]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
    }
    assert {"name": "c10d", "containerPort": 29500, "protocol": "TCP"} in trainer["ports"]
    # The hostname of pod <job>-<index> must fit a DNS label.
    assert len(f"{name}-1") <= 63


def test_a_long_experiment_name_still_gives_valid_names(admit, dispatch, k8s_stub):
    job = admit(experiment="a" * 60, profile="h200:16")
    attempt = dispatch(job)
    names = attempt_names(attempt)
    assert len(names.job) <= 52
    for obj in [*k8s_stub.created("Secret"), *k8s_stub.created("Service"), *k8s_stub.created("Job")]:
        validate_manifest(obj)


def test_the_dispatch_runs_through_celery_after_commit(kubernetes_fleet, k8s_stub, alice_api, submit,
                                                       django_capture_on_commit_callbacks):
    from tuneplane_site.celery import app

    app.conf.task_always_eager = True
    try:
        with django_capture_on_commit_callbacks(execute=True):
            response = submit(alice_api, profile="h200:8")
    finally:
        app.conf.task_always_eager = False
    assert response.status_code == 201, response.content
    assert len(k8s_stub.created("Job")) == 1
    assert ExecutionAttempt.objects.get().state == AttemptState.LAUNCHING


def test_a_refused_create_fails_the_attempt_and_leaves_no_token_secret(admit, dispatch, k8s_stub):
    k8s_stub.fail_next_create["Job"] = 403
    job = admit(profile="h200:8")
    attempt = dispatch(job)

    job.refresh_from_db()
    assert job.state == JobState.FAILED
    assert "the kubernetes executor could not start the job" in job.failure_reason
    assert attempt.state == AttemptState.FAILED
    assert k8s_stub.deleted("Secret") == [attempt_names(attempt).secret]
    assert [key for key in k8s_stub.objects if key[0] == "Secret"] == []


def test_a_platform_recipe_gets_the_catalogue_image_and_its_flags(alice, dispatch, k8s_stub):
    request = submission(
        recipe="trl/sft", observability_url="", image="", profile="h200:8", model="Qwen/Qwen2.5-0.5B",
        train_data="trl-lib/Capybara", hyperparams={"learning_rate": "1e-5", "packing": "true"},
    )
    package = build_package({"experiments/exp/train.py": "print('sft')\n"})
    job, warnings = services.submit_job(alice, json.dumps(request), package)
    assert warnings == []
    dispatch(job)

    (manifest,) = k8s_stub.created("Job")
    validate_manifest(manifest)
    trainer = manifest["spec"]["template"]["spec"]["containers"][0]
    assert trainer["image"].startswith("ghcr.io/tuneplane/runtime-trl@sha256:")
    env = env_of(trainer)
    assert env[E.RUNNER_OBSERVABILITY]["value"] == "platform"
    assert env[E.RUNNER_LAUNCHER]["value"] == "torchrun"
    args = json.loads(env[E.RUNNER_ARGS]["value"])
    assert args[args.index("--learning-rate") + 1] == "1e-05"
    assert "--packing" in args
    assert args[args.index("--model-name-or-path") + 1] == "Qwen/Qwen2.5-0.5B"
    assert args[args.index("--dataset-name") + 1] == "trl-lib/Capybara"
    assert E.EXTERNAL_OBSERVABILITY_URL not in env


def test_k8s_manifests_prints_what_dispatch_would_create_without_a_cluster(admit, kubernetes_fleet, k8s_stub):
    import io

    import yaml
    from django.core.management import call_command

    job = admit(profile="h200:16")
    out = io.StringIO()
    call_command("k8s_manifests", job.public_id, "--validate", "1.30.0", stdout=out)

    objects = list(yaml.safe_load_all(out.getvalue()))
    assert [o["kind"] for o in objects] == ["Secret", "Service", "Job"]
    assert objects[0]["stringData"]["token"] == "<ingest token, issued at dispatch>"
    assert objects[2]["spec"]["completionMode"] == "Indexed"
    assert k8s_stub.calls == []  # nothing was sent
