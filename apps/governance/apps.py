from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "apps.governance"
    label = "governance"
    verbose_name = "Governance"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from .services import load_default_profiles

        # Seeding reference data is what post_migrate is for; no business rules here.
        post_migrate.connect(lambda sender, **kw: load_default_profiles(), sender=self, weak=False)
