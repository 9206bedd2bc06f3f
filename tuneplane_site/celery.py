"""The Celery app. Tasks are thin: they take IDs and call services."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tuneplane_site.settings")

app = Celery("tuneplane")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
