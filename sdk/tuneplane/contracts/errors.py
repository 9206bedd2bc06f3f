"""User-facing error texts quoted by the spec. Tests assert these verbatim."""

from __future__ import annotations

CUSTOM_OBSERVABILITY_URL_REQUIRED = (
    "custom external observability requires spec.framework.observability_url"
)
PLATFORM_OBSERVABILITY_URL_REFUSED = (
    "{recipe} declares observability: platform; --observability-url is refused"
)
CUSTOM_ENTRYPOINT_INVALID = "custom entrypoint is missing or escapes the experiment directory"
CUSTOM_NO_EXPORT_OR_EVAL = (
    "custom adapter refuses {operation}: custom has no export or eval compile path"
)
IMAGE_REGISTRY_NOT_ALLOWED = (
    "image registry {host!r} is not in TUNEPLANE_ALLOWED_IMAGE_REGISTRIES "
    "(allowed: {allowed}); ask an administrator to add your registry hostname"
)
IMAGE_REGISTRIES_EMPTY = (
    "custom images are refused: TUNEPLANE_ALLOWED_IMAGE_REGISTRIES is empty; "
    "ask an administrator to add your registry hostname"
)
INGEST_TOKEN_ON_REGULAR_API = "ingest tokens are accepted only on ingest routes"
INGEST_TOKEN_EXPIRED = "ingest token expired"
INGEST_TOKEN_WRONG_RUN = "ingest token is not valid for this run"
SCAFFOLD_NO_TRAINING_COMMAND = "no training command yet"
