"""State sync: read an attempt's Job, pods and events back from the API server.

The runner inside the pod reports `started` and `exited` itself; this sync covers what
it cannot report: a pod that never starts (an image that cannot be pulled, no node fits),
a container killed from outside (OOMKilled) and a node that disappears. It also copies
the pod events for the Events tab, and cleans up the attempt's resources once the job has
ended. Every step is idempotent: the services ignore a report for an attempt that has
already ended, so the sync and the runner can race without harm.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone
from kubernetes import client as k8s

from .. import services
from ..choices import TERMINAL_STATES, AttemptState, ExecutorKind
from ..models import ExecutionAttempt
from .client import FleetClient, fleet_client, is_not_found
from .manifests import LABEL_ATTEMPT, TRAINER, attempt_names
from .models import ClusterEvent

log = logging.getLogger(__name__)

PENDING, RUNNING, SUCCEEDED, FAILED, LOST = "pending", "running", "succeeded", "failed", "lost"
PULL_ERRORS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
START_ERRORS = frozenset({"CreateContainerConfigError", "CreateContainerError", "RunContainerError"})
NODE_LOST_REASONS = frozenset({"NodeLost", "Evicted", "Shutdown", "NodeShutdown", "Terminated",
                               "UnexpectedAdmissionError", "NodeAffinity"})
ACTIVE_ATTEMPT_STATES = (AttemptState.LAUNCHING, AttemptState.RUNNING)
SYNC_BATCH = 200


@dataclass(frozen=True)
class Observation:
    phase: str  # pending | running | succeeded | failed | lost
    reason: str = ""
    exit_code: int | None = None


def _trainer_status(pod: k8s.V1Pod) -> k8s.V1ContainerStatus | None:
    for status in (pod.status.container_statuses or []) if pod.status else []:
        if status.name == TRAINER:
            return status
    return None


def _pod_failure(pod: k8s.V1Pod) -> Observation | None:
    name = pod.metadata.name
    status = pod.status
    if status is None:
        return None
    disrupted = any(c.type == "DisruptionTarget" and c.status == "True" for c in status.conditions or [])
    if status.phase == "Unknown" or status.reason in NODE_LOST_REASONS or disrupted:
        node = (pod.spec.node_name if pod.spec else None) or "its node"
        detail = status.message or status.reason or "the node stopped reporting"
        return Observation(FAILED, f"pod {name} was lost with {node} ({detail}); submit the job again")
    trainer = _trainer_status(pod)
    if trainer is None or trainer.state is None:
        return None
    waiting = trainer.state.waiting
    if waiting is not None and waiting.reason in PULL_ERRORS:
        return Observation(
            FAILED,
            f"pod {name} cannot pull image {trainer.image}: {waiting.reason}: {waiting.message or ''}".rstrip(": ")
            + "; check --image, that the tag or digest exists, and the fleet's image_pull_secrets",
        )
    if waiting is not None and waiting.reason in START_ERRORS:
        return Observation(FAILED, f"pod {name} cannot start the trainer: {waiting.reason}: {waiting.message or ''}")
    terminated = trainer.state.terminated
    if terminated is not None and terminated.reason == "OOMKilled":
        return Observation(
            FAILED,
            f"pod {name}: the trainer was OOMKilled (exit code {terminated.exit_code}): it used more memory "
            "than the pod or node had; lower the batch size or choose a profile with more memory",
            exit_code=terminated.exit_code,
        )
    if terminated is not None and terminated.exit_code not in (0, None):
        return Observation(
            FAILED, f"pod {name}: the trainer exited with code {terminated.exit_code}", exit_code=terminated.exit_code
        )
    return None


def observe(job: k8s.V1Job | None, pods: list[k8s.V1Pod]) -> Observation:
    """What the cluster says about an attempt. A pure function of the API objects."""
    if job is None:
        return Observation(LOST, "the Kubernetes Job no longer exists (deleted outside TunePlane?)")
    for pod in sorted(pods, key=lambda p: p.metadata.name):
        failure = _pod_failure(pod)
        if failure is not None:
            return failure
    for condition in (job.status.conditions or []) if job.status else []:
        if condition.status != "True":
            continue
        if condition.type == "Failed":
            return Observation(FAILED, f"the Kubernetes Job failed: {condition.reason}: {condition.message or ''}")
        if condition.type == "Complete":
            return Observation(SUCCEEDED, exit_code=0)
    phases = [p.status.phase if p.status else "Pending" for p in pods]
    completions = (job.spec.completions if job.spec else None) or 1
    if phases and phases.count("Succeeded") >= completions:
        return Observation(SUCCEEDED, exit_code=0)
    if any(phase == "Running" for phase in phases):
        return Observation(RUNNING)
    return Observation(PENDING)


def _when(*values: Any) -> datetime:
    for value in values:
        if value:
            return value
    return timezone.now()


def copy_events(fc: FleetClient, attempt: ExecutionAttempt, objects: list[tuple[str, str]]) -> int:
    """Copy the API server's events about the attempt's Job and pods (kind, name)."""
    copied = 0
    for kind, name in objects:
        try:
            events = fc.core.list_namespaced_event(
                fc.namespace, field_selector=f"involvedObject.name={name}", _request_timeout=(5, 30)
            ).items
        except k8s.ApiException as exc:
            log.warning("listing events of %s/%s failed: %s", kind, name, exc.status)
            continue
        for event in events:
            uid = event.metadata.uid if event.metadata else None
            if not uid:
                continue
            first = _when(event.first_timestamp, event.event_time, event.metadata.creation_timestamp)
            source = (event.source.component if event.source else None) or event.reporting_component or "kubernetes"
            ClusterEvent.objects.update_or_create(
                uid=uid,
                defaults={
                    "attempt": attempt,
                    "type": event.type if event.type in ClusterEvent.Type.values else ClusterEvent.Type.NORMAL,
                    "reason": (event.reason or "")[:128],
                    "message": event.message or "",
                    "source": source[:64],
                    "involved_object": f"{kind}/{name}"[:253],
                    "count": event.count or 1,
                    "first_seen": first,
                    "last_seen": _when(event.last_timestamp, event.event_time, first),
                },
            )
            copied += 1
    return copied


def apply(attempt: ExecutionAttempt, seen: Observation) -> None:
    """Move the attempt (and its job) the way the cluster says, through the services."""
    if attempt.state not in ACTIVE_ATTEMPT_STATES:
        return
    if seen.phase == RUNNING and attempt.state == AttemptState.LAUNCHING:
        services.record_started(attempt, None)
    elif seen.phase == SUCCEEDED:
        services.record_exited(attempt, 0)
    elif seen.phase == FAILED:
        services.fail_attempt(attempt.pk, seen.reason)
    elif seen.phase == LOST:
        services.fail_attempt(attempt.pk, seen.reason, lost=True)


def sync_attempt(attempt_id: int) -> Observation | None:
    attempt = ExecutionAttempt.objects.select_related("job").get(pk=attempt_id)
    fc = fleet_client(attempt.handle.get("fleet") or attempt.job.spec["resources"]["fleet"])
    names = attempt_names(attempt)
    seen: Observation | None = None
    if attempt.state in ACTIVE_ATTEMPT_STATES:
        try:
            job = fc.batch.read_namespaced_job(names.job, fc.namespace, _request_timeout=(5, 30))
        except k8s.ApiException as exc:
            if not is_not_found(exc):
                raise
            job = None
        pods = fc.core.list_namespaced_pod(
            fc.namespace, label_selector=f"{LABEL_ATTEMPT}={attempt.pk}", _request_timeout=(5, 30)
        ).items
        copy_events(fc, attempt, [("Job", names.job), *(("Pod", p.metadata.name) for p in pods)])
        seen = observe(job, pods)
        apply(attempt, seen)
        attempt.refresh_from_db()
        attempt.job.refresh_from_db()
    if attempt.job.state in TERMINAL_STATES and not attempt.handle.get("cleaned_up"):
        # Spec: resource names, labels and the token Secret are cleaned up when the job
        # ends. The claim with TUNEPLANE_OUT_DIR stays.
        from ..executors.kubernetes import KubernetesExecutor

        KubernetesExecutor().cancel(attempt)
    return seen


def attempts_to_sync():
    """Active kubernetes attempts, and finished ones whose resources are still there."""
    return (
        ExecutionAttempt.objects.filter(executor=ExecutorKind.KUBERNETES)
        .filter(Q(state__in=ACTIVE_ATTEMPT_STATES) | Q(job__state__in=TERMINAL_STATES))
        # has_key, not cleaned_up=True: a missing key compares as NULL in SQL and would
        # exclude every attempt that still has resources.
        .exclude(handle__has_key="cleaned_up")
        .exclude(handle={})  # never launched: nothing exists in the cluster
        .order_by("pk")
        .values_list("pk", flat=True)[:SYNC_BATCH]
    )
