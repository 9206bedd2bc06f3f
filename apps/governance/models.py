"""What administrators govern: which registries images may come from, where jobs run
(fleets and the GPU profiles on them), which sandbox providers exist, and how many GPUs
each namespace may hold at once. Every change is recorded in GovernanceAuditLog in the
same transaction (services.record_change), like Zulip's RealmAuditLog."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from .choices import AuditAction, FleetKind, SandboxKind


class AllowedImageRegistry(models.Model):
    """A registry host `--image` may name (spec: "Ask an administrator to add your
    registry hostname"). Matching is on the exact host, port included."""

    host = models.CharField(
        max_length=253,
        unique=True,
        help_text="Registry hostname as it appears in an image reference, e.g. registry.example.com "
        "or localhost:5000. Lower case; no scheme, no path.",
    )
    enabled = models.BooleanField(default=True, help_text="Untick to refuse new submissions from it.")
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["host"]
        verbose_name = "allowed image registry"
        verbose_name_plural = "allowed image registries"

    def __str__(self) -> str:
        return self.host

    def clean(self) -> None:
        from .services import normalise_registry_host

        self.host = normalise_registry_host(self.host)


class RegistrySeed(models.Model):
    """A host TUNEPLANE_ALLOWED_IMAGE_REGISTRIES has already seeded. Remembered so that
    an administrator who removes a seeded host in the admin is not overruled by the
    setting at the next start or submission."""

    host = models.CharField(max_length=253, unique=True)
    seeded_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.host


class Fleet(models.Model):
    """Where jobs run. `settings` is checked per kind (fleets.validate_fleet_settings)."""

    name = models.SlugField(max_length=64, unique=True)
    kind = models.CharField(max_length=16, choices=FleetKind.choices)
    settings = models.JSONField(
        default=dict,
        blank=True,
        help_text="Per kind. kubernetes: namespace, gpus_per_node, max_nodes, connection "
        "(in-cluster | kubeconfig | url), output_claim, ... node: gpus_per_node, max_nodes. "
        "slurm: partition, gpus_per_node, max_nodes.",
    )
    description = models.CharField(max_length=200, blank=True)
    enabled = models.BooleanField(default=True, help_text="A drained fleet admits no new job.")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    def clean(self) -> None:
        from .fleets import FleetSettingsError, validate_fleet_settings

        try:
            self.settings = validate_fleet_settings(self.kind, self.settings)
        except FleetSettingsError as exc:
            raise ValidationError({"settings": str(exc)}) from None


class GpuProfile(models.Model):
    """What `--profile` names: `h200:8` = 8 H200 GPUs on each of `num_nodes` nodes."""

    name = models.CharField(max_length=64, unique=True)
    gpu_type = models.CharField(max_length=64, blank=True)
    gpus_per_node = models.PositiveIntegerField(default=0)
    num_nodes = models.PositiveIntegerField(default=1)
    fleet = models.ForeignKey(Fleet, on_delete=models.PROTECT, related_name="profiles")
    node_selector = models.JSONField(
        default=dict, blank=True, help_text='Kubernetes nodeSelector, e.g. {"nvidia.com/gpu.product": "H200"}'
    )
    tolerations = models.JSONField(
        default=list,
        blank=True,
        help_text='Kubernetes tolerations, e.g. [{"key": "nvidia.com/gpu", "operator": "Exists", '
        '"effect": "NoSchedule"}]',
    )
    description = models.CharField(max_length=200, blank=True)
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def total_gpus(self) -> int:
        return self.gpus_per_node * self.num_nodes

    def clean(self) -> None:
        from .fleets import FleetSettingsError, validate_node_selector, validate_tolerations

        problems = {}
        try:
            self.node_selector = validate_node_selector(self.node_selector)
        except FleetSettingsError as exc:
            problems["node_selector"] = str(exc)
        try:
            self.tolerations = validate_tolerations(self.tolerations)
        except FleetSettingsError as exc:
            problems["tolerations"] = str(exc)
        if self.num_nodes < 1:
            problems["num_nodes"] = "a profile has at least one node"
        if problems:
            raise ValidationError(problems)


class SandboxProvider(models.Model):
    """Runs model-generated code for environments with `sandbox.required` (spec,
    agent-environments: refused when none is configured; never the training container)."""

    name = models.SlugField(max_length=64, unique=True)
    kind = models.CharField(max_length=16, choices=SandboxKind.choices)
    endpoint = models.URLField(blank=True, help_text="The provider's API, when it has one.")
    settings = models.JSONField(default=dict, blank=True)
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


class GpuQuota(models.Model):
    """At most `max_gpus` GPUs held at once by the unfinished jobs of a namespace (a
    user's namespace is their username). `*` is the default for namespaces without a row
    of their own; a blank gpu_type counts every GPU type."""

    DEFAULT_NAMESPACE = "*"

    namespace = models.CharField(max_length=150, help_text="A username, or * for every other namespace.")
    gpu_type = models.CharField(max_length=64, blank=True, help_text="Blank: all GPU types together.")
    max_gpus = models.PositiveIntegerField()

    class Meta:
        ordering = ["namespace", "gpu_type"]
        constraints = [models.UniqueConstraint(fields=["namespace", "gpu_type"], name="gpu_quota_unique")]
        verbose_name = "GPU quota"

    def __str__(self) -> str:
        return f"{self.namespace}: {self.max_gpus} {self.gpu_type or 'GPUs'}".strip()


class GovernanceAuditLog(models.Model):
    """Who changed what governance object, when, from which value to which."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True, help_text="Kept if the user is deleted.")
    action = models.CharField(max_length=16, choices=AuditAction.choices)
    model = models.CharField(max_length=64)
    object_id = models.CharField(max_length=64)
    object_repr = models.CharField(max_length=200)
    old_value = models.JSONField(null=True, blank=True)
    new_value = models.JSONField(null=True, blank=True)
    reason = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["model", "object_id"])]
        verbose_name = "governance audit log entry"
        verbose_name_plural = "governance audit log"

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor_name or 'system'} {self.action} {self.object_repr}"
