"""Every admission gate's refusal, word for word, with nothing stored; and that the gates
run on every submission, whatever an earlier validate said."""

from __future__ import annotations

import pytest
from tuneplane.contracts import errors

from apps.governance import services as governance
from apps.governance.models import (
    AllowedImageRegistry,
    Fleet,
    GpuProfile,
    GpuQuota,
    SandboxProvider,
)
from apps.jobs.models import Job, JobPackage

pytestmark = pytest.mark.django_db


def assert_refused(response, detail: str, field: str, status: int = 400) -> None:
    assert response.status_code == status, response.content
    assert response.json() == {"detail": detail, "field": field}
    assert Job.objects.count() == 0
    assert JobPackage.objects.count() == 0


@pytest.fixture
def k8s_executor(settings):
    settings.TUNEPLANE_EXECUTOR = "kubernetes"


# Registry allowlist ---------------------------------------------------------------------


def test_the_setting_seeds_the_allowlist_once(settings):
    settings.TUNEPLANE_ALLOWED_IMAGE_REGISTRIES = "registry.example.com, ghcr.io"
    assert governance.allowed_registries() == ["ghcr.io", "registry.example.com"]
    entry = governance.GovernanceAuditLog.objects.get(object_repr="ghcr.io")
    assert (entry.action, entry.actor, entry.reason) == ("seed", None, governance.SEED_REASON)
    # An administrator removes a seeded host: the setting does not bring it back.
    governance.delete_governed(None, AllowedImageRegistry.objects.get(host="ghcr.io"))
    assert governance.allowed_registries() == ["registry.example.com"]


def test_it_refuses_a_registry_not_in_the_allowlist(alice_api, submit):
    response = submit(alice_api, image="quay.io/acme/trainer:v1")
    assert_refused(
        response, errors.IMAGE_REGISTRY_NOT_ALLOWED.format(host="quay.io", allowed="registry.example.com"), "image"
    )


def test_a_disabled_registry_is_refused_like_an_absent_one(alice_api, submit, settings):
    governance.allowed_registries()  # seed
    AllowedImageRegistry.objects.create(host="quay.io", enabled=False)
    response = submit(alice_api, image="quay.io/acme/trainer:v1")
    assert_refused(
        response, errors.IMAGE_REGISTRY_NOT_ALLOWED.format(host="quay.io", allowed="registry.example.com"), "image"
    )


def test_an_empty_allowlist_refuses_custom_images_but_not_catalogue_pins(alice_api, submit, settings, django_capture_on_commit_callbacks):
    settings.TUNEPLANE_ALLOWED_IMAGE_REGISTRIES = ""
    assert_refused(submit(alice_api), errors.IMAGE_REGISTRIES_EMPTY, "image")

    response = submit(alice_api, recipe="pytorch/image-classification", image="", observability_url="",
                      package=_train_py_package())
    assert response.status_code == 201, response.content
    assert response.json()["spec"]["runtime"]["source"] == "catalogue"


def test_a_tag_gets_a_warning_and_a_digest_does_not(alice_api, submit):
    tagged = submit(alice_api, path="/api/v1/jobs/validate")
    assert tagged.json()["warnings"] == [
        "image registry.example.com/trainer:v1 is a tag, not pinned by digest: pin @sha256:… in production"
    ]
    pinned = submit(alice_api, path="/api/v1/jobs/validate", image="registry.example.com/trainer@sha256:" + "a" * 64)
    assert pinned.json()["warnings"] == []
    assert pinned.json()["spec"]["runtime"]["pinned"] is True


def test_a_validate_does_not_stand_in_for_the_gates_at_submit(alice_api, submit):
    assert submit(alice_api, path="/api/v1/jobs/validate").status_code == 200
    AllowedImageRegistry.objects.filter(host="registry.example.com").update(enabled=False)
    response = submit(alice_api)
    assert_refused(response, errors.IMAGE_REGISTRIES_EMPTY, "image")


# Profile and fleet fit -------------------------------------------------------------------


def test_a_profile_on_a_fleet_the_executor_cannot_reach_is_refused(alice_api, submit):
    # The embedded default's executor is local: the kubernetes fleet's profiles do not fit.
    response = submit(alice_api, profile="h200:8")
    assert_refused(
        response,
        "profile h200:8 runs on the kubernetes fleet 'gpu', and this deployment's executor is local; "
        "choose a profile it can dispatch: cpu",
        "profile",
    )


def test_a_drained_fleet_admits_no_new_job(alice_api, submit, k8s_executor):
    Fleet.objects.filter(name="gpu").update(enabled=False)
    response = submit(alice_api, profile="h200:8")
    assert_refused(
        response,
        "fleet 'gpu' of profile h200:8 is drained and admits no new job; choose a profile on another fleet "
        "or ask an administrator to enable it",
        "profile",
    )


def test_a_profile_bigger_than_its_fleet_is_refused(alice_api, submit, k8s_executor):
    GpuProfile.objects.create(name="h200:64", gpu_type="h200", gpus_per_node=8, num_nodes=8,
                              fleet=Fleet.objects.get(name="gpu"))
    response = submit(alice_api, profile="h200:64")
    assert_refused(
        response,
        "profile h200:64 needs 8 node(s) x 8 GPU(s), and fleet 'gpu' has at most 4 node(s) x 8 GPU(s); "
        "choose a smaller profile or ask an administrator to fix the profile's fleet",
        "profile",
    )


def test_an_unknown_profile_names_the_available_ones(alice_api, submit):
    response = submit(alice_api, profile="a100:64")
    assert_refused(response, "profile 'a100:64' does not exist; available: cpu, cpu:k8s, h200:16, h200:8", "profile")


# Quota ----------------------------------------------------------------------------------


def test_quota_counts_the_namespaces_unfinished_jobs(alice_api, submit, k8s_executor):
    GpuQuota.objects.create(namespace="alice", gpu_type="h200", max_gpus=16)
    assert submit(alice_api, profile="h200:8").status_code == 201
    assert submit(alice_api, profile="h200:8").status_code == 201
    response = submit(alice_api, profile="h200:8")
    assert response.status_code == 400
    assert response.json() == {
        "detail": "GPU quota exceeded: namespace 'alice' may hold 16 h200 GPUs at once, 16 are held by its "
        "unfinished jobs and profile h200:8 asks for 8; wait for a job to finish, cancel one, choose a smaller "
        "profile, or ask an administrator to raise the quota",
        "field": "profile",
    }
    assert Job.objects.count() == 2
    # A finished job gives its GPUs back.
    Job.objects.filter(pk=Job.objects.first().pk).update(state="succeeded")
    assert submit(alice_api, profile="h200:8").status_code == 201


def test_the_default_quota_binds_namespaces_without_their_own(alice_api, bob_api, submit, k8s_executor):
    GpuQuota.objects.create(namespace="*", max_gpus=8)
    GpuQuota.objects.create(namespace="bob", max_gpus=32)
    assert submit(alice_api, profile="h200:16").json()["detail"].startswith(
        "GPU quota exceeded: namespace 'alice' may hold 8 GPUs at once, 0 are held"
    )
    assert submit(bob_api, profile="h200:16").status_code == 201


def test_quota_is_checked_at_validate_too(alice_api, submit, k8s_executor):
    GpuQuota.objects.create(namespace="alice", max_gpus=4)
    response = submit(alice_api, path="/api/v1/jobs/validate", profile="h200:8")
    assert response.status_code == 400
    assert response.json()["field"] == "profile"


def test_a_cpu_job_is_never_held_by_a_gpu_quota(alice_api, submit):
    GpuQuota.objects.create(namespace="alice", max_gpus=0)
    assert submit(alice_api, profile="cpu").status_code == 201


# Environment split and digest, sandbox provider ------------------------------------------


def _spec(**environment) -> dict:
    return {"operation": "train", "environment": {"ref": "alice/calc@1", "digest": "sha256:" + "c" * 64,
                                                  "deployment": "local", "split": "train", "splits": ["train"],
                                                  "sandbox_required": False, **environment}}


def _refusal(spec: dict, profile_name: str = "cpu") -> str:
    from apps.accounts.errors import DomainError
    from apps.jobs.admission import check_environment

    with pytest.raises(DomainError) as caught:
        check_environment(spec, GpuProfile.objects.select_related("fleet").get(name=profile_name))
    return caught.value.message


def test_an_evaluation_of_an_environment_without_eval_tasks_is_refused():
    spec = _spec(split="eval", splits=["train"])
    spec["operation"] = "eval"
    assert _refusal(spec) == (
        "alice/calc@1 declares no eval split (it has: train); an eval job is refused rather than served other "
        "tasks: push a version with eval tasks"
    )


def test_a_split_that_does_not_follow_the_operation_is_refused():
    assert _refusal(_spec(split="eval", splits=["train", "eval"])) == (
        "a train job reads the train split of alice/calc@1, not 'eval': the split follows the operation; do not set it"
    )


def test_an_environment_not_pinned_by_digest_is_refused():
    assert _refusal(_spec(digest="latest")) == (
        "alice/calc@1 is not pinned by a sha256 digest (got 'latest'); reference an immutable pushed version"
    )


def test_a_container_environment_needs_a_kubernetes_fleet():
    assert _refusal(_spec(deployment="container")) == (
        "alice/calc@1 is deployed as a container, which needs a kubernetes fleet; profile cpu runs on the node "
        "fleet 'local': choose a profile on a kubernetes fleet"
    )


def test_a_required_sandbox_without_a_provider_is_refused():
    assert _refusal(_spec(sandbox_required=True)) == governance.SANDBOX_REQUIRED_NONE


def test_a_required_sandbox_gets_the_enabled_provider():
    from apps.jobs.admission import check_environment

    SandboxProvider.objects.create(name="off", kind="docker", enabled=False)
    SandboxProvider.objects.create(name="e2b", kind="e2b", endpoint="https://api.e2b.example")
    spec = _spec(sandbox_required=True)
    check_environment(spec, GpuProfile.objects.select_related("fleet").get(name="cpu"))
    assert spec["environment"]["sandbox_provider"] == "e2b"


def test_a_named_sandbox_provider_must_exist():
    assert _refusal(_spec(sandbox_provider="gvisor")) == (
        "sandbox provider 'gvisor' does not exist or is disabled; available: none"
    )


def _train_py_package() -> bytes:
    from tests.conftest import build_package

    return build_package({"experiments/exp/train.py": "print('train')\n"})
