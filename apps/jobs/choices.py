from django.db import models


class JobState(models.TextChoices):
    PENDING = "pending"  # admitted, waiting for the dispatcher
    QUEUED = "queued"  # an execution attempt was handed to an executor
    RUNNING = "running"  # the runner reported that train.sh started
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})

# The state machine. A terminal state absorbs everything: an exit reported after a
# cancel leaves the job cancelled.
TRANSITIONS: dict[str, frozenset[str]] = {
    JobState.PENDING: frozenset({JobState.QUEUED, JobState.FAILED, JobState.CANCELLED}),
    JobState.QUEUED: frozenset({JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}),
    JobState.RUNNING: frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}


class AttemptState(models.TextChoices):
    LAUNCHING = "launching"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    LOST = "lost"  # the runner stopped reporting and its process is gone


class ExecutorKind(models.TextChoices):
    LOCAL = "local"
    KUBERNETES = "kubernetes"
