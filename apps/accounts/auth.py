"""DRF authentication for user API tokens (`Authorization: Bearer tpu_...`)."""

from __future__ import annotations

from rest_framework import authentication, exceptions

from tuneplane.contracts import errors
from tuneplane.contracts.ingest import INGEST_TOKEN_PREFIX

from .services import authenticate_api_token


def bearer_secret(header: str | bytes | None) -> str | None:
    if not header:
        return None
    if isinstance(header, bytes):
        header = header.decode("latin-1")
    scheme, _, secret = header.partition(" ")
    if scheme.lower() not in {"bearer", "token"} or not secret.strip():
        return None
    return secret.strip()


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        secret = bearer_secret(request.META.get("HTTP_AUTHORIZATION"))
        if secret is None:
            return None
        if secret.startswith(INGEST_TOKEN_PREFIX):
            # The web guard middleware answers first; this is the second line.
            raise exceptions.AuthenticationFailed(errors.INGEST_TOKEN_ON_REGULAR_API)
        token = authenticate_api_token(secret)
        if token is None:
            raise exceptions.AuthenticationFailed("invalid or revoked API token")
        return token.user, token

    def authenticate_header(self, request) -> str:
        return self.keyword
