"""Rows of the Kubernetes side (app label `jobs`; imported by apps/jobs/models.py).

ClusterEvent is what the job page's Events tab lists: the pod events state sync copied
from the API server, plus what TunePlane itself did to the job's resources (created,
deleted, the watchdog's warning and stop). GpuUsageObservation is what the runner saw
with nvidia-smi, the watchdog's input.
"""

from __future__ import annotations

from django.db import models


class ClusterEvent(models.Model):
    class Type(models.TextChoices):
        NORMAL = "Normal"
        WARNING = "Warning"

    attempt = models.ForeignKey("jobs.ExecutionAttempt", on_delete=models.CASCADE, related_name="cluster_events")
    # The API server's event uid, so the periodic sync updates a repeated event (its
    # count and last_seen) instead of listing it again. TunePlane's own events have none.
    uid = models.CharField(max_length=64, null=True, blank=True, unique=True)
    type = models.CharField(max_length=16, choices=Type.choices, default=Type.NORMAL)
    reason = models.CharField(max_length=128)
    message = models.TextField(blank=True)
    source = models.CharField(max_length=64, help_text="kubernetes component, or tuneplane")
    involved_object = models.CharField(max_length=253, blank=True, help_text="Kind/name, e.g. Pod/tp-x-a1-0-abcde")
    count = models.PositiveIntegerField(default=1)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()

    class Meta:
        app_label = "jobs"
        ordering = ["first_seen", "id"]
        indexes = [models.Index(fields=["attempt", "first_seen"])]

    def __str__(self) -> str:
        return f"{self.type} {self.reason}: {self.message[:60]}"


class GpuUsageObservation(models.Model):
    attempt = models.ForeignKey("jobs.ExecutionAttempt", on_delete=models.CASCADE, related_name="gpu_usage")
    node_rank = models.PositiveIntegerField(default=0)
    gpus_in_use = models.PositiveIntegerField(help_text="GPUs with a compute process of the job")
    gpus_visible = models.PositiveIntegerField(default=0)
    observed_at = models.DateTimeField()

    class Meta:
        app_label = "jobs"
        ordering = ["-observed_at", "-id"]
        indexes = [models.Index(fields=["attempt", "-observed_at"])]
