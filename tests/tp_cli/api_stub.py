"""A STUB of the TunePlane HTTP API (docs/api.md) for the `tp` CLI tests.

It is not the server: it holds a few canned recipes and jobs in memory, mimics only the
refusals the tests need, and records every request so tests can assert what `tp` sent.
It runs `http.server` on 127.0.0.1:0 in a thread. Its SSE route deliberately drops the
connection after `events_per_connection` events (optionally mid-frame) and, on
reconnect, insists on a `Last-Event-ID` it actually sent, so resumption is tested
against a real socket.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tuneplane.contracts import errors as contract_errors

TOKEN = "tpu_test-token"
USERNAME = "alice"

CUSTOM_RECIPE: dict[str, Any] = {
    "name": "custom/custom",
    "version": "1.0.0",
    "digest": "sha256:" + "ab" * 32,
    "observability": "external",
    "entrypoint": "train.sh",
    "parameters": {},
    "operations": ["train"],
    "runtime": {"default_version": "user-managed"},
}


def make_job(
    job_id: str = "my-custom-3f9a1c", state: str = "queued", **extra: Any
) -> dict[str, Any]:
    job = {
        "id": job_id,
        "owner": USERNAME,
        "experiment": "my-custom",
        "recipe": "custom/custom",
        "operation": "train",
        "state": state,
        "exit_code": None,
        "spec": {"framework": {"name": "custom"}},
        "package": {"sha256": "cd" * 32, "size": 1234},
        "attempts": [
            {
                "number": 1,
                "state": state,
                "executor": "local",
                "exit_code": None,
                "started_at": None,
                "finished_at": None,
            }
        ],
        "created_at": "2025-01-02T03:04:05Z",
        "started_at": None,
        "finished_at": None,
        "url": f"http://console.example/jobs/{job_id}",
    }
    job.update(extra)
    return job


def make_lines(count: int, attempt: int = 1, stderr_every: int = 4) -> list[dict[str, Any]]:
    """`count` log lines; every `stderr_every`-th one is on stderr."""
    return [
        {
            "cursor": f"{attempt}.{seq}",
            "attempt": attempt,
            "seq": seq,
            "stream": "stderr" if seq % stderr_every == 0 else "stdout",
            "text": f"line {seq} of attempt {attempt}",
            "ts": 1_700_000_000.0 + seq,
        }
        for seq in range(1, count + 1)
    ]


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-cased names
    body: bytes

    def multipart(self) -> dict[str, tuple[dict[str, str], bytes]]:
        """name -> (part headers, content) of a multipart/form-data body."""
        match = re.search(r'boundary="?([^";]+)"?', self.headers.get("content-type", ""))
        assert match, f"not multipart: {self.headers.get('content-type')}"
        delimiter = b"--" + match.group(1).encode()
        parts: dict[str, tuple[dict[str, str], bytes]] = {}
        for chunk in self.body.split(delimiter)[1:]:
            if chunk.startswith(b"--"):
                break
            head, _, content = chunk.removeprefix(b"\r\n").partition(b"\r\n\r\n")
            headers = {}
            for raw in head.decode().split("\r\n"):
                name, _, value = raw.partition(":")
                headers[name.strip().lower()] = value.strip()
            name_match = re.search(r'\bname="([^"]*)"', headers.get("content-disposition", ""))
            assert name_match, headers
            parts[name_match.group(1)] = (headers, content.removesuffix(b"\r\n"))
        return parts

    def job_request(self) -> dict[str, Any]:
        return json.loads(self.multipart()["request"][1])

    def package(self) -> bytes:
        return self.multipart()["package"][1]


Handler = Callable[["ApiStub", Recorded, "_RequestHandler"], None]


@dataclass
class ApiStub:
    token: str = TOKEN
    recipes: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {"custom/custom": copy.deepcopy(CUSTOM_RECIPE)}
    )
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    validate_warnings: list[str] = field(default_factory=lambda: ["image is not pinned by digest"])
    # Logs: lines per job; the paging route returns at most `page_size` per call.
    lines: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    page_size: int = 3
    # SSE: final state per job, events per connection, and statuses to answer the next
    # stream requests with instead of streaming (e.g. [503]).
    final_states: dict[str, dict[str, Any]] = field(default_factory=dict)
    events_per_connection: int = 3
    cut_mid_frame: bool = True
    replay_from_start: bool = False  # misbehave: ignore Last-Event-ID and resend everything
    # A client that never makes progress would reconnect for minutes; fail it fast.
    max_stream_connections: int = 20
    stream_failures: list[int] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    overrides: dict[tuple[str, str], Handler] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _RequestHandler)
        self._server.daemon_threads = True
        self._server.stub = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> ApiStub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def calls(self, method: str | None = None, path: str | None = None) -> list[Recorded]:
        return [
            r
            for r in self.requests
            if (method is None or r.method == method) and (path is None or r.path == path)
        ]

    def last_event_ids(self, job_id: str) -> list[str | None]:
        return [
            r.headers.get("last-event-id")
            for r in self.calls("GET", f"/api/v1/jobs/{job_id}/logs/stream")
        ]

    # --- dispatch ----------------------------------------------------------------

    def handle(self, h: _RequestHandler) -> None:
        split = urlsplit(h.path)
        length = int(h.headers.get("Content-Length") or 0)
        rec = Recorded(
            method=h.command,
            path=split.path,
            query=parse_qs(split.query),
            headers={k.lower(): v for k, v in h.headers.items()},
            body=h.rfile.read(length) if length else b"",
        )
        with self._lock:
            self.requests.append(rec)
        if rec.headers.get("authorization") != f"Bearer {self.token}":
            return h.send_json(401, {"detail": "invalid token", "field": None})
        override = self.overrides.get((rec.method, rec.path))
        if override is not None:
            return override(self, rec, h)
        for method, pattern, route in _ROUTES:
            match = re.fullmatch(pattern, rec.path)
            if method == rec.method and match:
                return route(self, rec, h, *match.groups())
        h.send_json(404, {"detail": f"no route {rec.method} {rec.path}", "field": None})


class _RequestHandler(BaseHTTPRequestHandler):
    server: ThreadingHTTPServer

    def do_GET(self) -> None:
        self.server.stub.handle(self)  # type: ignore[attr-defined]

    def do_POST(self) -> None:
        self.server.stub.handle(self)  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep pytest output clean

    def send_json(self, status: int, body: Any) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def _error(h: _RequestHandler, status: int, detail: str, field_name: str | None = None) -> None:
    h.send_json(status, {"detail": detail, "field": field_name})


def _me(stub: ApiStub, rec: Recorded, h: _RequestHandler) -> None:
    h.send_json(200, {"username": USERNAME})


def _recipe(stub: ApiStub, rec: Recorded, h: _RequestHandler, ns: str, name: str) -> None:
    recipe = stub.recipes.get(f"{ns}/{name}")
    if recipe is None:
        return _error(h, 404, f"unknown recipe {ns}/{name}")
    h.send_json(200, recipe)


def _refusal(request: dict[str, Any]) -> str | None:
    """The few compile refusals of the real server that the tests rely on."""
    if request.get("recipe") == "custom/custom":
        if request.get("operation") in ("export", "eval"):
            return contract_errors.CUSTOM_NO_EXPORT_OR_EVAL.format(operation=request["operation"])
        if not request.get("observability_url"):
            return contract_errors.CUSTOM_OBSERVABILITY_URL_REQUIRED
    return None


def _validate(stub: ApiStub, rec: Recorded, h: _RequestHandler) -> None:
    request = rec.job_request()
    refusal = _refusal(request)
    if refusal:
        return _error(h, 400, refusal)
    spec = {
        "framework": {"name": "custom", "observability_url": request.get("observability_url")},
        "image": request.get("image"),
        "hyperparams": request.get("hyperparams"),
    }
    h.send_json(200, {"ok": True, "spec": spec, "warnings": stub.validate_warnings})


def _submit(stub: ApiStub, rec: Recorded, h: _RequestHandler) -> None:
    request = rec.job_request()
    refusal = _refusal(request)
    if refusal:
        return _error(h, 400, refusal)
    job = make_job(
        f"{request['experiment']}-3f9a1c", state="pending", experiment=request["experiment"]
    )
    stub.jobs[job["id"]] = job
    h.send_json(201, job)


def _list_jobs(stub: ApiStub, rec: Recorded, h: _RequestHandler) -> None:
    state = rec.query.get("state", [None])[0]
    results = [j for j in reversed(stub.jobs.values()) if state is None or j["state"] == state]
    h.send_json(200, {"results": results})


def _get_job(stub: ApiStub, rec: Recorded, h: _RequestHandler, job_id: str) -> None:
    job = stub.jobs.get(job_id)
    if job is None:
        return _error(h, 404, f"no job {job_id}")
    h.send_json(200, job)


def _cancel(stub: ApiStub, rec: Recorded, h: _RequestHandler, job_id: str) -> None:
    job = stub.jobs.get(job_id)
    if job is None:
        return _error(h, 404, f"no job {job_id}")
    if job["state"] in ("succeeded", "failed", "cancelled"):
        return _error(h, 409, f"job {job_id} already finished ({job['state']})")
    job["state"] = "cancelled"
    h.send_json(200, job)


def _key(cursor: str) -> tuple[int, int]:
    attempt, seq = cursor.split(".")
    return int(attempt), int(seq)


def _logs(stub: ApiStub, rec: Recorded, h: _RequestHandler, job_id: str) -> None:
    if job_id not in stub.lines:
        return _error(h, 404, f"no job {job_id}")
    after = rec.query.get("after", [None])[0]
    limit = min(int(rec.query.get("limit", ["5000"])[0]), stub.page_size)
    lines = [ln for ln in stub.lines[job_id] if after is None or _key(ln["cursor"]) > _key(after)][
        :limit
    ]
    next_cursor = lines[-1]["cursor"] if lines else after
    h.send_json(
        200, {"lines": lines, "next_cursor": next_cursor, "state": "running", "complete": False}
    )


def _frame(event: str, data: Any, event_id: str | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _stream(stub: ApiStub, rec: Recorded, h: _RequestHandler, job_id: str) -> None:
    if job_id not in stub.lines:
        return _error(h, 404, f"no job {job_id}")
    if stub.stream_failures:
        return _error(h, stub.stream_failures.pop(0), "stub: stream temporarily unavailable")
    if len(stub.calls("GET", rec.path)) > stub.max_stream_connections:
        return _error(h, 400, "stub: too many reconnects without progress")
    lines = stub.lines[job_id]
    ids = [ln["cursor"] for ln in lines]
    last = rec.headers.get("last-event-id")
    if last is not None and last not in ids:
        # The real server resumes after any cursor; the stub is stricter so that a
        # client sending an id it never received fails the test loudly.
        return _error(h, 400, f"stub: Last-Event-ID {last!r} was never sent")
    start = ids.index(last) + 1 if last is not None and not stub.replay_from_start else 0
    h.send_response(200)
    h.send_header("Content-Type", "text/event-stream")
    h.send_header("Cache-Control", "no-cache")
    h.end_headers()
    h.wfile.write(b"retry: 10\n\n: keepalive\n\n")
    end = (
        start + stub.events_per_connection
        if last is None or not stub.replay_from_start
        else len(lines)
    )
    batch = lines[start:end]
    for line in batch:
        h.wfile.write(_frame("log", line, line["cursor"]))
        h.wfile.write(b": keepalive\n\n")
    if start + len(batch) < len(lines):
        if stub.cut_mid_frame:
            # Half of the next frame, then the connection drops: it must not be printed.
            following = lines[start + len(batch)]
            h.wfile.write(_frame("log", following, following["cursor"])[:25])
        h.wfile.flush()
        h.close_connection = True
        return
    h.wfile.write(
        _frame("state", stub.final_states.get(job_id, {"state": "succeeded", "exit_code": 0}))
    )
    h.wfile.write(_frame("end", {}))
    h.wfile.flush()


_ROUTES: list[tuple[str, str, Callable[..., None]]] = [
    ("GET", r"/api/v1/me", _me),
    ("GET", r"/api/v1/recipes/([^/]+)/([^/]+)", _recipe),
    ("POST", r"/api/v1/jobs/validate", _validate),
    ("POST", r"/api/v1/jobs", _submit),
    ("GET", r"/api/v1/jobs", _list_jobs),
    ("GET", r"/api/v1/jobs/([^/]+)", _get_job),
    ("POST", r"/api/v1/jobs/([^/]+)/cancel", _cancel),
    ("GET", r"/api/v1/jobs/([^/]+)/logs", _logs),
    ("GET", r"/api/v1/jobs/([^/]+)/logs/stream", _stream),
]
