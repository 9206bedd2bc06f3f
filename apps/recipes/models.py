from __future__ import annotations

from django.db import models

from .choices import Launcher, Observability


class Recipe(models.Model):
    """A published method, e.g. `custom/custom`. Loaded from fixtures/recipes/."""

    name = models.CharField(max_length=128, unique=True)
    version = models.CharField(max_length=32)
    digest = models.CharField(max_length=80, help_text="sha256 of the published definition")
    description = models.TextField(blank=True)
    framework = models.CharField(max_length=64)
    observability = models.CharField(max_length=16, choices=Observability.choices)
    entrypoint = models.CharField(max_length=128)
    # How the runner starts the entrypoint: `bash train.sh` (custom) or `torchrun train.py`
    # with the checked hyperparameters as flags (catalogue frameworks).
    launcher = models.CharField(max_length=16, choices=Launcher.choices, default=Launcher.BASH)
    # --model / --train-data: which of them the recipe binds, and to which flag.
    bindings = models.JSONField(default=dict, blank=True)
    parameters = models.JSONField(default=dict, blank=True)
    operations = models.JSONField(default=list)
    runtime = models.JSONField(default=dict)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name}@{self.version}"

    def supports(self, operation: str) -> bool:
        return operation in self.operations

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "version": self.version,
            "digest": self.digest,
            "description": self.description,
            "framework": self.framework,
            "observability": self.observability,
            "entrypoint": self.entrypoint,
            "launcher": self.launcher,
            "bindings": self.bindings,
            "parameters": self.parameters,
            "operations": self.operations,
            "runtime": self.runtime,
        }
