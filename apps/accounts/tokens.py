"""Bearer secrets: generated once, shown once, stored only as a SHA-256 digest.

Both user API tokens (`tpu_`) and ingest tokens (`tpi_`) use this. The secret has 256
bits of entropy, so an unsalted digest is enough: it cannot be brute-forced, and lookup
by digest is one indexed query.
"""

from __future__ import annotations

import hashlib
import secrets


def new_secret(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()
