"""Container image references: which registry host an image comes from."""

from __future__ import annotations

DEFAULT_REGISTRY = "docker.io"


def registry_host(image: str) -> str:
    """The registry host of an image reference, as Docker resolves it.

    The first path component is a registry only when it looks like a host (has a dot or
    a port, or is `localhost`); `ubuntu:22.04` and `library/ubuntu` come from Docker Hub.
    """
    image = image.strip()
    first, sep, _rest = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first.lower()
    return DEFAULT_REGISTRY


def is_digest_pinned(image: str) -> bool:
    return "@sha256:" in image


def parse_allowlist(raw: str) -> list[str]:
    return [h.strip().lower() for h in raw.replace(";", ",").split(",") if h.strip()]
