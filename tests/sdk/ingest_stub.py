"""A stub of the TunePlane ingest API for the SDK and runner tests.

It is NOT the server: it keeps what it receives in memory, answers the routes of
docs/api.md ("Ingest API") the way the contract says (a re-sent log seq is ignored,
never duplicated; an over-limit scalar or event batch is refused whole with 413; the
first copy of an event ID wins), and lets a test misbehave on purpose: fail the next N
requests, hang up after storing a batch, refuse every call to a route, hold every request
until released, or stop and come back on the same port.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tuneplane.contracts import ingest, limits
from tuneplane.contracts.observations import ObservationError, validate_event

PREFIX = "/" + ingest.INGEST_PREFIX + "/runs/"
HOLD_MAX_SECONDS = 10.0  # a held request never outlives a forgotten release()


@dataclass
class Recorded:
    method: str
    route: str
    body: Any
    status: int  # 0: the stub hung up without answering


class IngestStub:
    """In-memory stub of the ingest routes of one run; see the module docstring."""

    def __init__(
        self, run_id: str = "run-1", token: str = "tpi_stub-token", package: bytes = b""
    ) -> None:
        self.run_id = run_id
        self.token = token
        self.package = package
        self.lock = threading.RLock()  # re-entrant: wait_for() predicates call the views below
        self.requests: list[Recorded] = []
        self.lines: dict[int, dict[str, Any]] = {}  # seq -> line, first accepted wins
        self.line_conflicts: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self.resent_seqs: list[int] = []
        self.points: list[dict[str, Any]] = []
        self.scalar_batch_sizes: list[int] = []
        self.lifecycle: list[dict[str, Any]] = []
        self.inits: list[dict[str, Any]] = []
        self.events: dict[str, dict[str, Any]] = {}  # event_id -> event, first accepted wins
        self.event_batch_sizes: list[int] = []
        self.duplicate_event_ids: list[str] = []
        self.heartbeats: list[dict[str, Any]] = []
        # Cleared by hold(): requests wait (up to HOLD_MAX_SECONDS) until release().
        self._gate = threading.Event()
        self._gate.set()
        self.held = 0  # requests waiting at the gate now
        self.cancel_requested = False
        self.route_status: dict[str, int] = {}  # route -> status answered to every call
        self._fail: list[tuple[int, str | None]] = []  # (status, route or None) for the next calls
        self._hang_up_after_store = 0  # non-empty log batches stored then left unanswered
        self.port = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- control -------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{ingest.INGEST_PREFIX}"

    @property
    def package_sha256(self) -> str:
        return hashlib.sha256(self.package).hexdigest()

    def start(self) -> IngestStub:
        handler = _make_handler(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def restart(self) -> None:
        """Come back on the same port, with everything stored so far (a server restart)."""
        self.stop()
        self.start()

    def fail_next(self, count: int, status: int = 503, route: str | None = None) -> None:
        with self.lock:
            self._fail.extend([(status, route)] * count)

    def hang_up_after_store(self, count: int) -> None:
        with self.lock:
            self._hang_up_after_store += count

    def hold(self) -> None:
        """Every request from now on waits until release(): a server that stopped answering
        but still accepts connections, for tests that need the sender stuck mid-request."""
        self._gate.clear()

    def release(self) -> None:
        self._gate.set()

    def wait_at_gate(self) -> None:
        with self.lock:
            self.held += 1
        try:
            self._gate.wait(HOLD_MAX_SECONDS)
        finally:
            with self.lock:
                self.held -= 1

    def pending_failures(self) -> int:
        with self.lock:
            return len(self._fail)

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if predicate():
                    return True
            time.sleep(0.02)
        with self.lock:
            return predicate()

    # -- views of what arrived ---------------------------------------------------------

    def stored_lines(self) -> list[dict[str, Any]]:
        with self.lock:
            return [self.lines[seq] for seq in sorted(self.lines)]

    def texts(self, stream: str | None = None) -> list[str]:
        return [
            line["text"]
            for line in self.stored_lines()
            if stream is None or line["stream"] == stream
        ]

    def calls(self, route: str) -> list[Recorded]:
        with self.lock:
            return [r for r in self.requests if r.route == route]

    # -- request handling (called from server threads) --------------------------------

    def _take_failure(self, route: str) -> int | None:
        with self.lock:
            for index, (status, only) in enumerate(self._fail):
                if only is None or only == route:
                    del self._fail[index]
                    return status
        return None

    def handle(self, method: str, route: str, body: Any) -> tuple[int, Any, dict[str, str]]:
        """(status, JSON or bytes, headers); status 0 means hang up without an answer."""
        forced = self._take_failure(route) or self.route_status.get(route)
        if forced:
            return forced, {"detail": "stub failure", "field": None}, {}
        if method == "GET" and route == ingest.ROUTE_PACKAGE:
            return 200, self.package, {"X-Package-Sha256": self.package_sha256}
        if method != "POST" or not isinstance(body, dict):
            return 400, {"detail": "bad request", "field": None}, {}
        if route == ingest.ROUTE_LOGS:
            return self._logs(body)
        if route == ingest.ROUTE_SCALARS:
            return self._scalars(body)
        if route == ingest.ROUTE_LIFECYCLE:
            with self.lock:
                self.lifecycle.append(body)
            return 200, {"state": "running" if body.get("event") == "started" else "finished"}, {}
        if route == ingest.ROUTE_INIT:
            with self.lock:
                self.inits.append(body)
            return 200, {"ok": True}, {}
        if route == ingest.ROUTE_EVENTS:
            return self._events(body)
        if route == ingest.ROUTE_HEARTBEAT:
            sdk = body.get("sdk")
            if not isinstance(sdk, dict) or not set(sdk) <= set(ingest.HEARTBEAT_COUNTERS):
                return 400, {"detail": "unknown counters", "field": "sdk"}, {}
            with self.lock:
                self.heartbeats.append(body)
            return 200, {"ok": True}, {}
        return 404, {"detail": "unknown route", "field": None}, {}

    def _logs(self, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        lines = body.get("lines")
        if not isinstance(lines, list) or len(lines) > limits.LOG_BATCH_MAX_LINES:
            return 413, {"detail": "too many lines", "field": "lines"}, {}
        for line in lines:
            if (
                not isinstance(line.get("seq"), int)
                or line["seq"] < 1
                or line.get("stream") not in ingest.LOG_STREAMS
                or not isinstance(line.get("text"), str)
                or len(line["text"]) > limits.LOG_LINE_MAX_CHARS
            ):
                return 400, {"detail": f"bad line {line!r:.200}", "field": "lines"}, {}
        with self.lock:
            for line in lines:
                seen = self.lines.get(line["seq"])
                if seen is None:
                    self.lines[line["seq"]] = line
                else:
                    self.resent_seqs.append(line["seq"])
                    if (seen["text"], seen["stream"]) != (line["text"], line["stream"]):
                        self.line_conflicts.append((seen, line))
            hang_up = bool(lines) and self._hang_up_after_store > 0
            if hang_up:
                self._hang_up_after_store -= 1
            acked = max((line["seq"] for line in lines), default=max(self.lines, default=0))
            cancel = self.cancel_requested
        if hang_up:
            return 0, None, {}
        return 200, {"acked_through": acked, "cancel_requested": cancel}, {}

    def _scalars(self, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        points = body.get("points")
        if not isinstance(points, list):
            return 400, {"detail": "points must be a list", "field": "points"}, {}
        if len(points) > limits.SCALAR_BATCH_MAX_POINTS:
            return 413, {"detail": "too many points", "field": "points"}, {}
        for point in points:
            try:
                ingest.decode_value(point["value"])
                assert (
                    isinstance(point["key"], str)
                    and 0 < len(point["key"]) <= limits.SCALAR_KEY_MAX_CHARS
                )
                assert isinstance(point["step"], int) and not isinstance(point["step"], bool)
            except (KeyError, ValueError, AssertionError, TypeError):
                return 400, {"detail": f"bad point {point!r:.200}", "field": "points"}, {}
        with self.lock:
            self.points.extend(points)
            self.scalar_batch_sizes.append(len(points))
        return 200, {"accepted": len(points)}, {}

    def _events(self, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        events = body.get("events")
        if not isinstance(events, list):
            return 400, {"detail": "events must be a list", "field": "events"}, {}
        if len(events) > limits.EVENT_BATCH_MAX:
            return 413, {"detail": "too many events", "field": "events"}, {}
        try:  # one bad event refuses the batch whole, as the server does
            checked = [validate_event(e, f"events[{i}]") for i, e in enumerate(events)]
        except ObservationError as exc:
            return 400, {"detail": str(exc), "field": exc.field}, {}
        accepted = duplicates = 0
        with self.lock:
            self.event_batch_sizes.append(len(checked))
            for event in checked:
                if event["event_id"] in self.events:
                    duplicates += 1
                    self.duplicate_event_ids.append(event["event_id"])
                else:
                    accepted += 1
                    self.events[event["event_id"]] = event
        return 200, {"accepted": accepted, "duplicates": duplicates}, {}


def _make_handler(stub: IngestStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def _serve(self, method: str) -> None:
            if not self.path.startswith(PREFIX):
                self._answer(404, {"detail": "not found", "field": None}, {})
                return
            run_id, _, route = self.path[len(PREFIX) :].partition("/")
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            stub.wait_at_gate()
            if self.headers.get("Authorization") != f"Bearer {stub.token}" or run_id != stub.run_id:
                status, answer, headers = (
                    401,
                    {"detail": "ingest token is not valid for this run", "field": None},
                    {},
                )
            else:
                status, answer, headers = stub.handle(method, route, body)
            with stub.lock:
                stub.requests.append(Recorded(method, route, body, status))
            if status == 0:
                self.close_connection = True  # stored, but the client never hears back
                return
            self._answer(status, answer, headers)

        def _answer(self, status: int, answer: Any, headers: dict[str, str]) -> None:
            data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
            self.send_response(status)
            self.send_header(
                "Content-Type",
                "application/octet-stream" if isinstance(answer, bytes) else "application/json",
            )
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

    return Handler
