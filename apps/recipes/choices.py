from __future__ import annotations

from django.db import models


class Observability(models.TextChoices):
    EXTERNAL = "external", "external (the trainer reports; an observability URL is required)"
    PLATFORM = "platform", "platform (the runner puts the SDK on PYTHONPATH)"


class Operation(models.TextChoices):
    TRAIN = "train"
    EVAL = "eval"
    EXPORT = "export"


class Launcher(models.TextChoices):
    BASH = "bash", "bash <entrypoint> (custom: the file runs exactly as written)"
    TORCHRUN = "torchrun", "torchrun <entrypoint> (one process per GPU, c10d rendezvous across nodes)"
