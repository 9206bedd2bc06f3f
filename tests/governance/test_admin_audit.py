"""Governance in the admin: every change leaves an audit row (who, what, old and new), in
the same transaction; settings are validated per fleet kind; profiles carry Kubernetes
scheduling fields."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from apps.governance import services as governance
from apps.governance.fleets import FleetSettingsError, validate_fleet_settings, validate_tolerations
from apps.governance.models import (
    AllowedImageRegistry,
    Fleet,
    GovernanceAuditLog,
    GpuProfile,
    GpuQuota,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, django_user_model):
    root = django_user_model.objects.create_superuser("root", password="root-password-1")
    client.force_login(root)
    client.user = root
    return client


def test_adding_a_registry_in_the_admin_is_audited(admin_client):
    response = admin_client.post(
        "/admin/governance/allowedimageregistry/add/", {"host": "Quay.IO", "enabled": "on", "note": "acme"}
    )
    assert response.status_code == 302, response.content
    registry = AllowedImageRegistry.objects.get()
    assert registry.host == "quay.io"  # normalised
    entry = GovernanceAuditLog.objects.get(model="allowedimageregistry")
    assert (entry.actor, entry.actor_name, entry.action) == (admin_client.user, "root", "create")
    assert entry.old_value is None
    assert entry.new_value == {"enabled": True, "host": "quay.io", "note": "acme"}


def test_changing_a_registry_records_old_and_new_value(admin_client):
    registry = AllowedImageRegistry.objects.create(host="quay.io")
    response = admin_client.post(
        f"/admin/governance/allowedimageregistry/{registry.pk}/change/", {"host": "quay.io", "note": ""}
    )
    assert response.status_code == 302
    entry = GovernanceAuditLog.objects.get(action="update")
    assert (entry.old_value, entry.new_value) == ({"enabled": True}, {"enabled": False})


def test_deleting_in_bulk_audits_each_row(admin_client):
    a = AllowedImageRegistry.objects.create(host="a.example")
    b = AllowedImageRegistry.objects.create(host="b.example")
    response = admin_client.post(
        "/admin/governance/allowedimageregistry/",
        {"action": "delete_selected", "_selected_action": [a.pk, b.pk], "post": "yes"},
    )
    assert response.status_code == 302
    assert AllowedImageRegistry.objects.count() == 0
    assert sorted(GovernanceAuditLog.objects.filter(action="delete").values_list("object_repr", flat=True)) == [
        "a.example", "b.example"]


def test_the_admin_lists_the_history_and_it_cannot_be_edited(admin_client):
    governance.save_governed(admin_client.user, GpuQuota(namespace="alice", max_gpus=16))
    page = admin_client.get("/admin/governance/governanceauditlog/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "alice: 16 GPUs" in html
    assert "root" in html
    entry = GovernanceAuditLog.objects.get(model="gpuquota")
    assert admin_client.get(f"/admin/governance/governanceauditlog/{entry.pk}/delete/").status_code == 403
    assert admin_client.get("/admin/governance/governanceauditlog/add/").status_code == 403


def test_a_failed_change_leaves_no_audit_row():
    from django.db import IntegrityError

    AllowedImageRegistry.objects.create(host="quay.io")
    before = GovernanceAuditLog.objects.count()
    with pytest.raises(IntegrityError):
        governance.save_governed(None, AllowedImageRegistry(host="quay.io"))
    assert GovernanceAuditLog.objects.count() == before


def test_a_fleet_with_bad_settings_is_refused_in_the_admin(admin_client):
    response = admin_client.post(
        "/admin/governance/fleet/add/",
        {"name": "gpu2", "kind": "kubernetes", "settings": '{"namespace": "Bad_NS", "gpus_per_node": 8}',
         "enabled": "on"},
    )
    assert response.status_code == 200  # the form again, with the error
    assert "namespace must be an RFC 1123 label" in response.content.decode()
    assert not Fleet.objects.filter(name="gpu2").exists()
    assert not GovernanceAuditLog.objects.filter(model="fleet", actor__isnull=False).exists()


@pytest.mark.parametrize(
    ("kind", "raw", "message"),
    [
        ("kubernetes", {"gpus_per_node": 8}, "namespace is required"),
        ("kubernetes", {"namespace": "ns", "gpus_per_node": 8, "nodes": 2}, "unknown setting for a kubernetes fleet: nodes"),
        ("kubernetes", {"namespace": "ns", "gpus_per_node": "8"}, "gpus_per_node must be an integer from 0 to 64"),
        ("kubernetes", {"namespace": "ns", "gpus_per_node": 8, "connection": "url"}, "api_url is required"),
        ("kubernetes", {"namespace": "ns", "gpus_per_node": 8, "api_url": "http://x"}, "api_url is only used with connection: url"),
        ("slurm", {"gpus_per_node": 8}, "partition is required"),
        ("node", {"gpus_per_node": 8, "hosts": "gpu-01"}, "hosts must be a list of host names"),
        ("ray", {}, "kind must be one of kubernetes, node, slurm"),
    ],
)
def test_fleet_settings_are_checked_per_kind(kind, raw, message):
    with pytest.raises(FleetSettingsError, match=message):
        validate_fleet_settings(kind, raw)


def test_kubernetes_fleet_defaults_are_filled_in():
    clean = validate_fleet_settings("kubernetes", {"namespace": "jobs", "gpus_per_node": 8})
    assert clean == {
        "namespace": "jobs", "gpus_per_node": 8, "max_nodes": 1, "connection": "in-cluster", "verify_ssl": True,
        "output_claim": "tuneplane-outputs", "service_account": "tuneplane-job", "runtime_image": "",
        "ttl_seconds_after_finished": 3600, "image_pull_secrets": [],
    }


def test_profile_tolerations_and_node_selector_are_validated():
    profile = GpuProfile(name="x", gpus_per_node=8, fleet=Fleet.objects.get(name="gpu"),
                         node_selector={"bad key!": "v"}, tolerations=[{"key": "a", "operator": "Maybe"}])
    with pytest.raises(ValidationError) as caught:
        profile.full_clean()
    assert set(caught.value.message_dict) == {"node_selector", "tolerations"}
    with pytest.raises(FleetSettingsError, match="takes no value"):
        validate_tolerations([{"key": "nvidia.com/gpu", "operator": "Exists", "value": "x"}])


def test_the_fixture_fleets_and_profiles_are_loaded():
    h200 = GpuProfile.objects.select_related("fleet").get(name="h200:16")
    assert (h200.fleet.name, h200.fleet.kind, h200.num_nodes, h200.gpus_per_node) == ("gpu", "kubernetes", 2, 8)
    assert h200.tolerations == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert GpuProfile.objects.get(name="cpu").fleet.kind == "node"
    # Loading again overwrites nothing an administrator changed.
    GpuProfile.objects.filter(name="cpu").update(description="edited")
    assert governance.load_default_profiles() == 0
    assert GpuProfile.objects.get(name="cpu").description == "edited"
