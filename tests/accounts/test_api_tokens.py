"""API tokens: created in the admin (shown once) or by the management command, stored
hashed, and usable by `tp` right away."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from apps.accounts.models import ApiToken
from apps.accounts.tokens import digest
from tests.conftest import api_client

pytestmark = pytest.mark.django_db


def test_the_admin_creates_a_token_shown_once_and_stored_hashed(sam, alice):
    sam.is_superuser = True
    sam.save()
    client = Client()
    client.force_login(sam)
    response = client.post("/admin/accounts/apitoken/add/", {"user": alice.pk, "name": "laptop"}, follow=True)
    assert response.status_code == 200
    secret = re.search(r"(tpu_[A-Za-z0-9_-]{20,})", response.content.decode()).group(1)
    token = ApiToken.objects.get(user=alice)
    assert token.name == "laptop"
    assert token.key_hash == digest(secret) and secret not in (token.prefix, token.key_hash)
    assert api_client(secret=secret).get("/api/v1/me").json()["username"] == "alice"
    # The list page never shows it again.
    assert secret not in client.get("/admin/accounts/apitoken/").content.decode()


def test_the_management_command_prints_a_working_token(alice):
    out = StringIO()
    call_command("create_api_token", "alice", "--name", "ci", stdout=out)
    secret = out.getvalue().strip()
    assert secret.startswith("tpu_")
    assert api_client(secret=secret).get("/api/v1/me").json()["username"] == "alice"


def test_the_management_command_names_an_unknown_user():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no user named 'nobody'"):
        call_command("create_api_token", "nobody")
    assert not ApiToken.objects.exists()
