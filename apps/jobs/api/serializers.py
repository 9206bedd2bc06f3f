from __future__ import annotations

from django.conf import settings
from rest_framework import serializers

from ..models import ExecutionAttempt, Job


class AttemptSerializer(serializers.ModelSerializer):
    class Meta:
        model = ExecutionAttempt
        fields = ["number", "state", "executor", "exit_code", "failure_reason", "started_at", "finished_at"]


class PackageSerializer(serializers.Serializer):
    sha256 = serializers.CharField()
    size = serializers.IntegerField()


class JobSerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="public_id")
    owner = serializers.CharField(source="owner.username")
    recipe = serializers.CharField(source="recipe.name")
    package = PackageSerializer()
    attempts = AttemptSerializer(many=True)
    url = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = [
            "id", "owner", "experiment", "recipe", "operation", "state", "exit_code", "failure_reason",
            "spec", "hparams", "package", "attempts", "created_at", "queued_at", "started_at", "finished_at", "url",
        ]

    def get_url(self, job: Job) -> str:
        return settings.TUNEPLANE_PUBLIC_URL + job.get_absolute_url()


class JobListItemSerializer(JobSerializer):
    class Meta(JobSerializer.Meta):
        fields = ["id", "owner", "experiment", "recipe", "operation", "state", "exit_code", "created_at", "finished_at", "url"]


class SubmissionFormSerializer(serializers.Serializer):
    """The multipart form of validate and submit (documented for the OpenAPI schema)."""

    request = serializers.CharField(help_text="JSON: experiment, operation, recipe, profile, image, "
                                              "observability_url, hyperparams, recipe_lock")
    package = serializers.FileField(help_text="gzip'd tar of experiments/<name>/ as committed")


class ValidationResultSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    spec = serializers.DictField()
    warnings = serializers.ListField(child=serializers.CharField())


class SubmittedJobSerializer(JobSerializer):
    warnings = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "warnings"]


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    field = serializers.CharField(allow_null=True)
