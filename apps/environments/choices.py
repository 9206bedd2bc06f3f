from __future__ import annotations

from django.db import models
from tuneplane.contracts import environment as C


class Protocol(models.TextChoices):
    OPENENV = C.PROTOCOL_OPENENV
    NEMO_GYM = C.PROTOCOL_NEMO_GYM


class Deployment(models.TextChoices):
    LOCAL = C.DEPLOYMENT_LOCAL
    REMOTE = C.DEPLOYMENT_REMOTE
    CONTAINER = C.DEPLOYMENT_CONTAINER


class VerifierKind(models.TextChoices):
    RUBRIC = "rubric"
    PLUGIN = "plugin"
    ENDPOINT = "endpoint"


class RunnerState(models.TextChoices):
    """What a runner list shows. Every runner is listed whatever its state (spec:
    "registered and not answering" and "nobody ever set one up" are different things)."""

    ANSWERING = "answering"
    NOT_ANSWERING = "not answering"
    DRAINED = "drained"
