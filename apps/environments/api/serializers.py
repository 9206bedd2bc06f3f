"""Answers of the environment API. Metadata only: paths, sizes, digests and per-split
counts of a version's files, never their content (tasksets never leave)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers
from tuneplane.contracts import environment as C

from .. import services
from ..models import Environment, EnvironmentVersion, HarnessPluginVersion, Runner


def _iso(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def version_summary(version: EnvironmentVersion) -> dict[str, Any]:
    manifest = C.parse_manifest(version.manifest)  # stored manifests were parsed at push
    summary = manifest.summary()
    env = version.environment
    return {
        "ref": version.ref,
        "owner": env.owner.get_username(),
        "name": env.name,
        "version": version.version,
        "public": env.public,
        **summary,
        "splits": {split: int(version.task_counts.get(split, 0)) for split in C.SPLITS}
        if version.task_counts
        else None,
        "digest": version.digest,
        "size": version.size,
        "pushed_by": version.pushed_by.get_username(),
        "created_at": _iso(version.created_at),
        "url": settings.TUNEPLANE_PUBLIC_URL + version.get_absolute_url(),
    }


def version_detail(user, version: EnvironmentVersion) -> dict[str, Any]:
    data = version_summary(version)
    data["files"] = [
        {"path": f.path, "size": f.size, "sha256": f.sha256} for f in version.files.all()
    ]
    data["runners"] = [
        runner_dict(r) for r in version.runners.select_related("registered_by", "drained_by")
    ]
    data["runs"] = [
        {
            "id": job.public_id,
            "state": job.state,
            "operation": job.operation,
            "owner": job.owner.get_username(),
            "split": (job.spec.get("environment") or {}).get("split"),
            "created_at": _iso(job.created_at),
            "url": settings.TUNEPLANE_PUBLIC_URL + job.get_absolute_url(),
        }
        for job in services.jobs_referencing(user, version)[:200]
    ]
    return data


def environment_dict(env: Environment, versions: list[EnvironmentVersion]) -> dict[str, Any]:
    latest = versions[0] if versions else None
    return {
        "ref": env.ref,
        "owner": env.owner.get_username(),
        "name": env.name,
        "public": env.public,
        "created_at": _iso(env.created_at),
        "versions": [v.version for v in versions],
        "latest": version_summary(latest) if latest else None,
    }


def runner_dict(runner: Runner) -> dict[str, Any]:
    return {
        "id": runner.pk,
        "environment": runner.version.ref,
        "url": runner.url,
        "label": runner.label,
        "fleet": runner.fleet or None,
        "state": services.runner_state(runner),
        "answering": services.is_answering(runner),
        "drained": runner.drained,
        "registered_by": runner.registered_by.get_username(),
        "registered_at": _iso(runner.registered_at),
        "last_heartbeat_at": _iso(runner.last_heartbeat_at),
        "last_checked_at": _iso(runner.last_checked_at),
        "last_answered_at": _iso(runner.last_answered_at),
        "last_error": runner.last_error or None,
        "drained_at": _iso(runner.drained_at),
        "drained_by": runner.drained_by.get_username() if runner.drained_by else None,
    }


def plugin_version_dict(version: HarnessPluginVersion, with_files: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {
        "ref": str(version),
        "plugin": version.plugin.ref,
        "version": version.version,
        "capability": version.capability,
        "entrypoint": version.entrypoint,
        "digest": version.digest,
        "size": version.size,
        "pushed_by": version.pushed_by.get_username(),
        "created_at": _iso(version.created_at),
    }
    if with_files:
        data["files"] = [
            {"path": f.path, "size": f.size, "sha256": f.sha256} for f in version.files.all()
        ]
    return data


# OpenAPI documentation of the forms and answers -----------------------------------------


class PushFormSerializer(serializers.Serializer):
    request = serializers.CharField(
        help_text='JSON: {"name": "calculator-tasks" or "alice/calculator-tasks", '
        '"version": "1.0.0", "public": false}'
    )
    bundle = serializers.FileField(
        help_text="gzip'd tar of the environment directory (manifest.json, tasks.jsonl, ...)"
    )


class PluginPushFormSerializer(serializers.Serializer):
    bundle = serializers.FileField(
        help_text="gzip'd tar of the plugin directory (plugin.yaml and its code)"
    )


class RegisterRemoteSerializer(serializers.Serializer):
    url = serializers.URLField()
    name = serializers.CharField()
    version = serializers.CharField()
    description = serializers.CharField(required=False, allow_blank=True)
    rubric = serializers.CharField(
        required=False, allow_null=True, help_text="owner/name of a rubric"
    )
    fleet = serializers.CharField(required=False, allow_null=True)
    public = serializers.BooleanField(required=False)


class ServeRunnerSerializer(serializers.Serializer):
    url = serializers.URLField()
    name = serializers.CharField(required=False, allow_blank=True, help_text="this machine's label")


class FileSerializer(serializers.Serializer):
    path = serializers.CharField()
    size = serializers.IntegerField()
    sha256 = serializers.CharField()


class RunnerSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    environment = serializers.CharField()
    url = serializers.URLField()
    label = serializers.CharField()
    fleet = serializers.CharField(allow_null=True)
    state = serializers.ChoiceField(["answering", "not answering", "drained"])
    answering = serializers.BooleanField()
    drained = serializers.BooleanField()
    registered_by = serializers.CharField()
    registered_at = serializers.DateTimeField()
    last_heartbeat_at = serializers.DateTimeField(allow_null=True)
    last_checked_at = serializers.DateTimeField(allow_null=True)
    last_answered_at = serializers.DateTimeField(allow_null=True)
    last_error = serializers.CharField(allow_null=True)
    drained_at = serializers.DateTimeField(allow_null=True)
    drained_by = serializers.CharField(allow_null=True)


class VersionSerializer(serializers.Serializer):
    ref = serializers.CharField()
    owner = serializers.CharField()
    name = serializers.CharField()
    version = serializers.CharField()
    public = serializers.BooleanField()
    protocol = serializers.ChoiceField(C.PROTOCOLS)
    deployment = serializers.ChoiceField(C.DEPLOYMENTS)
    verifier = serializers.DictField()
    tools = serializers.ListField(child=serializers.DictField())
    sandbox_required = serializers.BooleanField()
    category = serializers.CharField()
    harness = serializers.DictField(allow_null=True)
    image = serializers.CharField(allow_null=True)
    image_port = serializers.IntegerField(allow_null=True)
    endpoint = serializers.CharField(allow_null=True)
    fleet = serializers.CharField(allow_null=True)
    description = serializers.CharField()
    splits = serializers.DictField(
        child=serializers.IntegerField(),
        allow_null=True,
        help_text="number of tasks per split; null without tasks.jsonl",
    )
    digest = serializers.CharField()
    size = serializers.IntegerField()
    pushed_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    url = serializers.URLField()


class VersionDetailSerializer(VersionSerializer):
    files = FileSerializer(many=True)
    runners = RunnerSerializer(many=True)
    runs = serializers.ListField(child=serializers.DictField())


class EnvironmentSerializer(serializers.Serializer):
    ref = serializers.CharField()
    owner = serializers.CharField()
    name = serializers.CharField()
    public = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    versions = serializers.ListField(child=serializers.CharField())
    latest = VersionSerializer(allow_null=True)


class PluginVersionSerializer(serializers.Serializer):
    ref = serializers.CharField()
    plugin = serializers.CharField()
    version = serializers.CharField()
    capability = serializers.CharField()
    entrypoint = serializers.CharField()
    digest = serializers.CharField()
    size = serializers.IntegerField()
    pushed_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    files = FileSerializer(many=True, required=False)
