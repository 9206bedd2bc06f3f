"""Validation of observation events, shared by the SDK (which validates before queueing,
so a bad event fails at the call site in Reporter's strict API) and the server (which
refuses a batch holding one whole).

An event: {"event_id": str, "kind": "event"|"distribution"|"health", "name": str,
"step": int|None, "ts": float|None, "fields": {str: number|str|bool|None},
"histogram": {"bounds": [finite ascending floats], "counts": [ints, len(bounds)+1]}}.
The histogram's buckets are (-inf, b0], (b0, b1], ..., (b_last, +inf): counts come from
the producer, never estimated from a mean.
"""

from __future__ import annotations

import json
import math
from typing import Any

from . import limits
from .ingest import EVENT_KINDS


class ObservationError(ValueError):
    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


def _fail(field: str, message: str) -> ObservationError:
    return ObservationError(f"{field} {message}", field)


def validate_event(event: Any, where: str = "event") -> dict:
    """Return the normalised event or raise ObservationError naming the field and limit."""
    if not isinstance(event, dict):
        raise _fail(where, "must be an object")
    event_id = event.get("event_id")
    if not isinstance(event_id, str) or not event_id or len(event_id) > limits.EVENT_ID_MAX_CHARS:
        raise _fail(f"{where}.event_id", f"must be a non-empty string of at most {limits.EVENT_ID_MAX_CHARS} characters")
    kind = event.get("kind", "event")
    if kind not in EVENT_KINDS:
        raise _fail(f"{where}.kind", f"must be one of {', '.join(EVENT_KINDS)}")
    name = event.get("name")
    if not isinstance(name, str) or not name or len(name) > limits.EVENT_NAME_MAX_CHARS:
        raise _fail(f"{where}.name", f"must be a non-empty string of at most {limits.EVENT_NAME_MAX_CHARS} characters")
    step = event.get("step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= 2**62):
        raise _fail(f"{where}.step", "must be an integer from 0 to 2**62 or null")
    ts = event.get("ts")
    if ts is not None and (isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts)):
        raise _fail(f"{where}.ts", "must be a Unix timestamp in seconds or null")
    fields = event.get("fields") or {}
    if not isinstance(fields, dict):
        raise _fail(f"{where}.fields", "must be an object")
    if len(fields) > limits.EVENT_MAX_FIELDS:
        raise _fail(f"{where}.fields", f"has {len(fields)} fields; the limit is {limits.EVENT_MAX_FIELDS}")
    for key, value in fields.items():
        if not isinstance(key, str) or not key or len(key) > limits.EVENT_NAME_MAX_CHARS:
            raise _fail(f"{where}.fields", f"keys must be strings of 1 to {limits.EVENT_NAME_MAX_CHARS} characters")
        if isinstance(value, str):
            if len(value) > limits.EVENT_STRING_MAX_CHARS:
                raise _fail(f"{where}.fields.{key}", f"is longer than {limits.EVENT_STRING_MAX_CHARS} characters")
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise _fail(f"{where}.fields.{key}", "must be finite")
        elif value is not None and not isinstance(value, (bool, int)):
            raise _fail(f"{where}.fields.{key}", "must be a number, string, boolean or null (bounded scalars only)")
    histogram = event.get("histogram")
    if kind == "distribution":
        histogram = validate_histogram(histogram, f"{where}.histogram")
    elif histogram is not None:
        raise _fail(f"{where}.histogram", "is only allowed on distribution events")
    normalised = {"event_id": event_id, "kind": kind, "name": name, "step": step, "ts": ts,
                  "fields": fields, "histogram": histogram}
    size = len(json.dumps(normalised, separators=(",", ":")).encode())
    if size > limits.EVENT_MAX_BYTES:
        raise _fail(where, f"is {size} bytes; the limit is {limits.EVENT_MAX_BYTES} bytes")
    return normalised


def validate_histogram(histogram: Any, where: str = "histogram") -> dict:
    if not isinstance(histogram, dict):
        raise _fail(where, "must be an object with 'bounds' and 'counts'")
    bounds, counts = histogram.get("bounds"), histogram.get("counts")
    if not isinstance(bounds, list) or not bounds:
        raise _fail(f"{where}.bounds", "must be a non-empty list of finite numbers")
    if len(bounds) > limits.HISTOGRAM_MAX_BOUNDS:
        raise _fail(f"{where}.bounds", f"has {len(bounds)} bounds; the limit is {limits.HISTOGRAM_MAX_BOUNDS}")
    for b in bounds:
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not math.isfinite(b):
            raise _fail(f"{where}.bounds", "must hold finite numbers only (the outer buckets are open)")
    if any(b2 <= b1 for b1, b2 in zip(bounds, bounds[1:])):
        raise _fail(f"{where}.bounds", "must be strictly ascending")
    if not isinstance(counts, list) or len(counts) != len(bounds) + 1:
        raise _fail(f"{where}.counts", f"must hold len(bounds) + 1 = {len(bounds) + 1} counts")
    for c in counts:
        if isinstance(c, bool) or not isinstance(c, int) or c < 0:
            raise _fail(f"{where}.counts", "must hold non-negative integers")
    return {"bounds": [float(b) for b in bounds], "counts": counts}


def bucket_labels(bounds: list[float]) -> list[str]:
    """`(-inf,0], (0,1], ..., (8,+inf)` as the spec writes them."""

    def fmt(x: float) -> str:
        return str(int(x)) if float(x).is_integer() else repr(x)

    edges = ["-inf", *[fmt(b) for b in bounds], "+inf"]
    return [f"({lo},{hi}]" if hi != "+inf" else f"({lo},{hi})" for lo, hi in zip(edges, edges[1:])]
