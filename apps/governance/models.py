from __future__ import annotations

from django.db import models


class GpuProfile(models.Model):
    """What `--profile` names: `h200:8` = 8 H200 GPUs on each of `num_nodes` nodes."""

    name = models.CharField(max_length=64, unique=True)
    gpu_type = models.CharField(max_length=64, blank=True)
    gpus_per_node = models.PositiveIntegerField(default=0)
    num_nodes = models.PositiveIntegerField(default=1)
    fleet = models.CharField(max_length=64, default="local")
    description = models.CharField(max_length=200, blank=True)
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def total_gpus(self) -> int:
        return self.gpus_per_node * self.num_nodes
