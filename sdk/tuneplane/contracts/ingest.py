"""Ingest routes and payload encoding shared by the runner, the SDK and the server.

`TUNEPLANE_JOB_ENDPOINT` is the ingest base URL (``.../api/ingest/v1``); every route is
relative to ``{endpoint}/runs/{run_id}/`` and authenticated with the attempt's
``Authorization: Bearer <TUNEPLANE_JOB_TOKEN>``.
"""

from __future__ import annotations

import math

INGEST_PREFIX = "api/ingest/v1"
USER_TOKEN_PREFIX = "tpu_"
INGEST_TOKEN_PREFIX = "tpi_"

ROUTE_PACKAGE = "package"  # GET: the job package (tar.gz)
ROUTE_LIFECYCLE = "lifecycle"  # POST {"event": "started"|"exited", ...}
ROUTE_LOGS = "logs"  # POST {"lines": [{"seq", "stream", "text", "ts"}]}
ROUTE_SCALARS = "scalars"  # POST {"points": [{"key", "step", "value", "ts"}]}
ROUTE_INIT = "init"  # POST {"hparams": {...}}
ROUTE_GPU_USAGE = "gpu-usage"  # POST {"node_rank", "gpus_in_use", "gpus_visible"}: the GPU watchdog's input

LIFECYCLE_STARTED = "started"
LIFECYCLE_EXITED = "exited"
LOG_STREAMS = ("stdout", "stderr")

# JSON has no NaN or infinities; they travel as these strings and are stored as
# numerical invalids, never as zeros.
NONFINITE_ENCODING = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def run_url(endpoint: str, run_id: str, route: str) -> str:
    return f"{endpoint.rstrip('/')}/runs/{run_id}/{route}"


def encode_value(value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def decode_value(raw: object) -> float:
    """Decode a point value; raises ValueError for anything that is not a number."""
    if isinstance(raw, bool):
        raise ValueError("value must be a number, not a boolean")
    if isinstance(raw, (int, float)):
        return float(raw)
    if isinstance(raw, str) and raw in NONFINITE_ENCODING:
        return NONFINITE_ENCODING[raw]
    raise ValueError("value must be a number or one of 'NaN', 'Infinity', '-Infinity'")

ROUTE_EVENTS = "events"  # POST {"events": [...]} at most limits.EVENT_BATCH_MAX
ROUTE_HEARTBEAT = "heartbeat"  # POST {"sdk": {counters}, "ts": ...}

EVENT_KINDS = ("event", "distribution", "health")
HEARTBEAT_COUNTERS = (
    "queued", "sent", "lost", "rejected", "rejected_points", "dropped", "failed_requests",
    "events_queued", "events_sent", "events_lost", "events_rejected", "events_dropped",
)
