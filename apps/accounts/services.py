from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q
from django.utils import timezone

from tuneplane.contracts.ingest import USER_TOKEN_PREFIX

from .models import ApiToken
from .tokens import digest, new_secret

# last_used_at is informational; writing it on every request would turn each API call
# into a write, so it is refreshed at most once a minute.
LAST_USED_GRANULARITY = timedelta(minutes=1)


def issue_api_token(user: AbstractBaseUser, name: str = "cli") -> tuple[ApiToken, str]:
    """Create a token; the plaintext is returned once and never stored."""
    secret = new_secret(USER_TOKEN_PREFIX)
    token = ApiToken.objects.create(user=user, name=name, prefix=secret[:8], key_hash=digest(secret))
    return token, secret


def authenticate_api_token(secret: str) -> ApiToken | None:
    token = (
        ApiToken.objects.select_related("user")
        .filter(key_hash=digest(secret), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if token is None:
        return None
    now = timezone.now()
    ApiToken.objects.filter(pk=token.pk).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_GRANULARITY)
    ).update(last_used_at=now)
    return token


def revoke_api_token(token: ApiToken) -> None:
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
