from django.apps import AppConfig


class RecipesConfig(AppConfig):
    name = "apps.recipes"
    label = "recipes"
    verbose_name = "Recipe catalogue"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from .services import load_catalogue

        post_migrate.connect(lambda sender, **kw: load_catalogue(), sender=self, weak=False)
