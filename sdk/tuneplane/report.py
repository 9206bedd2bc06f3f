"""Report metrics from a training script: `init`, `log`, `finish` and `TunePlaneCallback`.

    from tuneplane.report import init, log, finish
    init(hparams={"lr": 1e-5, "batch_size": 8})
    log({"train/loss": float(loss)}, step=step)
    finish()

The rules this module keeps (spec "Report metrics"; DESIGN.md "Reliability rules"):

* It never raises into the training loop and never blocks it. `log()` only flattens the
  values and appends them to a bounded in-memory queue; one daemon thread per process
  sends them to the `scalars` ingest route in batches.
* Without an ingest binding (`TUNEPLANE_JOB_TOKEN`, `TUNEPLANE_JOB_ENABLED=1`, the
  endpoint and the run id) every function is a cheap no-op: that is what a script wants
  outside a job. The binding is read from the environment on first use.
* Delivery is best effort (spec "Metric failures never stop training"): a full queue, a
  batch the server refuses or a network outage longer than the retries loses points, and
  `stats()` counts every one of them.
* Capacity (spec "Delivery and capacity limits", contracts.limits): scalar batches of at
  most 2,048 points, a queue of at most 100,000 points; observation events
  (`tuneplane.reporter.Reporter`) share the same sender through a queue of at most 128
  events, sent 32 a request. Past either bound, items are counted as lost.
* Transport health: the sender posts the `heartbeat` route every
  HEARTBEAT_INTERVAL_SECONDS (30 s; `TUNEPLANE_JOB_HEARTBEAT_INTERVAL` overrides it) with
  the counters of contracts.ingest.HEARTBEAT_COUNTERS and the scalar queue's occupancy,
  and once more from `finish()`.

It imports neither transformers nor Ray: `TunePlaneCallback` is duck-typed.
"""

from __future__ import annotations

import atexit
import json
import logging
import math
import numbers
import os
import shutil
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import count
from typing import Any

from ._http import IngestClient, IngestError
from .contracts import env, ingest, limits

__all__ = ["TunePlaneCallback", "finish", "init", "log", "stats"]

_logger = logging.getLogger("tuneplane.report")

# Tunables. Module constants, read when used, so tests can shrink them with monkeypatch.
FLUSH_INTERVAL_SECONDS = 1.0  # how long points may wait for a batch to fill
REQUEST_TIMEOUT_SECONDS = 10.0
SEND_ATTEMPTS = 4  # one try plus three retries of a transient failure, then the batch is lost
RETRY_BACKOFF_SECONDS = 0.5  # doubled after each failed try
RETRY_BACKOFF_MAX_SECONDS = 4.0
ATEXIT_FLUSH_SECONDS = 5.0  # an interpreter exit waits at most this long for pending points
DEFAULT_MONITOR_INTERVAL_SECONDS = 10.0
RESET_JOIN_SECONDS = 1.0  # _reset() waits at most this long for the old sender to leave
NVIDIA_SMI_TIMEOUT_SECONDS = 5.0

# Nesting deeper than this (or a dict that contains itself) is dropped, not recursed into.
_MAX_DEPTH = 16
_HPARAM_STR_MAX_CHARS = 4096
_HPARAMS_TRUNCATED_KEY = "_tuneplane_truncated"
# The ingest server accepts steps from 0 to 2**62; one step outside refuses the batch.
_MAX_STEP = 2**62

_Point = tuple[str, int, float, float]  # key, step, value, ts

# Overrides contracts.limits.HEARTBEAT_INTERVAL_SECONDS (30 s): tests shorten it.
HEARTBEAT_INTERVAL_ENV = env.JOB_HEARTBEAT_INTERVAL
# The `init` route refuses more capabilities than this, or a longer name.
_CAPABILITIES_MAX = limits.CAPABILITIES_MAX
_CAPABILITY_NAME_MAX_CHARS = limits.CAPABILITY_NAME_MAX_CHARS


@dataclass(frozen=True)
class _Binding:
    endpoint: str
    run_id: str
    token: str


def _binding_from_env() -> _Binding | None:
    """The ingest binding of this job, or None outside a job (then everything is a no-op)."""
    token = os.environ.get(env.JOB_TOKEN, "").strip()
    endpoint = os.environ.get(env.JOB_ENDPOINT, "").strip()
    run_id = os.environ.get(env.JOB_RUN_ID, "").strip()
    if os.environ.get(env.JOB_ENABLED, "").strip() != "1" or not (token and endpoint and run_id):
        return None
    return _Binding(endpoint=endpoint, run_id=run_id, token=token)


def _is_rank_zero() -> bool:
    """True unless RANK (or, without it, LOCAL_RANK) names another process.

    Hardware sampling and the callback report from one process per job, not one per GPU.
    """
    raw = os.environ.get("RANK")
    if raw is None or not raw.strip():
        raw = os.environ.get("LOCAL_RANK")
    if raw is None or not raw.strip():
        return True
    try:
        return int(raw) == 0
    except ValueError:
        return True  # an unreadable rank must not silently switch reporting off


# ---------------------------------------------------------------------------------------
# Turning what a user passes to log() into (key, value) pairs.


def _scalar(value: Any) -> float | None:
    """A value as one float: numbers as is, sequences and arrays as their mean; else None.

    Booleans are dropped rather than charted as 0/1: a flag is not a metric, and a
    `True` that silently becomes 1.0 is worse than a missing series.
    """
    kind = type(value)
    if kind is float or kind is int:
        return float(value)
    if value is None or isinstance(value, (bool, str, bytes, bytearray)):
        return None
    if isinstance(value, numbers.Real):  # int/float subclasses, numpy scalars, Fraction, Decimal
        return float(value)
    if isinstance(value, (list, tuple)):
        if not value:
            return None
        total = 0.0
        for item in value:
            if isinstance(item, (list, tuple, Mapping)):
                return None
            reduced = _scalar(item)
            if reduced is None:
                return None
            total += reduced
        return total / len(value)
    return _array_mean(value)


def _array_mean(value: Any) -> float | None:
    """numpy arrays, torch tensors and the like: `.mean()`, else `.item()`, as a float."""
    dtype = getattr(value, "dtype", None)
    if dtype is not None and "bool" in str(dtype):
        return None
    if _is_empty_array(value):
        return None  # numpy answers nan with a warning; an empty reduction is no value
    reduced: Any = None
    mean = getattr(value, "mean", None)
    if callable(mean):
        try:
            reduced = mean()
        except Exception:
            reduced = None  # e.g. torch refuses the mean of an integer tensor
    if reduced is None:
        item = getattr(value, "item", None)
        if not callable(item):
            return None
        try:
            reduced = item()  # single-element arrays and tensors
        except Exception:
            return None
    item = getattr(reduced, "item", None)
    if callable(item) and not isinstance(reduced, (int, float)):
        try:
            reduced = item()
        except Exception:
            return None
    if isinstance(reduced, bool) or not isinstance(reduced, numbers.Real):
        return None
    return float(reduced)


def _is_empty_array(value: Any) -> bool:
    size = getattr(value, "size", None)
    if isinstance(size, int):  # numpy: an attribute
        return size == 0
    numel = getattr(value, "numel", None)  # torch: size is a method, numel() the count
    if callable(numel):
        try:
            return int(numel()) == 0
        except Exception:
            return False
    return False


def _flatten(
    metrics: Mapping[Any, Any], prefix: str | None = None
) -> tuple[list[tuple[str, float]], int]:
    """Flatten nested dicts with "/" and reduce values; returns (pairs, number dropped).

    `prefix` ("validation") is prepended only to keys that carry no namespace yet: the
    spec's "prefix= prepends a namespace when the key does not already carry one".
    """
    head = str(prefix).strip("/") if prefix else ""
    pairs: list[tuple[str, float]] = []
    dropped = _flatten_into(pairs, metrics, "", 0, head)
    return pairs, dropped


def _flatten_into(
    out: list[tuple[str, float]], metrics: Mapping[Any, Any], parent: str, depth: int, head: str
) -> int:
    dropped = 0
    max_chars = limits.SCALAR_KEY_MAX_CHARS
    for raw_key, value in metrics.items():
        # One bad entry (a key whose str() raises, a tensor whose mean() explodes) costs
        # that entry only, never the rest of the call.
        try:
            key = raw_key if type(raw_key) is str else str(raw_key)
            if not key:
                dropped += 1
                continue
            if parent:
                key = f"{parent}/{key}"
            kind = type(value)
            # Plain floats and ints first: isinstance() against an ABC costs more than
            # everything else log() does for a small dict.
            if kind is float:
                scalar: float | None = value
            elif kind is int:
                scalar = float(value)
            elif kind is dict or isinstance(value, Mapping):
                if depth >= _MAX_DEPTH:
                    dropped += 1
                else:
                    dropped += _flatten_into(out, value, key, depth + 1, head)
                continue
            else:
                scalar = _scalar(value)
            if head and "/" not in key:
                key = f"{head}/{key}"
            # The server rejects a batch with an over-long key whole; drop just this one.
            if scalar is None or len(key) > max_chars:
                dropped += 1
            else:
                out.append((key, scalar))
        except Exception:
            dropped += 1
    return dropped


def _coerce_step(step: Any) -> int | None:
    """An explicit step as a non-negative int (accepts 3.0 and 0-d tensors), else None."""
    if isinstance(step, bool):
        return None
    if type(step) is int:
        return step if 0 <= step <= _MAX_STEP else None
    item = getattr(step, "item", None)
    if callable(item):
        step = item()
    if isinstance(step, bool):
        return None
    if isinstance(step, numbers.Integral):
        whole = int(step)
    elif isinstance(step, numbers.Real):
        number = float(step)
        if not (math.isfinite(number) and number.is_integer()):
            return None
        whole = int(number)
    else:
        return None
    return whole if 0 <= whole <= _MAX_STEP else None


def _jsonable(value: Any, depth: int = 0) -> Any:
    """Hyperparameters as plain JSON: numbers, strings, lists, dicts; the rest as text."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value[:_HPARAM_STR_MAX_CHARS]
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return ingest.encode_value(float(value))
    if depth < _MAX_DEPTH:
        if isinstance(value, Mapping):
            return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple, set, frozenset)):
            return [_jsonable(v, depth + 1) for v in list(value)[:1000]]
    return str(value)[:_HPARAM_STR_MAX_CHARS]


def _hparams_payload(hparams: Any) -> dict[str, Any]:
    """`{"hparams": {...}}` within HPARAMS_MAX_BYTES: entries that do not fit are left out."""
    if hparams is None:
        clean: dict[str, Any] = {}
    elif isinstance(hparams, Mapping):
        clean = {str(k): _jsonable(v, 1) for k, v in hparams.items()}
    else:
        clean = {"value": _jsonable(hparams, 1)}
    payload = {"hparams": clean}
    if _json_size(payload) <= limits.HPARAMS_MAX_BYTES:
        return payload
    # Too large for the route: keep entries in order while they fit, and say so.
    kept: dict[str, Any] = {_HPARAMS_TRUNCATED_KEY: True}
    budget = limits.HPARAMS_MAX_BYTES - _json_size({"hparams": kept}) - 16
    for key, value in clean.items():
        size = _json_size({key: value})
        if size <= budget:
            kept[key] = value
            budget -= size
    return {"hparams": kept}


def _json_size(value: Any) -> int:
    # ASCII-escaped length: never less than the UTF-8 size, and what a server measuring
    # json.dumps() with its defaults counts.
    return len(json.dumps(value, allow_nan=False))


# ---------------------------------------------------------------------------------------
# The per-process reporter: two bounded queues (scalar points, observation events) and
# one sender thread that also sends the transport heartbeat.


def _heartbeat_interval() -> float:
    """Seconds between heartbeats: the contract's, or HEARTBEAT_INTERVAL_ENV (tests)."""
    raw = os.environ.get(HEARTBEAT_INTERVAL_ENV, "")
    try:
        interval = float(raw)
    except ValueError:
        return limits.HEARTBEAT_INTERVAL_SECONDS
    return (
        interval if math.isfinite(interval) and interval > 0 else limits.HEARTBEAT_INTERVAL_SECONDS
    )


def _capabilities(capabilities: Any) -> list[str]:
    """Enabled capabilities as distinct non-empty names, in the caller's order, within the
    server's bounds (an init body it refuses would lose the hyperparameters too).

    A lone string is one capability, not a sequence of one-letter ones. A name over the
    length limit is left out rather than cut: a shortened name is a different capability.
    """
    if isinstance(capabilities, str):
        capabilities = [capabilities]
    kept: list[str] = []
    for item in list(capabilities)[:1000]:
        name = str(item).strip()
        if name and len(name) <= _CAPABILITY_NAME_MAX_CHARS and name not in kept:
            kept.append(name)
    return kept[:_CAPABILITIES_MAX]


def _requirements(requirements: Any) -> dict[str, Any]:
    """The method requirements as plain JSON within HPARAMS_MAX_BYTES (else marked cut)."""
    if isinstance(requirements, Mapping):
        clean = {str(k): _jsonable(v, 1) for k, v in requirements.items()}
    else:
        clean = {"value": _jsonable(requirements, 1)}
    if _json_size(clean) > limits.HPARAMS_MAX_BYTES:
        # Unlike hparams there is no safe partial requirement set: say it was cut.
        return {_HPARAMS_TRUNCATED_KEY: True}
    return clean


def _init_payload(hparams: Any, capabilities: Any, requirements: Any) -> dict[str, Any]:
    """The `init` body. `capabilities` and `requirements` appear only when given, so an
    init without them posts exactly what it always did (`{"hparams": {...}}`)."""
    payload = _hparams_payload(hparams)
    # A broken argument costs its own part of the snapshot, never the hyperparameters.
    if capabilities is not None:
        try:
            payload["capabilities"] = _capabilities(capabilities)
        except Exception:
            _logger.warning("tuneplane.report: capabilities must be a list of names; left out")
    if requirements is not None:
        try:
            payload["requirements"] = _requirements(requirements)
        except Exception:
            _logger.warning("tuneplane.report: requirements could not be encoded; left out")
    return payload


# What a send ended as: delivered, refused by the server (4xx: repeating cannot help), or
# given up after transient failures. The caller turns it into its own counters.
_SENT, _REJECTED, _LOST = "sent", "rejected", "lost"


class _Reporter:
    """Queues and sender of one process. `enabled` is False outside a job."""

    def __init__(
        self,
        binding: _Binding | None,
        queue_max: int | None = None,
        event_queue_max: int | None = None,
    ) -> None:
        self.binding = binding
        self.enabled = binding is not None
        self.queue_max = limits.SCALAR_QUEUE_MAX_POINTS if queue_max is None else queue_max
        self.event_queue_max = (
            limits.EVENT_QUEUE_MAX if event_queue_max is None else event_queue_max
        )
        self._steps = count()  # the implicit step; next() on it is atomic under the GIL
        self._initialised = False
        self._monitor: _HardwareMonitor | None = None
        self._reset_process_state()

    def _reset_process_state(self) -> None:
        """Fresh queues, counters, locks and no sender: at creation and in a forked child.

        A child inherits a copy of the parent's queues (the parent sends those) and
        possibly a lock held by a thread that does not exist in the child, so it starts
        from nothing rather than reusing any of it.
        """
        self._queue: deque[_Point] = deque()
        self._events: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()  # guards the rarely changed counters below
        self._wake = threading.Event()  # "a batch is full" or "flush now"
        self._stop = threading.Event()  # the interpreter is exiting: stop retrying
        self._sender: threading.Thread | None = None
        self._sender_pid: int | None = None
        self._busy = False  # the sender holds items that left a queue but are not settled
        self._init_payload: dict[str, Any] | None = None
        self._heartbeat_requested = False  # finish() asks for a final heartbeat
        self._next_heartbeat = 0.0  # monotonic time of the next periodic heartbeat
        self._series: set[str] = set()
        self._warned: set[str] = set()
        # Counters in points unless named otherwise. `queued` is derived (taken + pending)
        # so that log() never needs the lock on its common path.
        self.taken = 0
        self.sent = 0
        self.lost = 0
        self.dropped = 0
        self.rejected = 0  # batches (and init calls) the server refused with a 4xx
        self.rejected_points = 0
        self.failed_requests = 0  # every failed request: scalars, events, init, heartbeat
        # The same for observation events, counted in events.
        self.events_taken = 0
        self.events_sent = 0
        self.events_lost = 0  # queue full, or retries of a transient failure exhausted
        self.events_rejected = 0  # in batches the server refused with a 4xx
        self.events_dropped = 0  # invalid at the call site; never queued

    # -- the caller's side: cheap, lock-free on the common path ------------------------

    def log(self, metrics: Any, step: Any, prefix: str | None) -> None:
        if self._sender_pid != os.getpid():
            self._start_sender()
        implicit = next(self._steps)
        if step is None:
            resolved: int | None = implicit
        else:
            resolved = _coerce_step(step)
        if resolved is None or not (type(metrics) is dict or isinstance(metrics, Mapping)):
            self._count("dropped", len(metrics) if isinstance(metrics, Mapping) else 1)
            return
        pairs, dropped = _flatten(metrics, prefix)
        if dropped:
            self._count("dropped", dropped)
        if pairs:
            now = time.time()
            self.enqueue([(key, resolved, value, now) for key, value in pairs])

    def enqueue(self, points: list[_Point]) -> None:
        queue = self._queue
        room = self.queue_max - len(queue)
        if room >= len(points):
            queue.extend(points)  # one C call: atomic with respect to the sender's pops
        else:
            if room > 0:
                queue.extend(points[:room])
            self._count("lost", len(points) - max(room, 0))
            self._warn_once(
                "lost", "tuneplane.report: the metric queue is full; points are being dropped"
            )
        if len(queue) >= limits.SCALAR_BATCH_MAX_POINTS and not self._wake.is_set():
            self._wake.set()

    def enqueue_event(self, event: dict[str, Any]) -> bool:
        """Queue one validated event; False (counted as lost) when the queue is full.

        Events are rare next to scalars, so the lock is affordable here and keeps the
        128-event bound exact even with several producer threads.
        """
        if self._sender_pid != os.getpid():
            self._start_sender()
        events = self._events
        with self._lock:
            full = len(events) >= self.event_queue_max
            if full:
                self.events_lost += 1
            else:
                events.append(event)
        if full:
            self._warn_once(
                "events-lost",
                "tuneplane.reporter: the observation queue is full; events are being dropped",
            )
            return False
        if len(events) >= limits.EVENT_BATCH_MAX and not self._wake.is_set():
            self._wake.set()
        return True

    def init(
        self,
        hparams: Any,
        monitor_hardware: bool,
        capabilities: Any = None,
        requirements: Any = None,
    ) -> None:
        if self._sender_pid != os.getpid():
            self._start_sender()
        if not self._initialised:
            self._initialised = True
            self._init_payload = _init_payload(hparams, capabilities, requirements)
            self._wake.set()
        if monitor_hardware and self._monitor is None and _is_rank_zero():
            self._monitor = _HardwareMonitor(self, _monitor_interval())
            self._monitor.start()

    def finish(self, timeout: float) -> bool:
        """Flush both queues and send a final heartbeat, waiting at most `timeout` seconds.

        True when no point or event is left. A process that never reported anything has
        no sender and nothing to say, so it sends nothing (not even a heartbeat).
        """
        if self._sender_pid != os.getpid():
            if not self._queue and not self._events and self._init_payload is None:
                return True
            self._start_sender()
        deadline = time.monotonic() + max(0.0, float(timeout))
        self._heartbeat_requested = True
        self._wake.set()
        while True:
            if (
                not self._queue
                and not self._events
                and not self._busy
                and self._init_payload is None
                and not self._heartbeat_requested
            ):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                # The heartbeat is best effort; only undelivered points or events fail.
                return not (self._queue or self._events or self._busy or self._init_payload)
            # Polling keeps this simple and obviously bounded; finish() is not a hot path.
            time.sleep(min(0.01, remaining))

    def stats(self) -> dict[str, int]:
        pending = len(self._queue)
        events_pending = len(self._events)
        return {
            "queued": self.taken + pending,
            "pending": pending,
            "sent": self.sent,
            "lost": self.lost,
            "dropped": self.dropped,
            "rejected": self.rejected,
            "rejected_points": self.rejected_points,
            "failed_requests": self.failed_requests,
            "events_queued": self.events_taken + events_pending,
            "events_pending": events_pending,
            "events_sent": self.events_sent,
            "events_lost": self.events_lost,
            "events_rejected": self.events_rejected,
            "events_dropped": self.events_dropped,
        }

    def heartbeat_payload(self) -> dict[str, Any]:
        """The `heartbeat` body: exactly the contract's counters and the scalar queue's fill."""
        counters = self.stats()
        occupancy = len(self._queue) / self.queue_max if self.queue_max > 0 else 1.0
        return {
            "sdk": {name: counters[name] for name in ingest.HEARTBEAT_COUNTERS},
            "queue_occupancy": min(1.0, max(0.0, occupancy)),
            "ts": time.time(),
        }

    def shutdown(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._monitor is not None:
            self._monitor.stop()

    def join(self, timeout: float) -> None:
        """Wait (bounded) for a shut-down sender to leave, so it posts nothing later."""
        sender = self._sender
        if sender is not None and sender.is_alive() and sender is not threading.current_thread():
            sender.join(timeout)

    def after_fork_in_child(self) -> None:
        # The parent already posted init. `_monitor` is kept on purpose: its thread did
        # not survive the fork, but the job keeps one sampler (the parent's), and a kept
        # reference stops init(monitor_hardware=True) in the child from starting another.
        self._reset_process_state()

    def _count(self, name: str, amount: int) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + amount)

    def _warn_once(self, kind: str, message: str) -> None:
        # "Failures log, they do not raise": one line per kind, never a flood in the loop.
        if kind not in self._warned:
            self._warned.add(kind)
            _logger.warning(message)

    # -- the sender thread ---------------------------------------------------------------

    def _start_sender(self) -> None:
        with self._lock:
            pid = os.getpid()
            if self._sender_pid == pid:
                return
            if self._sender_pid is not None:
                # A fork that os.register_at_fork did not see (a C extension's fork()).
                self._reset_process_state()
            thread = threading.Thread(target=self._run, name="tuneplane-report-sender", daemon=True)
            self._sender = thread
            self._sender_pid = pid
        thread.start()

    def _run(self) -> None:
        assert self.binding is not None
        client = IngestClient(
            self.binding.endpoint, self.binding.run_id, self.binding.token, REQUEST_TIMEOUT_SECONDS
        )
        interval = _heartbeat_interval()
        # The first heartbeat goes out with the first drain: the console shows transport
        # health as soon as a run reports, not one interval later.
        self._next_heartbeat = time.monotonic()
        while not self._stop.is_set():
            until_heartbeat = self._next_heartbeat - time.monotonic()
            self._wake.wait(max(0.0, min(FLUSH_INTERVAL_SECONDS, until_heartbeat)))
            self._wake.clear()
            try:
                self._drain(client, interval)
            except Exception:  # a bug here must not kill delivery for the rest of the run
                _logger.exception("tuneplane.report: unexpected error in the sender")
                self._busy = False

    def _drain(self, client: IngestClient, heartbeat_interval: float) -> None:
        self._busy = True  # set before taking anything, so finish() never sees a gap
        try:
            # Taken before the queues are emptied: a final heartbeat requested now must
            # report counters that include everything queued before finish() asked.
            final = self._heartbeat_requested
            payload = self._init_payload
            if payload is not None:
                # First, so the capability snapshot exists before any event it qualifies.
                if self._post(client, ingest.ROUTE_INIT, payload) == _REJECTED:
                    self._count("rejected", 1)
                self._init_payload = None
            queue, events = self._queue, self._events
            batch_max, event_batch_max = limits.SCALAR_BATCH_MAX_POINTS, limits.EVENT_BATCH_MAX
            # Alternate one event batch and one scalar batch: a 100,000-point backlog must
            # not hold up the few events, nor a burst of events the charts.
            while (queue or events) and not self._stop.is_set():
                if events:
                    batch_events: list[dict[str, Any]] = []
                    while events and len(batch_events) < event_batch_max:
                        batch_events.append(events.popleft())
                    self.events_taken += len(batch_events)
                    self._send_events(client, batch_events)
                if queue:
                    batch: list[_Point] = []
                    while queue and len(batch) < batch_max:
                        batch.append(queue.popleft())
                    self.taken += len(batch)
                    self._send_points(client, batch)
                if time.monotonic() >= self._next_heartbeat:
                    self._send_heartbeat(client, heartbeat_interval)
            if final or time.monotonic() >= self._next_heartbeat:
                if final:
                    self._heartbeat_requested = False
                if not self._stop.is_set():
                    self._send_heartbeat(client, heartbeat_interval)
        finally:
            self._busy = False

    def _send_heartbeat(self, client: IngestClient, interval: float) -> None:
        """One try, no retries: the next heartbeat is the retry, and a heartbeat that
        cannot be delivered says nothing the counters will not say later."""
        self._next_heartbeat = time.monotonic() + interval
        try:
            client.post_json(ingest.ROUTE_HEARTBEAT, self.heartbeat_payload())
        except IngestError as exc:
            if exc.transient:
                self._count("failed_requests", 1)
            self._warn_once(f"heartbeat-{exc.status}", f"tuneplane.report: heartbeat: {exc}")
        except Exception as exc:
            self._warn_once("heartbeat", f"tuneplane.report: heartbeat: {exc!r}")

    def _send_events(self, client: IngestClient, batch: list[dict[str, Any]]) -> None:
        outcome = self._post(client, ingest.ROUTE_EVENTS, {"events": batch})
        # A duplicate the server already had counts as sent: the event is recorded.
        name = {_SENT: "events_sent", _REJECTED: "events_rejected", _LOST: "events_lost"}[outcome]
        self._count(name, len(batch))

    def _send_points(self, client: IngestClient, batch: list[_Point]) -> None:
        encoded: list[dict[str, Any]] = []
        series = self._series
        series_max = limits.SCALAR_SERIES_MAX_PER_RUN
        over_series = 0
        for key, step, value, ts in batch:
            # The server admits at most 4,096 series a run and rejects a batch that goes
            # over whole; dropping the extra series here keeps every other point flowing.
            if key not in series:
                if len(series) >= series_max:
                    over_series += 1
                    continue
                series.add(key)
            encoded.append(
                {"key": key, "step": step, "value": ingest.encode_value(value), "ts": ts}
            )
        if over_series:
            self._count("dropped", over_series)
            self._warn_once(
                "series",
                f"tuneplane.report: more than {series_max} metric keys; new keys are dropped",
            )
        if not encoded:
            return
        outcome = self._post(client, ingest.ROUTE_SCALARS, {"points": encoded})
        if outcome == _SENT:
            self._count("sent", len(encoded))
        elif outcome == _REJECTED:
            with self._lock:
                self.rejected += 1
                self.rejected_points += len(encoded)
        else:
            self._count("lost", len(encoded))

    def _post(self, client: IngestClient, route: str, payload: dict[str, Any]) -> str:
        """POST with retries of transient failures; returns _SENT, _REJECTED or _LOST."""
        delay = RETRY_BACKOFF_SECONDS
        for attempt in range(1, SEND_ATTEMPTS + 1):
            try:
                client.post_json(route, payload)
            except IngestError as exc:
                if not exc.transient:
                    self._warn_once(f"rejected-{route}-{exc.status}", f"tuneplane.report: {exc}")
                    return _REJECTED
                self._count("failed_requests", 1)
                self._warn_once("failing", f"tuneplane.report: {exc}; retrying")
                if attempt == SEND_ATTEMPTS or self._stop.wait(delay):
                    break
                delay = min(delay * 2, RETRY_BACKOFF_MAX_SECONDS)
            except Exception as exc:  # e.g. a value json refuses: a bug, not a transient fault
                self._warn_once("encode", f"tuneplane.report: could not send {route}: {exc!r}")
                return _REJECTED
            else:
                return _SENT
        return _LOST


# ---------------------------------------------------------------------------------------
# Hardware sampling (init(monitor_hardware=True)): a small thread, rank zero only.


def _monitor_interval() -> float:
    raw = os.environ.get(env.JOB_MONITOR_INTERVAL, "")
    try:
        interval = float(raw)
    except ValueError:
        return DEFAULT_MONITOR_INTERVAL_SECONDS
    return (
        interval if math.isfinite(interval) and interval > 0 else DEFAULT_MONITOR_INTERVAL_SECONDS
    )


def _read_cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies from the first line of /proc/stat."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = handle.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    values = [int(v) for v in fields[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    # guest time is already counted in user time; only the first 8 columns add up.
    total = sum(values[:8])
    return total - idle, total


def _read_memory_percent() -> float | None:
    info: dict[str, int] = {}
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                name, _, rest = line.partition(":")
                if name in ("MemTotal", "MemAvailable"):
                    info[name] = int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        return None
    total = info.get("MemTotal")
    available = info.get("MemAvailable")
    if not total or available is None:
        return None
    return 100.0 * (total - available) / total


def _read_gpus(nvidia_smi: str) -> list[tuple[float, float]] | None:
    """[(utilization %, memory used MiB)] per GPU, or None when nvidia-smi does not answer."""
    try:
        done = subprocess.run(
            [
                nvidia_smi,
                "--query-gpu=utilization.gpu,memory.used",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    gpus: list[tuple[float, float]] = []
    for line in done.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 2:
            continue
        try:
            gpus.append((float(parts[0]), float(parts[1])))
        except ValueError:
            continue  # "[N/A]" on some boards
    return gpus


class _HardwareMonitor:
    """Samples CPU, memory and GPUs every `interval` seconds into the reporter's queue."""

    def __init__(self, reporter: _Reporter, interval: float) -> None:
        self._reporter = reporter
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="tuneplane-hardware-monitor", daemon=True
        )
        self._nvidia_smi = shutil.which("nvidia-smi")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def _run(self) -> None:
        previous = _read_cpu_times()
        sample = 0
        while not self._stopped.wait(self._interval):
            try:
                previous = self._sample(sample, previous)
                sample += 1
            except Exception:
                _logger.debug("tuneplane.report: hardware sample failed", exc_info=True)

    def _sample(self, step: int, previous: tuple[int, int] | None) -> tuple[int, int] | None:
        values: list[tuple[str, float]] = []
        current = _read_cpu_times()
        if previous is not None and current is not None and current[1] > previous[1]:
            busy = current[0] - previous[0]
            values.append(("system/cpu_percent", 100.0 * busy / (current[1] - previous[1])))
        memory = _read_memory_percent()
        if memory is not None:
            values.append(("system/memory_percent", memory))
        if self._nvidia_smi:
            gpus = _read_gpus(self._nvidia_smi)
            if gpus is None:
                self._nvidia_smi = None  # no driver in this container: stop asking
            else:
                for index, (utilization, memory_mib) in enumerate(gpus):
                    values.append((f"system/gpu{index}/utilization_percent", utilization))
                    values.append((f"system/gpu{index}/memory_used_mib", memory_mib))
        if values:
            now = time.time()
            self._reporter.enqueue([(key, step, value, now) for key, value in values])
        return current


# ---------------------------------------------------------------------------------------
# The module-level API.

_reporter: _Reporter | None = None
_reporter_lock = threading.Lock()


def _get() -> _Reporter:
    global _reporter
    with _reporter_lock:
        if _reporter is None:
            _reporter = _Reporter(_binding_from_env())
        return _reporter


def _reset() -> None:
    """Test hook: stop this process's reporter and forget it.

    The next call of any function here (or `Reporter.from_env()`) reads the environment
    afresh and starts a new queue, counters and sender. Pending points and events of the
    old reporter are discarded, not flushed: call `finish()` first to deliver them. The
    old sender is given RESET_JOIN_SECONDS to leave, so that it does not post to the next
    test's server. Not for training scripts.
    """
    global _reporter
    with _reporter_lock:
        old, _reporter = _reporter, None
    if old is not None:
        old.shutdown()
        old.join(RESET_JOIN_SECONDS)


def _after_fork_in_child() -> None:
    global _reporter_lock
    _reporter_lock = threading.Lock()
    if _reporter is not None and _reporter.enabled:
        _reporter.after_fork_in_child()


def _at_exit() -> None:
    reporter = _reporter
    if reporter is None or not reporter.enabled:
        return
    try:
        reporter.finish(ATEXIT_FLUSH_SECONDS)
    except Exception:
        pass
    reporter.shutdown()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_at_exit)


def init(
    hparams: Mapping[str, Any] | None = None,
    monitor_hardware: bool = False,
    *,
    capabilities: Iterable[str] | None = None,
    requirements: Mapping[str, Any] | None = None,
) -> None:
    """Start reporting. Never raises.

    Posts the run's `hparams` once (init is idempotent: later calls send nothing) and,
    when given, the snapshot of its enabled `capabilities` (e.g. ["tools"]) and method
    `requirements` (spec: "The run snapshots its method requirements and enabled
    capabilities"). With `monitor_hardware=True` it starts the hardware sampler: rank
    zero only, one per job, every TUNEPLANE_JOB_MONITOR_INTERVAL seconds (default 10).
    """
    try:
        reporter = _reporter if _reporter is not None else _get()
        if reporter.enabled:
            reporter.init(hparams, monitor_hardware, capabilities, requirements)
    except Exception:
        pass


def log(metrics: Mapping[str, Any], step: int | None = None, prefix: str | None = None) -> None:
    """Queue scalars for the Charts tab. Never raises, never blocks.

    Nested dicts flatten with "/" ({"a": {"b": 1}} -> "a/b"); lists, tuples and arrays
    (anything with .mean() or .item()) are reduced to their mean; booleans, strings and
    whatever cannot be reduced are dropped. `prefix` is prepended ("prefix/key") to keys
    without a "/". Without `step`, the step is the number of earlier log() calls.
    """
    try:
        reporter = _reporter if _reporter is not None else _get()
        if reporter.enabled:
            reporter.log(metrics, step, prefix)
    except Exception:
        pass


def finish(timeout: float = 10.0) -> bool:
    """Flush pending points and events and send a final heartbeat, waiting at most
    `timeout` seconds; True when no point or event is left."""
    try:
        reporter = _reporter if _reporter is not None else _get()
        if not reporter.enabled:
            return True
        return reporter.finish(timeout)
    except Exception:
        return False


def stats() -> dict[str, int]:
    """Delivery counters of this process.

    queued: points accepted into the queue; pending: still in it; sent: delivered;
    lost: given up (queue full, or retries of a transient failure exhausted); dropped:
    values log() could not turn into a number (or keys over the limits); rejected /
    rejected_points: batches the server refused with a 4xx and their points;
    failed_requests: requests that failed transiently (each retry counts, heartbeats too).
    Once finish() returned True, queued == sent + lost + rejected_points + (points dropped
    over the series limit).

    The same for observation events (tuneplane.reporter), counted in events:
    events_queued, events_pending, events_sent (a duplicate the server already had
    counts as sent), events_lost (queue full or retries exhausted), events_rejected and
    events_dropped (invalid at the call site, never queued).
    """
    try:
        reporter = _reporter if _reporter is not None else _get()
        return reporter.stats()
    except Exception:
        return {}


# ---------------------------------------------------------------------------------------
# transformers integration, duck-typed: no import of transformers, no subclass.


def _scalar_hparams(args: Any) -> dict[str, Any]:
    """TrainingArguments.to_dict(), keeping numbers, booleans and strings."""
    to_dict = getattr(args, "to_dict", None)
    if not callable(to_dict):
        return {}
    raw = to_dict()
    if not isinstance(raw, Mapping):
        return {}
    kept: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, (bool, str)) or (
            isinstance(value, numbers.Real) and not isinstance(value, bool)
        ):
            kept[str(key)] = value
    return kept


class TunePlaneCallback:
    """A transformers `TrainerCallback` look-alike: pass it in `callbacks=[...]`.

    transformers calls every hook on every callback without an isinstance check, so this
    class answers all 16 of them; each returns None so it never replaces `control`.
    Only the world's rank zero reports.
    """

    def __init__(
        self,
        monitor_hardware: bool = False,
        *,
        capabilities: Iterable[str] | None = None,
        requirements: Mapping[str, Any] | None = None,
    ) -> None:
        self.monitor_hardware = monitor_hardware
        # Passed to init() on train begin: the run's capability snapshot.
        self.capabilities = capabilities
        self.requirements = requirements

    @staticmethod
    def _reports(state: Any) -> bool:
        zero = getattr(state, "is_world_process_zero", None)
        if isinstance(zero, bool):
            return zero
        return _is_rank_zero()

    @staticmethod
    def _step(state: Any) -> int | None:
        step = getattr(state, "global_step", None)
        return step if isinstance(step, int) and not isinstance(step, bool) else None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        try:
            if self._reports(state):
                init(
                    hparams=_scalar_hparams(args),
                    monitor_hardware=self.monitor_hardware,
                    capabilities=self.capabilities,
                    requirements=self.requirements,
                )
        except Exception:
            pass

    def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        try:
            logs = kwargs.get("logs")
            if self._reports(state) and isinstance(logs, Mapping):
                # A copy: `logs` is also appended to state.log_history. eval_* keys arrive
                # here too, just before on_evaluate, which reports them as validation/*.
                train = {k: v for k, v in logs.items() if not str(k).startswith("eval_")}
                if train:
                    log(train, step=self._step(state))
        except Exception:
            pass

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        try:
            metrics = kwargs.get("metrics")
            if self._reports(state) and isinstance(metrics, Mapping):
                stripped = {
                    (k[len("eval_") :] if isinstance(k, str) and k.startswith("eval_") else k): v
                    for k, v in metrics.items()
                }
                log(stripped, step=self._step(state), prefix="validation")
        except Exception:
            pass

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        try:
            if self._reports(state):
                finish()
        except Exception:
            pass

    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        return None

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        return None

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        return None

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        return None

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        return None

    def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        return None

    def on_substep_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        return None

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        return None

    def on_predict(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        return None

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        return None

    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        return None

    def on_push_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        return None
