from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings

from .models import GpuProfile

PROFILES_FIXTURE = Path(settings.BASE_DIR) / "fixtures" / "profiles.json"


def load_default_profiles() -> int:
    """Create the fixture's profiles that do not exist yet; never overwrite an admin's edits."""
    created = 0
    for entry in json.loads(PROFILES_FIXTURE.read_text()):
        _, was_created = GpuProfile.objects.get_or_create(name=entry["name"], defaults=entry)
        created += was_created
    return created
