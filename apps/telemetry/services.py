"""Ingest and query rules for logs and scalars.

Ingest is idempotent: the runner and the SDK retry until they hear an answer, so every
write is keyed by what the client sent ((attempt, seq) for lines, (series, step) for
points) and a repeat changes nothing. Batches are validated whole before anything is
written: an over-limit or malformed batch is refused with nothing stored.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import Q
from django.utils import timezone

from apps.accounts.errors import DomainError, TooLarge
from apps.jobs.models import ExecutionAttempt, Job
from apps.jobs.services import touch_attempt
from tuneplane.contracts import limits
from tuneplane.contracts.ingest import LOG_STREAMS
from tuneplane.contracts.metrics import classify

from .models import LogLine, LogStream, ScalarSeries

STREAM_CODES = {"stdout": LogStream.STDOUT, "stderr": LogStream.STDERR}
STREAM_NAMES = {code: name for name, code in STREAM_CODES.items()}


def _int(value: object, field: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DomainError(f"{field} must be an integer", field=field)
    if value < minimum:
        raise DomainError(f"{field} must be at least {minimum}", field=field)
    return value


def _timestamp(value: object, field: str) -> datetime:
    if value is None:
        return timezone.now()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DomainError(f"{field} must be a Unix timestamp in seconds", field=field)
    try:
        return datetime.fromtimestamp(value, tz=UTC)
    except (OverflowError, OSError, ValueError):
        raise DomainError(f"{field} is out of range", field=field) from None


def _list(payload: object, name: str, max_items: int) -> list:
    if not isinstance(payload, dict) or not isinstance(payload.get(name), list):
        raise DomainError(f"body must be a JSON object with a {name!r} list", field=name)
    items = payload[name]
    if len(items) > max_items:
        raise TooLarge(f"{name}: {len(items)} in one batch; the limit is {max_items}", field=name)
    return items


# Logs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cursor:
    attempt: int
    seq: int

    def __str__(self) -> str:
        return f"{self.attempt}.{self.seq}"

    @classmethod
    def parse(cls, raw: str | None, field: str = "after") -> Cursor | None:
        if raw in (None, "", "0"):
            return None
        try:
            attempt, seq = (int(part) for part in str(raw).split("."))
        except ValueError:
            raise DomainError(f"{field} must be a cursor like '1.42' (attempt.sequence)", field=field) from None
        if attempt < 0 or seq < 0:
            raise DomainError(f"{field} must not be negative", field=field)
        return cls(attempt, seq)


def ingest_logs(attempt: ExecutionAttempt, payload: object) -> dict:
    lines = _list(payload, "lines", limits.LOG_BATCH_MAX_LINES)
    rows = []
    for i, line in enumerate(lines):
        if not isinstance(line, dict):
            raise DomainError(f"lines[{i}] must be an object", field=f"lines[{i}]")
        seq = _int(line.get("seq"), f"lines[{i}].seq", minimum=1)
        stream = line.get("stream")
        if stream not in LOG_STREAMS:
            raise DomainError(f"lines[{i}].stream must be one of {', '.join(LOG_STREAMS)}", field=f"lines[{i}].stream")
        text = line.get("text")
        if not isinstance(text, str):
            raise DomainError(f"lines[{i}].text must be a string", field=f"lines[{i}].text")
        if len(text) > limits.LOG_LINE_MAX_CHARS:
            raise TooLarge(
                f"lines[{i}].text is {len(text)} characters; the limit is {limits.LOG_LINE_MAX_CHARS}",
                field=f"lines[{i}].text",
            )
        rows.append(
            LogLine(
                job_id=attempt.job_id,
                attempt_number=attempt.number,
                seq=seq,
                stream=STREAM_CODES[stream],
                # PostgreSQL text cannot hold NUL; keep the line, mark the byte.
                text=text.replace("\x00", "\ufffd"),
                ts=_timestamp(line.get("ts"), f"lines[{i}].ts"),
            )
        )
    if rows:
        LogLine.objects.bulk_create(rows, ignore_conflicts=True, batch_size=1000)
    touch_attempt(attempt)
    cancel = Job.objects.filter(pk=attempt.job_id).values_list("cancel_requested", flat=True).first()
    return {"acked_through": max((r.seq for r in rows), default=0), "cancel_requested": bool(cancel)}


def logs_complete(job: Job) -> bool:
    """True once no more lines can arrive: the job is finished and no attempt is still
    running (a cancelled job's runner may still be flushing its last lines)."""
    from apps.jobs.choices import AttemptState

    if not Job.objects.filter(pk=job.pk, state__in=["succeeded", "failed", "cancelled"]).exists():
        return False
    return not ExecutionAttempt.objects.filter(
        job_id=job.pk, state__in=[AttemptState.LAUNCHING, AttemptState.RUNNING]
    ).exists()


def log_page(job: Job, after: Cursor | None, limit: int) -> list[LogLine]:
    qs = LogLine.objects.filter(job=job).order_by("attempt_number", "seq")
    if after is not None:
        qs = qs.filter(Q(attempt_number__gt=after.attempt) | Q(attempt_number=after.attempt, seq__gt=after.seq))
    return list(qs[:limit])


def line_dict(line: LogLine) -> dict:
    return {
        "cursor": f"{line.attempt_number}.{line.seq}",
        "attempt": line.attempt_number,
        "seq": line.seq,
        "stream": STREAM_NAMES[line.stream],
        "text": line.text,
        "ts": line.ts.timestamp(),
    }


# Scalars: see scalars.py ----------------------------------------------------------


def series_dict(series: ScalarSeries) -> dict:
    return {
        "key": series.key,
        **classify(series.key),
        "count": series.count,
        "invalid_count": series.invalid_count,
        "min": series.min,
        "max": series.max,
        "last": series.last,
        "first_step": series.first_step,
        "last_step": series.last_step,
    }


def record_init(attempt: ExecutionAttempt, payload: object) -> None:
    """init(): the hyperparameters and the run's capability snapshot."""
    from .observations import record_capabilities

    if not isinstance(payload, dict) or not isinstance(payload.get("hparams", {}), dict):
        raise DomainError("body must be a JSON object with an 'hparams' object", field="hparams")
    hparams = payload.get("hparams") or {}
    record_capabilities(attempt.job_id, payload)
    if len(json.dumps(hparams, default=str)) > limits.HPARAMS_MAX_BYTES:
        raise TooLarge(f"hparams exceed {limits.HPARAMS_MAX_BYTES} bytes", field="hparams")
    Job.objects.filter(pk=attempt.job_id).update(hparams=hparams)
