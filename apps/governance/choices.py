from __future__ import annotations

from django.db import models


class FleetKind(models.TextChoices):
    KUBERNETES = "kubernetes", "kubernetes (batch/v1 Jobs with nvidia.com/gpu)"
    NODE = "node", "node (processes on a host: the local executor)"
    SLURM = "slurm", "slurm (no executor yet)"


class SandboxKind(models.TextChoices):
    DOCKER = "docker"
    E2B = "e2b"
    GVISOR = "gvisor"
    KATA = "kata"


class AuditAction(models.TextChoices):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    SEED = "seed"  # created from a setting or a fixture, not by a person
