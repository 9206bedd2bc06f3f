from __future__ import annotations

import hashlib
import json
from pathlib import Path

from django.conf import settings
from django.db import transaction

from .models import Recipe

CATALOGUE_DIR = Path(settings.BASE_DIR) / "fixtures" / "recipes"
FIELDS = ("version", "description", "framework", "observability", "entrypoint", "parameters", "operations", "runtime")


def recipe_digest(definition: dict) -> str:
    canonical = json.dumps(definition, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


@transaction.atomic
def load_catalogue(directory: Path = CATALOGUE_DIR) -> list[Recipe]:
    """Publish every recipe in the catalogue directory; the files are the source of truth."""
    loaded = []
    for path in sorted(directory.glob("*.json")):
        definition = json.loads(path.read_text())
        values = {field: definition.get(field) for field in FIELDS}
        values["parameters"] = values["parameters"] or {}
        values["description"] = values["description"] or ""
        values["digest"] = recipe_digest(definition)
        recipe, _ = Recipe.objects.update_or_create(name=definition["name"], defaults=values)
        loaded.append(recipe)
    return loaded
