"""The GPU watchdog: usage posted by the runner over the ingest route, a warning on the
Events tab first, then the job stopped if it stays over its allocation."""

from __future__ import annotations

import os
import stat
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from tuneplane.runner.gpuwatch import sample_gpus

from apps.jobs import services
from apps.jobs.choices import AttemptState, JobState
from apps.jobs.k8s.manifests import attempt_names
from apps.jobs.k8s.models import ClusterEvent, GpuUsageObservation
from apps.jobs.k8s.tasks import gpu_watchdog
from apps.jobs.k8s.watchdog import STOP_REASON, WARNING_REASON
from tests.conftest import api_client

from .conftest import NAMESPACE

pytestmark = pytest.mark.django_db


@pytest.fixture
def running(admit, dispatch, k8s_stub):
    job = admit(profile="h200:8")
    attempt = dispatch(job)
    services.record_started(attempt, 42)
    (secret,) = k8s_stub.created("Secret")
    return job, attempt, secret["stringData"]["token"]


def post_usage(job, token: str, in_use: int, node_rank: int = 0):
    return api_client(secret=token).post(
        f"/api/ingest/v1/runs/{job.public_id}/gpu-usage",
        {"node_rank": node_rank, "gpus_in_use": in_use, "gpus_visible": 16},
        format="json",
    )


def test_usage_within_the_allocation_is_left_alone(running):
    job, _, token = running
    assert post_usage(job, token, 8).json() == {"ok": True}
    assert gpu_watchdog() == {"ok": 1}
    assert not ClusterEvent.objects.filter(reason=WARNING_REASON).exists()


def test_it_warns_first_then_waits_out_the_grace(running, k8s_stub, settings):
    settings.TUNEPLANE_GPU_WATCHDOG_GRACE_SECONDS = 300
    job, attempt, token = running
    post_usage(job, token, 12)

    assert gpu_watchdog() == {"warned": 1}
    warning = ClusterEvent.objects.get(reason=WARNING_REASON)
    assert warning.type == "Warning"
    assert "uses 12 GPUs on a node but was allocated 8 per node" in warning.message
    assert gpu_watchdog() == {"waiting": 1}
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    assert k8s_stub.get("Job", NAMESPACE, attempt_names(attempt).job) is not None


def test_it_stops_a_job_still_over_after_the_grace(running, k8s_stub, settings):
    settings.TUNEPLANE_GPU_WATCHDOG_GRACE_SECONDS = 60
    job, attempt, token = running
    post_usage(job, token, 16, node_rank=0)
    assert gpu_watchdog() == {"warned": 1}
    ClusterEvent.objects.filter(reason=WARNING_REASON).update(first_seen=timezone.now() - timedelta(seconds=61))
    post_usage(job, token, 16)

    assert gpu_watchdog() == {"stopped": 1}

    job.refresh_from_db()
    attempt.refresh_from_db()
    assert job.state == JobState.FAILED
    assert attempt.state == AttemptState.FAILED
    assert job.failure_reason == (
        "stopped by the GPU watchdog: used 16 GPUs on a node, allocated 8 per node, for more than 60 s after the warning"
    )
    assert job.cancel_requested is True
    assert ClusterEvent.objects.filter(reason=STOP_REASON).count() == 1
    assert k8s_stub.get("Job", NAMESPACE, attempt_names(attempt).job) is None
    assert k8s_stub.get("Secret", NAMESPACE, attempt_names(attempt).secret) is None


def test_a_usage_report_needs_the_attempts_ingest_token(running, alice_api):
    job, _, _ = running
    response = alice_api.post(f"/api/ingest/v1/runs/{job.public_id}/gpu-usage", {"gpus_in_use": 99}, format="json")
    assert response.status_code == 401
    assert GpuUsageObservation.objects.count() == 0


def test_a_malformed_usage_report_is_refused_and_stores_nothing(running):
    job, _, token = running
    response = api_client(secret=token).post(
        f"/api/ingest/v1/runs/{job.public_id}/gpu-usage", {"gpus_in_use": "lots"}, format="json"
    )
    assert response.status_code == 400
    assert response.json() == {"detail": "gpus_in_use must be an integer from 0 to 1024", "field": "gpus_in_use"}
    assert GpuUsageObservation.objects.count() == 0


def test_the_runner_counts_gpus_with_a_compute_process(tmp_path: Path):
    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        '  --query-gpu=uuid) for i in 0 1 2 3 4 5 6 7 8 9; do echo "GPU-$i"; done ;;\n'
        '  --query-compute-apps=gpu_uuid) printf "GPU-0\\nGPU-0\\nGPU-3\\nGPU-9\\n" ;;\n'
        "  *) exit 2 ;;\n"
        "esac\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    assert sample_gpus(str(fake)) == (3, 10)
    assert sample_gpus(os.devnull) is None
