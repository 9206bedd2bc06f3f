"""Ingest tokens: one per execution attempt, hashed at rest, expiring."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from apps.accounts.tokens import digest, new_secret
from tuneplane.contracts import errors
from tuneplane.contracts.ingest import INGEST_TOKEN_PREFIX

from .models import IngestToken


class IngestTokenRefused(Exception):
    pass


def issue_ingest_token(attempt) -> str:
    """Create the attempt's token and return its plaintext (handed to the executor once)."""
    secret = new_secret(INGEST_TOKEN_PREFIX)
    IngestToken.objects.create(
        attempt=attempt,
        prefix=secret[:8],
        key_hash=digest(secret),
        expires_at=timezone.now() + timedelta(days=settings.TUNEPLANE_INGEST_TOKEN_DAYS),
    )
    return secret


def resolve_ingest_token(secret: str, run_id: str) -> IngestToken:
    """The token for `secret`, if it is live and belongs to run `run_id`."""
    if not secret.startswith(INGEST_TOKEN_PREFIX):
        raise IngestTokenRefused("an ingest token is required on ingest routes")
    token = (
        IngestToken.objects.select_related("attempt__job").filter(key_hash=digest(secret)).first()
    )
    if token is None:
        raise IngestTokenRefused("invalid ingest token")
    if token.expires_at <= timezone.now():
        raise IngestTokenRefused(errors.INGEST_TOKEN_EXPIRED)
    if token.attempt.job.public_id != run_id:
        raise IngestTokenRefused(errors.INGEST_TOKEN_WRONG_RUN)
    return token
