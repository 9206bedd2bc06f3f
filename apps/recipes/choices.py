from django.db import models


class Observability(models.TextChoices):
    EXTERNAL = "external", "external (the trainer reports; an observability URL is required)"
    PLATFORM = "platform", "platform (the runner puts the SDK on PYTHONPATH)"


class Operation(models.TextChoices):
    TRAIN = "train"
    EVAL = "eval"
    EXPORT = "export"
