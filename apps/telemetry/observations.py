"""Observation ingest (events, distributions, health snapshots), the SDK's transport
heartbeat, and the run's capability snapshot; plus the reads the Charts tab uses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.utils import timezone

from apps.accounts.errors import DomainError, TooLarge
from apps.jobs.models import ExecutionAttempt, Job
from tuneplane.contracts import limits
from tuneplane.contracts.ingest import HEARTBEAT_COUNTERS
from tuneplane.contracts.observations import ObservationError, bucket_labels, validate_event

from .models import ObservationEvent, RunCapabilities, TransportHealth


def ingest_events(attempt: ExecutionAttempt, payload: object) -> dict:
    if not isinstance(payload, dict) or not isinstance(payload.get("events"), list):
        raise DomainError("body must be a JSON object with an 'events' list", field="events")
    events = payload["events"]
    if len(events) > limits.EVENT_BATCH_MAX:
        raise TooLarge(f"events: {len(events)} in one batch; the limit is {limits.EVENT_BATCH_MAX}", field="events")
    now = timezone.now()
    rows: dict[str, ObservationEvent] = {}
    for i, raw in enumerate(events):
        try:
            event = validate_event(raw, where=f"events[{i}]")
        except ObservationError as exc:
            status = 413 if "the limit is" in str(exc) else 400
            raise DomainError(str(exc), field=exc.field, status_code=status) from None
        rows.setdefault(event["event_id"], ObservationEvent(
            job_id=attempt.job_id,
            attempt_number=attempt.number,
            event_id=event["event_id"],
            kind=event["kind"],
            name=event["name"],
            step=event["step"],
            ts=datetime.fromtimestamp(event["ts"], tz=UTC) if event["ts"] is not None else now,
            fields=event["fields"],
            histogram=event["histogram"],
        ))
    if not rows:
        return {"accepted": 0, "duplicates": 0}
    existing = set(
        ObservationEvent.objects.filter(job_id=attempt.job_id, event_id__in=rows).values_list("event_id", flat=True)
    )
    # First accepted wins: a re-sent ID is ignored, whatever it carries this time.
    ObservationEvent.objects.bulk_create(
        [row for eid, row in rows.items() if eid not in existing], ignore_conflicts=True
    )
    duplicates = len(existing) + (len(events) - len(rows))
    return {"accepted": len(rows) - len(existing), "duplicates": duplicates}


def record_heartbeat(attempt: ExecutionAttempt, payload: object) -> None:
    if not isinstance(payload, dict) or not isinstance(payload.get("sdk", {}), dict):
        raise DomainError("body must be a JSON object with an 'sdk' object of counters", field="sdk")
    counters = {}
    for name in HEARTBEAT_COUNTERS:
        value = payload.get("sdk", {}).get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise DomainError(f"sdk.{name} must be a non-negative integer", field=f"sdk.{name}")
        counters[name] = value
    occupancy = payload.get("queue_occupancy", 0.0)
    if isinstance(occupancy, bool) or not isinstance(occupancy, (int, float)) or not 0 <= occupancy <= 1:
        raise DomainError("queue_occupancy must be a number from 0 to 1", field="queue_occupancy")
    TransportHealth.objects.update_or_create(
        attempt=attempt,
        defaults={"last_heartbeat_at": timezone.now(), "counters": counters, "queue_occupancy": float(occupancy)},
    )


def record_capabilities(job_id: int, payload: dict) -> None:
    capabilities = payload.get("capabilities")
    requirements = payload.get("requirements")
    if capabilities is None and requirements is None:
        return
    max_names, max_chars = limits.CAPABILITIES_MAX, limits.CAPABILITY_NAME_MAX_CHARS
    if capabilities is not None and (
        not isinstance(capabilities, list)
        or not all(isinstance(c, str) and 0 < len(c) <= max_chars for c in capabilities)
        or len(capabilities) > max_names
    ):
        raise DomainError(
            f"capabilities must be a list of at most {max_names} names of 1 to {max_chars} characters",
            field="capabilities",
        )
    if requirements is not None and not isinstance(requirements, dict):
        raise DomainError("requirements must be an object", field="requirements")
    with transaction.atomic():
        RunCapabilities.objects.update_or_create(
            job_id=job_id,
            defaults={"capabilities": capabilities or [], "requirements": requirements or {}},
        )


# Reads --------------------------------------------------------------------------------


def event_dict(event: ObservationEvent) -> dict:
    data = {
        "event_id": event.event_id,
        "kind": event.kind,
        "name": event.name,
        "step": event.step,
        "ts": event.ts.timestamp(),
        "fields": event.fields,
        "attempt": event.attempt_number,
        "received_at": event.received_at.isoformat(),
    }
    if event.histogram is not None:
        data["histogram"] = {**event.histogram, "labels": bucket_labels(event.histogram["bounds"])}
    return data


def recent_events(job: Job, kind: str, limit: int) -> list[dict]:
    qs = ObservationEvent.objects.filter(job=job, kind=kind).order_by("-id")[:limit]
    return [event_dict(e) for e in qs]


def latest_by_name(job: Job, kind: str) -> list[dict]:
    """The newest event of each name, however many events came after it."""
    names = (
        ObservationEvent.objects.filter(job=job, kind=kind).order_by("name").values_list("name", flat=True).distinct()
    )
    latest = []
    for name in names[:200]:
        event = ObservationEvent.objects.filter(job=job, kind=kind, name=name).order_by("-id").first()
        if event is not None:
            latest.append(event_dict(event))
    return latest


def transport_state(job: Job) -> dict:
    """`healthy` while heartbeats are fresh; otherwise `unknown`, never `stopped`: a
    missing heartbeat does not prove that training stopped."""
    health = (
        TransportHealth.objects.filter(attempt__job=job).order_by("-attempt__number").select_related("attempt").first()
    )
    if health is None:
        return {"state": "unknown", "reason": "no heartbeat received", "last_heartbeat_at": None}
    stale_after = timedelta(seconds=limits.HEARTBEAT_INTERVAL_SECONDS * limits.HEARTBEAT_STALE_FACTOR)
    fresh = timezone.now() - health.last_heartbeat_at <= stale_after and not job.is_finished
    return {
        "state": "healthy" if fresh else "unknown",
        "reason": None if fresh else ("the job has finished" if job.is_finished else "the last heartbeat is stale"),
        "last_heartbeat_at": health.last_heartbeat_at.isoformat(),
        "attempt": health.attempt.number,
        "counters": health.counters,
        "queue_occupancy": health.queue_occupancy,
    }


def observation_summary(job: Job) -> dict:
    caps = RunCapabilities.objects.filter(job=job).first()
    return {
        "transport": transport_state(job),
        "health": latest_by_name(job, "health"),
        "distributions": latest_by_name(job, "distribution"),
        "capabilities": caps.capabilities if caps else None,
        "requirements": caps.requirements if caps else None,
    }
