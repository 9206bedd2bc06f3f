"""Render the Kubernetes objects of one execution attempt.

One attempt = one batch/v1 Job (spec "a Job per execution attempt"): a retry is a new
attempt with a new ingest token, decided by the control plane, so the Job never retries
on its own (backoffLimit 0). Multi-node profiles get an Indexed Job plus a headless
Service whose name is the pods' subdomain, so node i answers at `<job>-<i>.<svc>` and
torchrun's c10d rendezvous meets at node 0 (integration-facts.md, section 4).

Pure functions of the attempt, its spec and the fleet's settings: no API calls here, so
every manifest can be validated offline against the official OpenAPI schemas.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from tuneplane.contracts import env as E
from tuneplane.contracts.ingest import INGEST_PREFIX

from ..contract import job_environment
from ..models import ExecutionAttempt

MANAGED_BY = "tuneplane"
LABEL_MANAGED = "app.kubernetes.io/managed-by"
LABEL_JOB = "tuneplane.dev/job"
LABEL_ATTEMPT = "tuneplane.dev/attempt"
ANNOTATION_JOB_ID = "tuneplane.dev/job-id"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
GPU_RESOURCE = "nvidia.com/gpu"
TRAINER = "trainer"
CAPSULE_DIR = "/opt/tuneplane/capsule"  # the runtime image's SDK capsule (deploy/runtime)
WORK_DIR = "/tuneplane/work"
OUT_DIR = "/tuneplane/out"
RENDEZVOUS_PORT = 29500
TOKEN_KEY = "token"
_NOT_DNS = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True)
class AttemptNames:
    job: str  # the batch/v1 Job, and the headless Service of a multi-node job
    secret: str  # holds the attempt's ingest token

    @property
    def service(self) -> str:
        return self.job


def attempt_names(attempt: ExecutionAttempt) -> AttemptNames:
    """DNS-1123 names of at most 52 characters: an Indexed pod's hostname is
    `<job>-<index>` and must stay within the 63 of a label."""
    public_id = _NOT_DNS.sub("-", attempt.job.public_id.lower()).strip("-")
    base = f"tp-{public_id}-a{attempt.number}"
    if len(base) > 52:
        digest = hashlib.sha256(attempt.job.public_id.encode()).hexdigest()[:6]
        base = f"tp-{public_id[:36].rstrip('-')}-{digest}-a{attempt.number}"
    return AttemptNames(job=base, secret=f"{base}-token")


def labels(attempt: ExecutionAttempt) -> dict[str, str]:
    value = _NOT_DNS.sub("-", attempt.job.public_id.lower()).strip("-")[:63].strip("-")
    return {LABEL_MANAGED: MANAGED_BY, LABEL_JOB: value, LABEL_ATTEMPT: str(attempt.pk)}


def _env_list(values: dict[str, str]) -> list[dict[str, Any]]:
    return [{"name": name, "value": str(value)} for name, value in values.items()]


def _ingest_endpoint(fleet: dict[str, Any]) -> str:
    # Pods usually reach the control plane at a cluster-internal address (the web
    # Service), not at the public URL users see.
    base = fleet.get("ingest_url") or settings.TUNEPLANE_INGEST_URL
    return f"{base.rstrip('/')}/{INGEST_PREFIX}"


def trainer_environment(attempt: ExecutionAttempt, fleet: dict[str, Any], names: AttemptNames) -> list[dict[str, Any]]:
    """The whole job environment contract, TUNEPLANE_CLUSTER_* equal to the allocation,
    the ingest token from the attempt's Secret (never inline in the pod spec)."""
    resources = attempt.job.spec["resources"]
    nodes = int(resources["num_nodes"])
    per_node = int(resources["gpus_per_node"])
    values = job_environment(attempt, "", out_dir=OUT_DIR, work_root=WORK_DIR)
    values.pop(E.JOB_TOKEN)
    values[E.JOB_ENDPOINT] = _ingest_endpoint(fleet)
    values[E.RUNNER_CAPSULE] = CAPSULE_DIR
    values["PYTHONUNBUFFERED"] = "1"
    env = _env_list(values)
    env.append(
        {"name": E.JOB_TOKEN, "valueFrom": {"secretKeyRef": {"name": names.secret, "key": TOKEN_KEY}}}
    )
    if nodes > 1:
        master = f"{names.job}-0.{names.service}"
        env += _env_list(
            {
                E.CLUSTER_MASTER_ADDR: master,
                E.CLUSTER_MASTER_PORT: str(RENDEZVOUS_PORT),
                "MASTER_ADDR": master,
                "MASTER_PORT": str(RENDEZVOUS_PORT),
                # torchrun reads PET_<FLAG> as the default of --<flag>: a bare `torchrun
                # train.py` in train.sh joins the c10d rendezvous at node 0.
                "PET_NNODES": str(nodes),
                "PET_NPROC_PER_NODE": str(max(per_node, 1)),
                "PET_RDZV_BACKEND": "c10d",
                "PET_RDZV_ENDPOINT": f"{master}:{RENDEZVOUS_PORT}",
                "PET_RDZV_ID": names.job,
            }
        )
        index = {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"}}
        env += [{"name": E.CLUSTER_NODE_RANK, "valueFrom": index}, {"name": "NODE_RANK", "valueFrom": index}]
    else:
        env += _env_list({E.CLUSTER_NODE_RANK: "0"})
    return env


def _tolerations(resources: dict[str, Any]) -> list[dict[str, Any]]:
    tolerations = [dict(t) for t in resources.get("tolerations") or []]
    if int(resources["gpus_per_node"]) > 0 and not any(t.get("key") == GPU_RESOURCE for t in tolerations):
        # GPU nodes are commonly tainted nvidia.com/gpu:NoSchedule by the GPU operator.
        tolerations.append({"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"})
    return tolerations


def _sidecar(spec: dict[str, Any]) -> dict[str, Any] | None:
    """The environment's container when its deployment is `container` (apps.environments)."""
    try:
        from apps.environments.runtime import sidecar_container
    except ImportError:  # the environments app is not installed in this deployment
        return None
    return sidecar_container(spec)


def render_secret(attempt: ExecutionAttempt, fleet: dict[str, Any], token: str) -> dict[str, Any]:
    names = attempt_names(attempt)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": names.secret, "namespace": fleet["namespace"], "labels": labels(attempt)},
        "type": "Opaque",
        "stringData": {TOKEN_KEY: token},
    }


def render_service(attempt: ExecutionAttempt, fleet: dict[str, Any]) -> dict[str, Any]:
    names = attempt_names(attempt)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": names.service, "namespace": fleet["namespace"], "labels": labels(attempt)},
        "spec": {
            "clusterIP": "None",
            # Peers must resolve before they are ready, or the rendezvous never forms.
            "publishNotReadyAddresses": True,
            "selector": {"job-name": names.job},
            "ports": [{"name": "c10d", "port": RENDEZVOUS_PORT, "targetPort": RENDEZVOUS_PORT}],
        },
    }


def render_job(attempt: ExecutionAttempt, fleet: dict[str, Any]) -> dict[str, Any]:
    spec = attempt.job.spec
    resources = spec["resources"]
    nodes = int(resources["num_nodes"])
    per_node = int(resources["gpus_per_node"])
    names = attempt_names(attempt)
    runtime_image = fleet.get("runtime_image") or settings.TUNEPLANE_RUNTIME_IMAGE
    trainer: dict[str, Any] = {
        "name": TRAINER,
        "image": spec["runtime"]["image"],
        "imagePullPolicy": "IfNotPresent",
        # The runner from the capsule, with the image's own python3: nothing of ours has
        # to be installed in the user's image (`python3 DIR` runs DIR/__main__.py).
        "command": ["python3", CAPSULE_DIR],
        "workingDir": WORK_DIR,
        "env": trainer_environment(attempt, fleet, names),
        "volumeMounts": [
            {"name": "tuneplane-capsule", "mountPath": CAPSULE_DIR, "readOnly": True},
            {"name": "work", "mountPath": WORK_DIR},
            # TUNEPLANE_OUT_DIR on the fleet's claim: it outlives the pod, and the subPath
            # keeps every attempt of every job in its own directory.
            {
                "name": "outputs",
                "mountPath": OUT_DIR,
                "subPath": f"jobs/{attempt.job.public_id}/attempt-{attempt.number}",
            },
            {"name": "dshm", "mountPath": "/dev/shm"},
        ],
        "securityContext": {"allowPrivilegeEscalation": False},
    }
    if per_node > 0:
        # An extended resource: limits only (requests default to them); never overcommitted.
        trainer["resources"] = {"limits": {GPU_RESOURCE: str(per_node)}}  # a quantity
    if nodes > 1:
        trainer["ports"] = [{"name": "c10d", "containerPort": RENDEZVOUS_PORT, "protocol": "TCP"}]
    containers = [trainer]
    sidecar = _sidecar(spec)
    if sidecar is not None:
        containers.append(sidecar)
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": fleet.get("service_account", "tuneplane-job"),
        # The trainer talks to TunePlane with its ingest token; it has no business with
        # the Kubernetes API.
        "automountServiceAccountToken": False,
        "initContainers": [
            {
                "name": "tuneplane-capsule",
                "image": runtime_image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["cp", "-R", f"{CAPSULE_DIR}/.", "/capsule/"],
                "volumeMounts": [{"name": "tuneplane-capsule", "mountPath": "/capsule"}],
            }
        ],
        "containers": containers,
        "volumes": [
            {"name": "tuneplane-capsule", "emptyDir": {}},
            {"name": "work", "emptyDir": {}},
            {"name": "outputs", "persistentVolumeClaim": {"claimName": fleet.get("output_claim", "tuneplane-outputs")}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        ],
    }
    if resources.get("node_selector"):
        pod_spec["nodeSelector"] = dict(resources["node_selector"])
    tolerations = _tolerations(resources)
    if tolerations:
        pod_spec["tolerations"] = tolerations
    if fleet.get("image_pull_secrets"):
        pod_spec["imagePullSecrets"] = [{"name": name} for name in fleet["image_pull_secrets"]]
    if nodes > 1:
        pod_spec["subdomain"] = names.service
    job_spec: dict[str, Any] = {
        "backoffLimit": 0,
        "ttlSecondsAfterFinished": int(fleet.get("ttl_seconds_after_finished", 3600)),
        "completions": nodes,
        "parallelism": nodes,
        "template": {"metadata": {"labels": labels(attempt)}, "spec": pod_spec},
    }
    if nodes > 1:
        job_spec["completionMode"] = "Indexed"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": names.job,
            "namespace": fleet["namespace"],
            "labels": labels(attempt),
            "annotations": {ANNOTATION_JOB_ID: attempt.job.public_id},
        },
        "spec": job_spec,
    }


def render_attempt(attempt: ExecutionAttempt, fleet: dict[str, Any], token: str) -> list[dict[str, Any]]:
    """Every object of the attempt, in creation order: the token Secret first (the pod
    needs it to start), the headless Service before the pods that register in it."""
    objects = [render_secret(attempt, fleet, token)]
    if int(attempt.job.spec["resources"]["num_nodes"]) > 1:
        objects.append(render_service(attempt, fleet))
    objects.append(render_job(attempt, fleet))
    return objects
