"""Agent environments, their immutable versions, runners and harness plugins.

Task content is never in the database: a version's files live in object storage
(default_storage) and the rows hold only paths, sizes, digests and per-split counts.
Only the ingest route of a running job's attempt reads tasks.jsonl back (see
apps.environments.ingest), so nothing else can hand a taskset out.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.urls import reverse

from .choices import Deployment, Protocol, VerifierKind


class ImmutableError(Exception):
    """Raised when code tries to change a row the spec says never changes."""


class OwnedName:
    """`<owner>/<name>`, how users and the CLI refer to environments and plugins."""

    owner: Any
    name: str

    def __str__(self) -> str:
        return self.ref

    @property
    def ref(self) -> str:
        return f"{self.owner.get_username()}/{self.name}"


class ImmutableModel(models.Model):
    """Rows written once. `save()` on an existing row and `delete()` are refused here, the
    admin is read-only, and the API has no route that changes them."""

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise ImmutableError(f"{type(self).__name__} {self} is immutable")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ImmutableError(f"{type(self).__name__} {self} is immutable")


class Environment(OwnedName, models.Model):
    """`<owner>/<name>`: the thing versions are published under."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="environments"
    )
    name = models.CharField(max_length=63)
    public = models.BooleanField(
        default=False, help_text="Set when first created (tp env push --public)"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["owner__username", "name"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="environment_owner_name_unique")
        ]


class EnvironmentVersion(ImmutableModel):
    """`<owner>/<name>@<version>`: one push, never changed afterwards."""

    environment = models.ForeignKey(Environment, on_delete=models.PROTECT, related_name="versions")
    version = models.CharField(max_length=64)
    manifest = models.JSONField(help_text="manifest.json as parsed, defaults filled in")
    protocol = models.CharField(max_length=16, choices=Protocol.choices)
    deployment = models.CharField(max_length=16, choices=Deployment.choices)
    verifier_kind = models.CharField(max_length=16, choices=VerifierKind.choices)
    verifier_ref = models.CharField(max_length=512)
    sandbox_required = models.BooleanField(default=False)
    description = models.TextField(blank=True)
    # Counts only, never content: {"train": 3, "eval": 2}; empty without tasks.jsonl.
    task_counts = models.JSONField(default=dict, blank=True)
    digest = models.CharField(
        max_length=80, help_text="sha256 over the bundle's (path, sha256) pairs"
    )
    size = models.BigIntegerField(default=0)
    pushed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["environment", "-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["environment", "version"], name="environment_version_unique"
            )
        ]
        indexes = [models.Index(fields=["protocol", "deployment"])]

    def __str__(self) -> str:
        return f"{self.environment.ref}@{self.version}"

    @property
    def ref(self) -> str:
        return str(self)

    @property
    def splits(self) -> list[str]:
        return [split for split in ("train", "eval") if self.task_counts.get(split)]

    @property
    def tool_names(self) -> list[str]:
        return [tool.get("name", "") for tool in self.manifest.get("tools") or []]

    def get_absolute_url(self) -> str:
        env = self.environment
        return reverse(
            "environments:version-detail", args=[env.owner.get_username(), env.name, self.version]
        )


class EnvironmentFile(ImmutableModel):
    """One file of a version, in object storage. Never served by a user-facing route."""

    version = models.ForeignKey(EnvironmentVersion, on_delete=models.PROTECT, related_name="files")
    path = models.CharField(max_length=255)
    size = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    storage_name = models.CharField(max_length=255)

    class Meta:
        ordering = ["version", "path"]
        constraints = [
            models.UniqueConstraint(fields=["version", "path"], name="environment_file_unique")
        ]

    def __str__(self) -> str:
        return f"{self.version}:{self.path}"


class Runner(models.Model):
    """A machine where a remote environment answers. Registered by `tp env runner
    register` / `serve`, probed by the control plane, drained but never forgotten."""

    version = models.ForeignKey(
        EnvironmentVersion, on_delete=models.PROTECT, related_name="runners"
    )
    url = models.URLField(max_length=2048)
    label = models.CharField(
        max_length=128, blank=True, help_text="a machine name (tp env runner serve --name)"
    )
    fleet = models.CharField(max_length=128, blank=True)
    registered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    registered_at = models.DateTimeField(auto_now_add=True)
    last_heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="the serving machine said it is up"
    )
    last_checked_at = models.DateTimeField(
        null=True, blank=True, help_text="the control plane probed it"
    )
    last_answered_at = models.DateTimeField(
        null=True, blank=True, help_text="a probe got a healthy answer"
    )
    answering = models.BooleanField(default=False, help_text="the last probe got a healthy answer")
    last_error = models.CharField(max_length=500, blank=True)
    drained_at = models.DateTimeField(null=True, blank=True)
    drained_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["version", "registered_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["version", "url"], name="runner_version_url_unique")
        ]

    def __str__(self) -> str:
        return f"{self.version} at {self.url}"

    @property
    def drained(self) -> bool:
        return self.drained_at is not None


class HarnessPlugin(OwnedName, models.Model):
    """A `capability: environment` plugin: the code that drives a model through an
    environment on the materialised (NeMo Gym) route."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="harness_plugins"
    )
    name = models.CharField(max_length=63)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["owner__username", "name"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="plugin_owner_name_unique")
        ]


class HarnessPluginVersion(ImmutableModel):
    plugin = models.ForeignKey(HarnessPlugin, on_delete=models.PROTECT, related_name="versions")
    version = models.CharField(max_length=64)
    capability = models.CharField(max_length=32)
    entrypoint = models.CharField(max_length=256)
    digest = models.CharField(max_length=80, help_text="what manifest harness.digest pins")
    size = models.BigIntegerField(default=0)
    pushed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["plugin", "-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["plugin", "version"], name="plugin_version_unique")
        ]

    def __str__(self) -> str:
        return f"{self.plugin.ref}@{self.version}"


class HarnessPluginFile(ImmutableModel):
    version = models.ForeignKey(
        HarnessPluginVersion, on_delete=models.PROTECT, related_name="files"
    )
    path = models.CharField(max_length=255)
    size = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    storage_name = models.CharField(max_length=255)

    class Meta:
        ordering = ["version", "path"]
        constraints = [
            models.UniqueConstraint(fields=["version", "path"], name="plugin_file_unique")
        ]

    def __str__(self) -> str:
        return f"{self.version}:{self.path}"
