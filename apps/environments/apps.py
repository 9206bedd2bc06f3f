from __future__ import annotations

from django.apps import AppConfig


class EnvironmentsConfig(AppConfig):
    name = "apps.environments"
    label = "environments"
    verbose_name = "Agent environments"
