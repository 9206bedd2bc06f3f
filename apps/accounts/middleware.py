"""The web guard: an ingest token is good only on ingest routes.

Ingest tokens live inside training containers, next to user code; if one leaks it must
not open the console, the admin or the user API. Checking here, before any view or
authentication class runs, covers every route at once, including ones added later.
"""

from __future__ import annotations

from django.http import JsonResponse

from tuneplane.contracts import errors
from tuneplane.contracts.ingest import INGEST_PREFIX, INGEST_TOKEN_PREFIX

from .auth import bearer_secret

INGEST_PATH = f"/{INGEST_PREFIX}/"


class IngestTokenGuardMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        secret = bearer_secret(request.META.get("HTTP_AUTHORIZATION"))
        if (
            secret is not None
            and secret.startswith(INGEST_TOKEN_PREFIX)
            and not request.path.startswith(INGEST_PATH)
        ):
            return JsonResponse({"detail": errors.INGEST_TOKEN_ON_REGULAR_API, "field": None}, status=401)
        return self.get_response(request)
