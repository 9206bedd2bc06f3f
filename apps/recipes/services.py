from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from tuneplane.contracts.parameters import ParameterError, validate_schema

from .choices import Launcher, Observability, Operation
from .models import Recipe

CATALOGUE_DIR = Path(settings.BASE_DIR) / "fixtures" / "recipes"
FIELDS = (
    "version", "description", "framework", "observability", "entrypoint", "launcher", "bindings", "parameters",
    "operations", "runtime",
)
DIGEST_PINNED_IMAGE = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")
BINDINGS = ("model", "train_data")
CUSTOM_FRAMEWORK = "custom"


def recipe_digest(definition: dict) -> str:
    canonical = json.dumps(definition, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def check_definition(definition: dict, source: str = "recipe") -> None:
    """A published recipe must be runnable as declared; a broken catalogue file fails
    loudly at migrate rather than at somebody's submission."""
    name = definition.get("name", source)

    def bad(message: str) -> ImproperlyConfigured:
        return ImproperlyConfigured(f"{source}: recipe {name}: {message}")

    if definition.get("observability") not in Observability.values:
        raise bad(f"observability must be one of {', '.join(Observability.values)}")
    if definition.get("launcher", Launcher.BASH) not in Launcher.values:
        raise bad(f"launcher must be one of {', '.join(Launcher.values)}")
    operations = definition.get("operations") or []
    if not operations or any(op not in Operation.values for op in operations):
        raise bad(f"operations must be a non-empty list of {', '.join(Operation.values)}")
    try:
        validate_schema(definition.get("parameters") or {})
    except ParameterError as exc:
        raise bad(str(exc)) from None
    for binding in definition.get("bindings") or {}:
        if binding not in BINDINGS:
            raise bad(f"bindings may name {', '.join(BINDINGS)}, not {binding!r}")
    runtime = definition.get("runtime") or {}
    if definition.get("framework") != CUSTOM_FRAMEWORK:
        # Catalogue frameworks pin their image by digest: a moving tag could change what
        # a job runs after admission (spec: "pin @sha256:… in production").
        if not DIGEST_PINNED_IMAGE.match(str(runtime.get("image", ""))):
            raise bad("runtime.image must be pinned as image@sha256:<64 hex digits>")


@transaction.atomic
def load_catalogue(directory: Path = CATALOGUE_DIR) -> list[Recipe]:
    """Publish every recipe in the catalogue directory; the files are the source of truth."""
    loaded = []
    for path in sorted(directory.glob("*.json")):
        definition = json.loads(path.read_text())
        check_definition(definition, source=path.name)
        values = {field: definition.get(field) for field in FIELDS}
        values["parameters"] = values["parameters"] or {}
        values["bindings"] = values["bindings"] or {}
        values["launcher"] = values["launcher"] or Launcher.BASH
        values["description"] = values["description"] or ""
        values["digest"] = recipe_digest(definition)
        recipe, _ = Recipe.objects.update_or_create(name=definition["name"], defaults=values)
        loaded.append(recipe)
    return loaded
