"""The `kubernetes` executor: one batch/v1 Job per execution attempt.

launch() creates the attempt's token Secret, the headless Service of a multi-node job
and the Job (k8s/manifests.py); cancel() deletes the Job, its pods, the Service and the
Secret. What happens in between is read back by the periodic state sync (k8s/sync.py),
because a pod that never starts (an image that cannot be pulled) or dies hard (OOM, a
lost node) never gets to tell the control plane itself.
"""

from __future__ import annotations

import logging

from django.utils import timezone
from kubernetes import client as k8s

from ..k8s.client import FleetClient, fleet_client, is_not_found
from ..k8s.manifests import LABEL_ATTEMPT, attempt_names, render_attempt
from ..k8s.models import ClusterEvent
from ..models import ExecutionAttempt

log = logging.getLogger(__name__)


def record_event(attempt: ExecutionAttempt, reason: str, message: str, *, warning: bool = False,
                 involved: str = "") -> ClusterEvent:
    """An event TunePlane itself caused, listed on the Events tab with the pod events."""
    now = timezone.now()
    return ClusterEvent.objects.create(
        attempt=attempt,
        type=ClusterEvent.Type.WARNING if warning else ClusterEvent.Type.NORMAL,
        reason=reason,
        message=message,
        source="tuneplane",
        involved_object=involved,
        first_seen=now,
        last_seen=now,
    )


def _create(fc: FleetClient, obj: dict) -> None:
    kind = obj["kind"]
    if kind == "Secret":
        fc.core.create_namespaced_secret(fc.namespace, obj, _request_timeout=(5, 30))
    elif kind == "Service":
        fc.core.create_namespaced_service(fc.namespace, obj, _request_timeout=(5, 30))
    elif kind == "Job":
        fc.batch.create_namespaced_job(fc.namespace, obj, _request_timeout=(5, 30))
    else:  # pragma: no cover - render_attempt renders only these
        raise ValueError(f"cannot create a {kind}")


def _ignore_missing(call, *args, **kwargs) -> bool:
    """Run a delete; True if something was deleted, False if it was already gone."""
    try:
        call(*args, _request_timeout=(5, 30), **kwargs)
    except k8s.ApiException as exc:
        if is_not_found(exc):
            return False
        raise
    return True


def delete_resources(fc: FleetClient, attempt: ExecutionAttempt) -> list[str]:
    """Delete everything of the attempt; safe to repeat. Returns what was deleted."""
    names = attempt_names(attempt)
    deleted = []
    background = k8s.V1DeleteOptions(propagation_policy="Background")
    if _ignore_missing(fc.batch.delete_namespaced_job, names.job, fc.namespace, body=background):
        deleted.append(f"Job/{names.job}")
    # Background propagation leaves the pods to the garbage collector; delete them now
    # too, so a cancelled job stops holding its GPUs at once.
    try:
        fc.core.delete_collection_namespaced_pod(
            fc.namespace, label_selector=f"{LABEL_ATTEMPT}={attempt.pk}", _request_timeout=(5, 30)
        )
    except k8s.ApiException as exc:
        if not is_not_found(exc):
            raise
    if _ignore_missing(fc.core.delete_namespaced_service, names.service, fc.namespace):
        deleted.append(f"Service/{names.service}")
    if _ignore_missing(fc.core.delete_namespaced_secret, names.secret, fc.namespace):
        deleted.append(f"Secret/{names.secret}")
    return deleted


class KubernetesExecutor:
    def launch(self, attempt: ExecutionAttempt, token: str) -> dict:
        spec = attempt.job.spec
        fc = fleet_client(spec["resources"]["fleet"])
        objects = render_attempt(attempt, fc.settings, token)
        created: list[dict] = []
        try:
            for obj in objects:
                _create(fc, obj)
                created.append(obj)
        except Exception:
            # Leave nothing behind: a token Secret without a Job is a live credential.
            try:
                delete_resources(fc, attempt)
            except Exception:  # the original error is the one to report
                log.exception("cleaning up after a failed launch of %s", attempt)
            raise
        names = attempt_names(attempt)
        nodes = spec["resources"]["num_nodes"]
        record_event(
            attempt,
            "Created",
            f"created {', '.join(o['kind'] + '/' + o['metadata']['name'] for o in created)} in namespace "
            f"{fc.namespace} of fleet {fc.fleet} ({nodes} node(s) x {spec['resources']['gpus_per_node']} GPU(s))",
            involved=f"Job/{names.job}",
        )
        return {
            "fleet": fc.fleet,
            "namespace": fc.namespace,
            "job_name": names.job,
            "secret": names.secret,
            "service": names.service if nodes > 1 else None,
        }

    def cancel(self, attempt: ExecutionAttempt) -> None:
        fc = fleet_client(attempt.handle.get("fleet") or attempt.job.spec["resources"]["fleet"])
        deleted = delete_resources(fc, attempt)
        record_event(attempt, "Deleted", "deleted " + (", ".join(deleted) or "nothing (already gone)"),
                     involved=f"Job/{attempt_names(attempt).job}")
        ExecutionAttempt.objects.filter(pk=attempt.pk).update(handle={**attempt.handle, "cleaned_up": True})

    def is_alive(self, attempt: ExecutionAttempt) -> bool | None:
        try:
            fc = fleet_client(attempt.handle.get("fleet") or attempt.job.spec["resources"]["fleet"])
            job = fc.batch.read_namespaced_job(attempt_names(attempt).job, fc.namespace, _request_timeout=(5, 30))
        except k8s.ApiException as exc:
            return False if is_not_found(exc) else None
        except Exception:  # noqa: BLE001 - an unreachable API server: the executor cannot tell
            return None
        status = job.status
        return not (status and (status.succeeded or status.failed) and not status.active)
