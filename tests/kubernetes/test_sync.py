"""State sync through every pod phase, the failures a runner cannot report, pod events
for the Events tab, cancel and cleanup: the real client against the API stub."""

from __future__ import annotations

import pytest

from apps.jobs import services
from apps.jobs.choices import AttemptState, JobState
from apps.jobs.k8s import sync
from apps.jobs.k8s.manifests import attempt_names
from apps.jobs.k8s.models import ClusterEvent
from apps.jobs.k8s.tasks import sync_kubernetes_attempts
from apps.jobs.tasks import cancel_attempt_task

from . import k8s_api_stub as pods
from .conftest import NAMESPACE

pytestmark = pytest.mark.django_db


@pytest.fixture
def launched(admit, dispatch, k8s_stub):
    """A dispatched h200:8 job and its attempt; returns (job, attempt, job name)."""
    job = admit(profile="h200:8")
    attempt = dispatch(job)
    return job, attempt, attempt_names(attempt).job


def refreshed(job, attempt):
    job.refresh_from_db()
    attempt.refresh_from_db()
    return job.state, attempt.state


def assert_cleaned_up(k8s_stub, attempt) -> None:
    names = attempt_names(attempt)
    assert k8s_stub.get("Job", NAMESPACE, names.job) is None
    assert k8s_stub.get("Secret", NAMESPACE, names.secret) is None
    assert [k for k in k8s_stub.objects if k[0] == "Pod"] == []
    attempt.refresh_from_db()
    assert attempt.handle["cleaned_up"] is True


def test_it_follows_pending_running_succeeded_and_then_cleans_up(launched, k8s_stub):
    job, attempt, name = launched

    k8s_stub.set_pods(NAMESPACE, name, [pods.pod_pending()])
    assert sync.sync_attempt(attempt.pk).phase == sync.PENDING
    assert refreshed(job, attempt) == (JobState.QUEUED, AttemptState.LAUNCHING)

    k8s_stub.set_pods(NAMESPACE, name, [pods.pod_running()])
    assert sync.sync_attempt(attempt.pk).phase == sync.RUNNING
    assert refreshed(job, attempt) == (JobState.RUNNING, AttemptState.RUNNING)
    assert k8s_stub.get("Secret", NAMESPACE, attempt_names(attempt).secret) is not None  # still needed

    k8s_stub.set_pods(NAMESPACE, name, [pods.pod_succeeded()])
    k8s_stub.set_job_status(NAMESPACE, name, {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]})
    assert sync.sync_attempt(attempt.pk).phase == sync.SUCCEEDED
    assert refreshed(job, attempt) == (JobState.SUCCEEDED, AttemptState.SUCCEEDED)
    assert job.exit_code == 0
    assert_cleaned_up(k8s_stub, attempt)
    assert attempt.cluster_events.filter(reason="Deleted").exists()


def test_the_runners_own_report_wins_and_the_sync_only_cleans_up(launched, k8s_stub):
    job, attempt, name = launched
    services.record_started(attempt, 42)
    services.record_exited(attempt, 3)  # train.sh exited 3, reported by the runner
    k8s_stub.set_pods(NAMESPACE, name, [{"phase": "Failed", "containerStatuses": [
        {"name": "trainer", "image": "x", "imageID": "", "ready": False, "restartCount": 0,
         "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}]}])

    sync_kubernetes_attempts()

    assert refreshed(job, attempt) == (JobState.FAILED, AttemptState.FAILED)
    assert job.exit_code == 3
    assert job.failure_reason == "train.sh exited with code 3"
    assert_cleaned_up(k8s_stub, attempt)


def test_an_image_pull_error_fails_the_job_naming_the_image(launched, k8s_stub):
    job, attempt, name = launched
    (pod,) = k8s_stub.set_pods(NAMESPACE, name, [pods.pod_image_pull_error()])
    k8s_stub.add_event(NAMESPACE, pod, "Failed", 'Failed to pull image "registry.example.com/trainer:v1": not found',
                       type_="Warning", count=3)

    seen = sync.sync_attempt(attempt.pk)

    assert seen.phase == sync.FAILED
    assert refreshed(job, attempt) == (JobState.FAILED, AttemptState.FAILED)
    assert job.failure_reason.startswith(f"pod {pod['metadata']['name']} cannot pull image "
                                         "registry.example.com/trainer:v1: ImagePullBackOff")
    assert "check --image" in job.failure_reason
    event = ClusterEvent.objects.get(reason="Failed")
    assert (event.type, event.count, event.source) == ("Warning", 3, "kubelet")
    assert event.involved_object == f"Pod/{pod['metadata']['name']}"
    assert_cleaned_up(k8s_stub, attempt)


def test_an_oom_killed_trainer_fails_the_job_saying_so(launched, k8s_stub):
    job, attempt, name = launched
    services.record_started(attempt, 42)
    k8s_stub.set_pods(NAMESPACE, name, [pods.pod_oom_killed()])

    sync.sync_attempt(attempt.pk)

    assert refreshed(job, attempt) == (JobState.FAILED, AttemptState.FAILED)
    assert "the trainer was OOMKilled (exit code 137)" in job.failure_reason


def test_a_lost_node_fails_the_job_saying_so(launched, k8s_stub):
    job, attempt, name = launched
    services.record_started(attempt, 42)
    k8s_stub.set_pods(NAMESPACE, name, [pods.pod_node_lost()])

    sync.sync_attempt(attempt.pk)

    assert refreshed(job, attempt) == (JobState.FAILED, AttemptState.FAILED)
    assert "was lost with gpu-node-0" in job.failure_reason
    assert "unresponsive" in job.failure_reason


def test_one_failed_node_of_two_fails_the_job(admit, dispatch, k8s_stub):
    job = admit(profile="h200:16")
    attempt = dispatch(job)
    name = attempt_names(attempt).job
    k8s_stub.set_pods(NAMESPACE, name, [pods.pod_running(), pods.pod_oom_killed()])

    sync.sync_attempt(attempt.pk)

    assert refreshed(job, attempt) == (JobState.FAILED, AttemptState.FAILED)
    assert "-1-" in job.failure_reason.split()[1]  # the pod of node 1
    assert k8s_stub.get("Service", NAMESPACE, name) is None  # the rendezvous service went too


def test_a_job_deleted_outside_tuneplane_is_lost(launched, k8s_stub):
    job, attempt, name = launched
    del k8s_stub.objects[("Job", NAMESPACE, name)]

    sync.sync_attempt(attempt.pk)

    assert refreshed(job, attempt) == (JobState.FAILED, AttemptState.LOST)
    assert "no longer exists" in job.failure_reason


def test_events_are_copied_once_and_updated(launched, k8s_stub, alice_api):
    job, attempt, name = launched
    (pod,) = k8s_stub.set_pods(NAMESPACE, name, [pods.pod_pending()])
    uid = k8s_stub.add_event(NAMESPACE, pod, "FailedScheduling", "0/4 nodes are available: 4 Insufficient nvidia.com/gpu",
                             type_="Warning")
    sync.sync_attempt(attempt.pk)
    k8s_stub.objects[("Event", NAMESPACE, uid)]["count"] = 5
    sync.sync_attempt(attempt.pk)

    response = alice_api.get(f"/api/v1/jobs/{job.public_id}/cluster-events")
    assert response.status_code == 200
    reasons = [(e["reason"], e["count"]) for e in response.json()["results"]]
    # The API server's timestamps have second resolution, ours microseconds: compare as a set.
    assert sorted(reasons) == [("Created", 1), ("FailedScheduling", 5)]
    assert ClusterEvent.objects.filter(reason="FailedScheduling").count() == 1


def test_events_are_not_shown_to_another_user(launched, bob_api):
    job, _, _ = launched
    assert bob_api.get(f"/api/v1/jobs/{job.public_id}/cluster-events").status_code == 404


def test_cancel_deletes_the_job_its_pods_and_the_token_secret(launched, k8s_stub, alice_api,
                                                              django_capture_on_commit_callbacks):
    job, attempt, name = launched
    k8s_stub.set_pods(NAMESPACE, name, [pods.pod_running()])
    sync.sync_attempt(attempt.pk)

    with django_capture_on_commit_callbacks() as callbacks:
        response = alice_api.post(f"/api/v1/jobs/{job.public_id}/cancel")
    assert response.json()["state"] == "cancelled"
    assert len(callbacks) == 1
    cancel_attempt_task(attempt.pk)  # what the worker runs for that callback

    assert refreshed(job, attempt) == (JobState.CANCELLED, AttemptState.CANCELLED)
    names = attempt_names(attempt)
    assert k8s_stub.deleted("Job") == [names.job]
    assert k8s_stub.deleted("Secret") == [names.secret]
    delete_job = next(c for c in k8s_stub.calls if c.method == "DELETE" and c.path.endswith(f"/jobs/{names.job}"))
    assert delete_job.body["propagationPolicy"] == "Background"
    assert any(c.method == "DELETE" and c.path.endswith("/pods") and
               c.query["labelSelector"] == [f"tuneplane.dev/attempt={attempt.pk}"] for c in k8s_stub.calls)
    assert_cleaned_up(k8s_stub, attempt)
    # Nothing is left to sync, and a second cancel is harmless.
    calls = len(k8s_stub.calls)
    assert sync_kubernetes_attempts() == 0
    assert len(k8s_stub.calls) == calls
    cancel_attempt_task(attempt.pk)
