"""The GPU watchdog (spec: "Occupying more GPUs than that gets the job warned and can get
it stopped"). Quota is charged for what was allocated, TUNEPLANE_CLUSTER_GPUS_PER_NODE;
a trainer that reaches past it (a container runtime that exposes every GPU of the node,
a launcher started with more processes than GPUs) takes GPUs somebody else was promised.

The runner samples nvidia-smi on every node and posts what it sees (gpu-usage ingest
route); this module decides: the first observation over the allocation records a
warning on the job's Events tab, and a job still over it after
TUNEPLANE_GPU_WATCHDOG_GRACE_SECONDS is stopped and fails with the reason.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from .. import services
from ..choices import AttemptState
from ..models import ExecutionAttempt
from .models import GpuUsageObservation

WARNING_REASON = "GPUOveruse"
STOP_REASON = "GPUWatchdogStopped"
# Only recent samples count: a runner that stopped sampling says nothing about now.
FRESH_SECONDS = 120


def record_usage(attempt: ExecutionAttempt, node_rank: int, gpus_in_use: int, gpus_visible: int) -> None:
    GpuUsageObservation.objects.create(
        attempt=attempt, node_rank=node_rank, gpus_in_use=gpus_in_use, gpus_visible=gpus_visible,
        observed_at=timezone.now(),
    )


def _over(attempt: ExecutionAttempt) -> tuple[int, int] | None:
    """(worst GPUs in use on one node, allocated per node) when over the allocation."""
    allocated = int(attempt.job.spec["resources"]["gpus_per_node"])
    since = timezone.now() - timedelta(seconds=FRESH_SECONDS)
    latest = (
        GpuUsageObservation.objects.filter(attempt=attempt, observed_at__gte=since)
        .values("node_rank")
        .annotate(last=Max("observed_at"))
    )
    worst = 0
    for row in latest:
        sample = GpuUsageObservation.objects.filter(
            attempt=attempt, node_rank=row["node_rank"], observed_at=row["last"]
        ).first()
        if sample is not None:
            worst = max(worst, sample.gpus_in_use)
    return (worst, allocated) if worst > allocated else None


def check_attempt(attempt_id: int) -> str:
    """One watchdog pass over an attempt: "ok", "warned", "waiting" or "stopped"."""
    from ..executors import get_executor
    from ..executors.kubernetes import record_event

    attempt = ExecutionAttempt.objects.select_related("job").get(pk=attempt_id)
    if attempt.state not in (AttemptState.LAUNCHING, AttemptState.RUNNING):
        return "ok"
    over = _over(attempt)
    if over is None:
        return "ok"
    used, allocated = over
    grace = settings.TUNEPLANE_GPU_WATCHDOG_GRACE_SECONDS
    warning = attempt.cluster_events.filter(reason=WARNING_REASON).order_by("first_seen").first()
    if warning is None:
        record_event(
            attempt,
            WARNING_REASON,
            f"the job uses {used} GPUs on a node but was allocated {allocated} per node "
            f"(TUNEPLANE_CLUSTER_GPUS_PER_NODE): pass that number to torchrun --nproc_per_node or "
            f"accelerate launch --num_processes. It will be stopped if it still uses more in {grace} s",
            warning=True,
        )
        return "warned"
    if timezone.now() - warning.first_seen < timedelta(seconds=grace):
        return "waiting"
    reason = (
        f"stopped by the GPU watchdog: used {used} GPUs on a node, allocated {allocated} per node, "
        f"for more than {grace} s after the warning"
    )
    with transaction.atomic():
        services.fail_attempt(attempt.pk, reason)
        # The runner learns it through its next log batch and stops train.sh gracefully;
        # deleting the pods below stops it for sure.
        type(attempt.job).objects.filter(pk=attempt.job_id).update(cancel_requested=True)
        record_event(attempt, STOP_REASON, reason, warning=True)
    get_executor(attempt.executor).cancel(attempt)
    return "stopped"


def attempts_to_watch():
    return (
        ExecutionAttempt.objects.filter(state__in=[AttemptState.LAUNCHING, AttemptState.RUNNING])
        .filter(gpu_usage__observed_at__gte=timezone.now() - timedelta(seconds=FRESH_SECONDS))
        .distinct()
        .values_list("pk", flat=True)
    )
