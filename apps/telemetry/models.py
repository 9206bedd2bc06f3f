from __future__ import annotations

from django.db import models


class IngestToken(models.Model):
    """The credential of one execution attempt: ingest routes of that job only."""

    attempt = models.OneToOneField("jobs.ExecutionAttempt", on_delete=models.CASCADE, related_name="ingest_token")
    prefix = models.CharField(max_length=12)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.prefix}… for {self.attempt_id}"


class LogStream(models.IntegerChoices):
    STDOUT = 1, "stdout"
    STDERR = 2, "stderr"


class LogLine(models.Model):
    """A line of a job's stdout/stderr. (job, attempt, seq) orders lines and makes retried
    batches idempotent: the runner numbers lines, the database refuses a second copy."""

    id = models.BigAutoField(primary_key=True)
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="log_lines")
    attempt_number = models.PositiveIntegerField()
    seq = models.PositiveIntegerField()
    stream = models.PositiveSmallIntegerField(choices=LogStream.choices)
    text = models.TextField()
    ts = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "attempt_number", "seq"], name="log_line_unique_seq")
        ]


class ScalarSeries(models.Model):
    """One metric key of a job, with a summary kept up to date during ingest."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="series")
    key = models.CharField(max_length=256)
    count = models.BigIntegerField(default=0)
    invalid_count = models.BigIntegerField(default=0)
    min = models.FloatField(null=True)
    max = models.FloatField(null=True)
    last = models.FloatField(null=True)
    first_step = models.BigIntegerField(null=True)
    last_step = models.BigIntegerField(null=True)

    class Meta:
        ordering = ["key"]
        constraints = [models.UniqueConstraint(fields=["job", "key"], name="series_unique_key")]


class ScalarPoint(models.Model):
    """A reported value. Non-finite values keep `value` NULL and their kind in `invalid`,
    so they are never drawn or summarised as zeros."""

    # (series, step) is the identity of a point: a re-sent step replaces its value. As
    # the primary key it is the only index the hottest table carries.
    pk = models.CompositePrimaryKey("series", "step")
    # No database-level foreign key on the hottest tables: the per-row constraint check
    # made a 2,048-point insert about 3x slower (measured). Points and rollups are only
    # written by the ingest module after it has resolved the series in the same
    # transaction, and deleted with their series through the ORM's cascade.
    series = models.ForeignKey(ScalarSeries, on_delete=models.CASCADE, related_name="points", db_constraint=False)
    step = models.BigIntegerField()
    value = models.FloatField(null=True)
    invalid = models.CharField(max_length=9, blank=True)  # "", "NaN", "Infinity", "-Infinity"
    attempt_number = models.PositiveIntegerField()
    ts = models.DateTimeField()


# Rollup levels: bucket widths of 2**shift steps. A chart of N buckets over a span reads
# the coarsest level whose width fits span/N, so it reads rows in proportion to its
# buckets, not to the series (a 1,000,000-step series is 3,907 rows at level 8).
ROLLUP_SHIFTS = (4, 8, 12, 16)


class ScalarRollup(models.Model):
    """Aggregates of one series over steps [bucket << shift, (bucket + 1) << shift),
    maintained during ingest. Non-finite values are counted, never summed."""

    id = models.BigAutoField(primary_key=True)
    series = models.ForeignKey(ScalarSeries, on_delete=models.CASCADE, related_name="rollups", db_constraint=False)
    shift = models.PositiveSmallIntegerField()
    bucket = models.BigIntegerField()
    count = models.BigIntegerField(default=0)  # finite values
    invalid_count = models.BigIntegerField(default=0)
    min = models.FloatField(null=True)
    max = models.FloatField(null=True)
    sum = models.FloatField(default=0.0)
    first_step = models.BigIntegerField()
    first_value = models.FloatField(null=True)
    last_step = models.BigIntegerField()
    last_value = models.FloatField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["series", "shift", "bucket"], name="rollup_unique_bucket")
        ]


class ObservationEvent(models.Model):
    """An event, distribution or health snapshot a job reported. Immutable: the first
    copy of an event ID wins, so a retry can never rewrite what was recorded."""

    id = models.BigAutoField(primary_key=True)
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="observations")
    attempt_number = models.PositiveIntegerField()
    event_id = models.CharField(max_length=128)
    kind = models.CharField(max_length=16)
    name = models.CharField(max_length=128)
    step = models.BigIntegerField(null=True)
    ts = models.DateTimeField()
    fields = models.JSONField(default=dict)
    histogram = models.JSONField(null=True)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "event_id"], name="observation_unique_event_id")]
        indexes = [
            # The latest-100 panel, and "latest health snapshot per name" however old it is.
            models.Index(fields=["job", "kind", "-id"], name="observation_recent"),
            models.Index(fields=["job", "kind", "name", "-id"], name="observation_latest_by_name"),
        ]


class TransportHealth(models.Model):
    """The SDK's last heartbeat for an execution attempt: its loss and failure counters."""

    attempt = models.OneToOneField("jobs.ExecutionAttempt", on_delete=models.CASCADE, related_name="transport_health")
    last_heartbeat_at = models.DateTimeField()
    counters = models.JSONField(default=dict)
    queue_occupancy = models.FloatField(default=0.0)


class RunCapabilities(models.Model):
    """What the run declared at init(): method requirements and enabled capabilities."""

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="capabilities")
    capabilities = models.JSONField(default=list)
    requirements = models.JSONField(default=dict)
    recorded_at = models.DateTimeField(auto_now=True)
