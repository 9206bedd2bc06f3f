from __future__ import annotations

from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "apps.governance"
    label = "governance"
    verbose_name = "Governance"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from .services import load_default_profiles, seed_registries_from_settings

        def seed(sender, **kwargs) -> None:
            load_default_profiles()
            seed_registries_from_settings()

        # Seeding reference data is what post_migrate is for; no business rules here.
        post_migrate.connect(seed, sender=self, weak=False)
