"""Report events, distributions and health snapshots: `Reporter.from_env()`.

    from tuneplane.reporter import Reporter
    reporter = Reporter.from_env()
    reporter.event("rollout_batch", {"reward_mean": 0.4, "env": "math"}, step=step)
    reporter.distribution("reward", bounds=[0, 1, 2, 4, 8], counts=[3, 1, 4, 1, 5, 9], step=step)
    reporter.health("env-server", {"ok": True, "latency_ms": 12}, step=step)

Two ways to send, as the spec describes them ("Events and distributions", "Delivery and
capacity limits"):

* The convenience methods `event`, `distribution` and `health` validate at the call site
  (contracts.observations.validate_event) and put the event on the bounded background
  observation queue (128 events, contracts.limits.EVENT_QUEUE_MAX), which the same sender
  thread as `tuneplane.report` delivers in batches of at most 32. They never raise and
  never block: True means "queued, not durably delivered"; False means the event was
  invalid (counted as `events_dropped`) or the queue was full (`events_lost`), or that
  there is no ingest binding. `tuneplane.report.stats()` has the counters.
* `observations(events)` is strict and synchronous, for a bulk evaluation that must know:
  it validates every event first (ValueError naming the field), sends them in batches of
  at most 32, retries transport failures, and raises ObservationDeliveryError on final
  failure. Event IDs make a re-send safe: the server keeps the first copy of an ID.

Each event gets a fresh uuid4 `event_id` unless the caller passes one, so distinct events
at the same learner step stay distinct; passing the same `event_id` again retries the same
immutable event. The SDK performs no rollout, scoring or distributed reduction: call these
from one designated reporting process, after the values are computed. Counts of a
distribution come from the producer; never estimate them from a mean.
"""

from __future__ import annotations

import numbers
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import report
from ._http import IngestClient, IngestError
from .contracts import env, ingest, limits
from .contracts.observations import ObservationError, validate_event

__all__ = ["NoIngestBindingError", "ObservationDeliveryError", "Reporter"]


class NoIngestBindingError(RuntimeError):
    """observations() was called outside a job: there is nowhere to deliver to."""


class ObservationDeliveryError(RuntimeError):
    """observations() could not deliver every event. `delivered` events (a prefix of the
    list, whole batches) reached the server; re-sending the whole list is safe."""

    def __init__(self, message: str, *, delivered: int, status: int | None) -> None:
        super().__init__(message)
        self.delivered = delivered
        self.status = status


def _plain(value: Any) -> Any:
    """numpy/torch scalars as the Python numbers the validator and JSON accept."""
    kind = type(value)
    if value is None or kind in (int, float, str, bool):
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, (str, bytes)):
        try:
            return item()  # numpy.bool_, 0-d arrays and one-element tensors
        except Exception:
            return value  # left for the validator to refuse
    return value


def _plain_list(values: Any) -> Any:
    """A bounds/counts argument (list, tuple, numpy array, tensor) as a list of numbers."""
    tolist = getattr(values, "tolist", None)
    if callable(tolist):
        values = tolist()
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        return values  # the validator names the field
    return [_plain(v) for v in values]


class Reporter:
    """The observation reporter of this process. Build it with `Reporter.from_env()`."""

    def __init__(self, core: report._Reporter | None) -> None:
        # None, or a core without a binding, makes every method a no-op (outside a job).
        self._core = core if core is not None and core.enabled else None

    @classmethod
    def from_env(cls) -> Reporter:
        """The reporter bound to this job's ingest (TUNEPLANE_JOB_ENDPOINT, _RUN_ID,
        _TOKEN and TUNEPLANE_JOB_ENABLED=1), sharing `tuneplane.report`'s queue and sender;
        a no-op reporter when there is no binding. Never raises."""
        try:
            return cls(report._get())
        except Exception:
            return cls(None)

    @property
    def enabled(self) -> bool:
        """True inside a job with an ingest binding."""
        return self._core is not None

    # -- convenience: bounded background queue, never raises ----------------------------

    def event(
        self,
        name: str,
        fields: Mapping[str, Any] | None = None,
        step: int | None = None,
        event_id: str | None = None,
    ) -> bool:
        """Queue an event of at most 32 bounded scalar/string `fields`. True: queued."""
        return self._queue("event", name, fields, step, event_id, None)

    def distribution(
        self,
        name: str,
        bounds: Sequence[float],
        counts: Sequence[int],
        step: int | None = None,
        event_id: str | None = None,
    ) -> bool:
        """Queue a histogram: at most 64 finite ascending `bounds` and len(bounds) + 1
        `counts`, buckets (-inf, b0], (b0, b1], ..., (b_last, +inf). True: queued."""
        histogram = {"bounds": bounds, "counts": counts}
        return self._queue("distribution", name, None, step, event_id, histogram)

    def health(
        self,
        name: str,
        fields: Mapping[str, Any],
        step: int | None = None,
        event_id: str | None = None,
    ) -> bool:
        """Queue a health snapshot (e.g. of an environment server). True: queued."""
        return self._queue("health", name, fields, step, event_id, None)

    def _queue(
        self,
        kind: str,
        name: Any,
        fields: Any,
        step: Any,
        event_id: Any,
        histogram: dict[str, Any] | None,
    ) -> bool:
        core = self._core
        if core is None:
            return False
        try:
            # Copies, not the caller's objects: the sender serialises the event later, and
            # a dict the caller keeps mutating must not change what was queued.
            raw: dict[str, Any] = {
                "event_id": uuid.uuid4().hex if event_id is None else event_id,
                "kind": kind,
                "name": name,
                "step": _plain(step),
                "ts": time.time(),
                "fields": (
                    {k: _plain(v) for k, v in fields.items()}
                    if isinstance(fields, Mapping)
                    else ({} if fields is None else fields)
                ),
            }
            if histogram is not None:
                raw["histogram"] = {
                    "bounds": _plain_list(histogram["bounds"]),
                    "counts": _plain_list(histogram["counts"]),
                }
            event = validate_event(raw)
        except ObservationError as exc:
            core._count("events_dropped", 1)
            core._warn_once(
                f"event-invalid-{exc.field}",
                f"tuneplane.reporter: dropped an invalid {kind}: {exc}",
            )
            return False
        except Exception as exc:  # a field whose item() explodes, a Mapping that raises
            core._count("events_dropped", 1)
            core._warn_once("event-broken", f"tuneplane.reporter: dropped a {kind}: {exc!r}")
            return False
        try:
            return core.enqueue_event(event)
        except Exception:
            return False

    # -- strict and synchronous ----------------------------------------------------------

    def observations(self, events: Sequence[Mapping[str, Any]]) -> dict[str, int]:
        """Deliver `events` now, in batches of at most 32; returns the server's summed
        {"accepted", "duplicates"}.

        Each event is a contracts.observations event: `event_id` (required, so that a
        retry of this call cannot duplicate anything), `kind`, `name`, `step`, `fields`,
        `histogram`; a missing `ts` is set to now. Every event is validated before any is
        sent: the first invalid one raises ValueError (ObservationError) whose `field`
        names it, e.g. "events[3].histogram.counts". Transport failures are retried;
        ObservationDeliveryError is raised when a batch finally fails or is refused.
        """
        core = self._core
        if core is None or core.binding is None:
            raise NoIngestBindingError(
                "no ingest binding: Reporter.observations() delivers only inside a platform job "
                f"({env.JOB_ENDPOINT}, {env.JOB_RUN_ID}, {env.JOB_TOKEN} and {env.JOB_ENABLED}=1 "
                "are not all set)"
            )
        if isinstance(events, (str, bytes, Mapping)) or not isinstance(events, Sequence):
            raise ObservationError("events must be a list of event objects", "events")
        now = time.time()
        checked: list[dict[str, Any]] = []
        for index, given in enumerate(events):
            where = f"events[{index}]"
            if not isinstance(given, Mapping):
                raise ObservationError(f"{where} must be an object", where)
            candidate = dict(given)
            if candidate.get("ts") is None:
                candidate["ts"] = now
            checked.append(validate_event(candidate, where))

        binding = core.binding
        client = IngestClient(
            binding.endpoint, binding.run_id, binding.token, report.REQUEST_TIMEOUT_SECONDS
        )
        totals = {"accepted": 0, "duplicates": 0}
        delivered = 0
        batch_max = limits.EVENT_BATCH_MAX
        for start in range(0, len(checked), batch_max):
            batch = checked[start : start + batch_max]
            answer = self._post_strict(client, batch, delivered, len(checked))
            if isinstance(answer, Mapping):
                for key in totals:
                    value = answer.get(key)
                    if isinstance(value, int) and not isinstance(value, bool):
                        totals[key] += value
            delivered += len(batch)
        return totals

    @staticmethod
    def _post_strict(
        client: IngestClient, batch: list[dict[str, Any]], delivered: int, total: int
    ) -> Any:
        delay = report.RETRY_BACKOFF_SECONDS
        attempts = max(1, report.SEND_ATTEMPTS)
        span = f"events[{delivered}:{delivered + len(batch)}]"
        for attempt in range(1, attempts + 1):
            try:
                return client.post_json(ingest.ROUTE_EVENTS, {"events": batch})
            except IngestError as exc:
                if not exc.transient:
                    raise ObservationDeliveryError(
                        f"the server refused {span}: {exc}; {delivered} of {total} events "
                        "were delivered before it",
                        delivered=delivered,
                        status=exc.status,
                    ) from exc
                if attempt == attempts:
                    raise ObservationDeliveryError(
                        f"could not deliver {span} after {attempts} attempts: {exc}; "
                        f"{delivered} of {total} events were delivered before it; re-sending "
                        "the same events is safe (an event ID is stored once)",
                        delivered=delivered,
                        status=exc.status,
                    ) from exc
                time.sleep(delay)
                delay = min(delay * 2, report.RETRY_BACKOFF_MAX_SECONDS)
        raise AssertionError("unreachable")  # pragma: no cover
