from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

from .choices import AttemptState, ExecutorKind, JobState


class JobPackage(models.Model):
    """An uploaded experiment package, content-addressed by sha256 and never rewritten."""

    sha256 = models.CharField(max_length=64, unique=True)
    size = models.BigIntegerField()
    storage_name = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"sha256:{self.sha256[:12]}"


class Job(models.Model):
    public_id = models.SlugField(max_length=80, unique=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="jobs")
    experiment = models.CharField(max_length=63)
    recipe = models.ForeignKey("recipes.Recipe", on_delete=models.PROTECT, related_name="jobs")
    operation = models.CharField(max_length=16, default="train")
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.PENDING)
    spec = models.JSONField()
    package = models.ForeignKey(JobPackage, on_delete=models.PROTECT, related_name="jobs")
    hparams = models.JSONField(default=dict, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    failure_reason = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["owner", "-created_at"]), models.Index(fields=["state"])]

    def __str__(self) -> str:
        return self.public_id

    @property
    def is_finished(self) -> bool:
        from .choices import TERMINAL_STATES

        return self.state in TERMINAL_STATES

    def get_absolute_url(self) -> str:
        return reverse("console:job-detail", args=[self.public_id])


class ExecutionAttempt(models.Model):
    """One try at running a job; it owns the ingest token and its log sequence."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    executor = models.CharField(max_length=16, choices=ExecutorKind.choices)
    state = models.CharField(max_length=16, choices=AttemptState.choices, default=AttemptState.LAUNCHING)
    handle = models.JSONField(default=dict, blank=True, help_text="executor-specific: pids, resource names")
    exit_code = models.IntegerField(null=True, blank=True)
    child_pid = models.IntegerField(null=True, blank=True, help_text="train.sh's pid, as the runner reported it")
    failure_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["job", "number"]
        constraints = [models.UniqueConstraint(fields=["job", "number"], name="attempt_number_unique")]

    def __str__(self) -> str:
        return f"{self.job.public_id}#{self.number}"


# The Kubernetes executor's rows (pod events for the Events tab, the GPU watchdog's input).
from .k8s.models import ClusterEvent, GpuUsageObservation  # noqa: E402, F401
