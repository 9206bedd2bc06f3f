"""ASGI entry point: Django for HTTP, plus the Channels consumer for live-log SSE."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tuneplane_site.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path, re_path  # noqa: E402

from apps.telemetry.consumers import LogStreamConsumer  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": AuthMiddlewareStack(
            URLRouter(
                [
                    path("api/v1/jobs/<slug:job_id>/logs/stream", LogStreamConsumer.as_asgi()),
                    re_path(r"", django_asgi_app),
                ]
            )
        ),
    }
)
