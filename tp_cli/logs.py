"""`tp job logs`: paging the stored lines, and following the live SSE stream.

Following must survive dropped connections and server restarts without repeating or
losing a line: it resumes with `Last-Event-ID: <last id>` (docs/api.md, "Live logs"),
and additionally skips any line whose cursor is not after the last one printed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import requests
import urllib3

from tp_cli.client import ApiClient, path_part
from tp_cli.errors import NetworkError, ServerError, TpError

PAGE_LIMIT = 1000
MAX_BACKOFF_SECONDS = 5.0
DEFAULT_RETRY_SECONDS = 0.5
# How long to keep reconnecting after the stream was last healthy before giving up.
RETRY_WINDOW_SECONDS = 600.0
_READ_SIZE = 64 * 1024


class LineSink(Protocol):
    def __call__(self, line: dict[str, Any]) -> None: ...


@dataclass
class SseEvent:
    event: str
    data: str
    id: str | None  # the `id:` of this event, None when it carried none


@dataclass
class SseParser:
    """Incremental text/event-stream parser (WHATWG HTML, "Server-sent events").

    Lines end in LF or CRLF; comments (`: keepalive`) are ignored; an event is dispatched
    at a blank line, so a frame cut by a dropped connection is never half-delivered.
    """

    retry_ms: int | None = None
    _buffer: bytes = b""
    _event: str = ""
    _data: list[str] = field(default_factory=list)
    _id: str | None = None
    _has_fields: bool = False

    def feed(self, chunk: bytes) -> list[SseEvent]:
        self._buffer += chunk
        events: list[SseEvent] = []
        while True:
            newline = self._buffer.find(b"\n")
            if newline < 0:
                return events
            raw, self._buffer = self._buffer[:newline], self._buffer[newline + 1 :]
            # Split before decoding, so a UTF-8 character cut between chunks stays whole.
            line = raw.rstrip(b"\r").decode("utf-8", "replace")
            event = self._line(line)
            if event is not None:
                events.append(event)

    def _line(self, line: str) -> SseEvent | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry":
            if value.isdigit():
                self.retry_ms = int(value)
            return None
        else:
            return None  # unknown fields are ignored by the standard
        self._has_fields = True
        return None

    def _dispatch(self) -> SseEvent | None:
        if not self._has_fields:
            return None
        event = SseEvent(event=self._event or "message", data="\n".join(self._data), id=self._id)
        self._event, self._data, self._id, self._has_fields = "", [], None, False
        return event


def cursor_key(cursor: object) -> tuple[int, int] | None:
    """`<attempt>.<seq>` as a sortable pair; None when it has another shape."""
    if not isinstance(cursor, str):
        return None
    attempt, sep, seq = cursor.partition(".")
    if not sep or not attempt.isdigit() or not seq.isdigit():
        return None
    return int(attempt), int(seq)


def page_logs(client: ApiClient, job_id: str, emit: LineSink) -> int:
    """Print every stored line once, page by page; returns how many were printed."""
    path = f"api/v1/jobs/{path_part(job_id)}/logs"
    after: str | None = None
    printed = 0
    while True:
        params: dict[str, str | int] = {"limit": PAGE_LIMIT}
        if after is not None:
            params["after"] = after
        page = client.get(path, params=params)
        lines = page.get("lines") or []
        for line in lines:
            emit(line)
        printed += len(lines)
        next_cursor = page.get("next_cursor")
        # Stop when a page is empty, or when the cursor would not move (a server bug
        # must not turn into an endless loop of the same page).
        if not lines or not next_cursor or next_cursor == after:
            return printed
        after = str(next_cursor)


def _chunks(resp: requests.Response) -> Iterator[bytes]:
    # read1 returns whatever has arrived; iter_content(chunk_size=N) would wait for N
    # bytes and hold back live lines.
    read1 = getattr(resp.raw, "read1", None)
    if read1 is None:  # urllib3 < 2
        yield from resp.iter_content(chunk_size=1)
        return
    while True:
        chunk = read1(_READ_SIZE, decode_content=True)
        if not chunk:
            return
        yield chunk


@dataclass
class FollowResult:
    state: str | None
    exit_code: int | None
    lines: int


# Failures after which following reconnects instead of giving up: the connection or a
# read broke, timed out, or the server answered 5xx.
# (requests.RequestException is an OSError; urllib3's read errors are not.)
_TRANSIENT = (requests.RequestException, urllib3.exceptions.HTTPError, OSError)


def follow_logs(
    client: ApiClient,
    job_id: str,
    emit: LineSink,
    *,
    on_retry: Callable[[str, float, int], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    retry_window: float = RETRY_WINDOW_SECONDS,
) -> FollowResult:
    """Print live lines until the server sends `event: end`; returns the final state."""
    path = f"api/v1/jobs/{path_part(job_id)}/logs/stream"
    last_id: str | None = None
    last_key: tuple[int, int] | None = None
    state: dict[str, Any] = {}
    printed = 0
    retry_seconds = DEFAULT_RETRY_SECONDS
    failing_since: float | None = None
    failures = 0
    while True:
        headers = {"Last-Event-ID": last_id} if last_id is not None else {}
        try:
            with client.stream(path, headers) as resp:
                parser = SseParser()
                for chunk in _chunks(resp):
                    # Bytes arrived (keep-alives count): the server is up again, so the
                    # give-up window and the backoff start over at the next failure.
                    failing_since, failures = None, 0
                    for event in parser.feed(chunk):
                        if event.event == "log":
                            line = json.loads(event.data)
                            key = cursor_key(line.get("cursor"))
                            if key is None or last_key is None or key > last_key:
                                emit(line)
                                printed += 1
                                last_key = key if key is not None else last_key
                        elif event.event == "state":
                            state = json.loads(event.data)
                        elif event.event == "end":
                            return FollowResult(
                                state=state.get("state"),
                                exit_code=state.get("exit_code"),
                                lines=printed,
                            )
                        # Only after the event was handled: a resume must not skip it.
                        if event.id is not None:
                            last_id = event.id
                    if parser.retry_ms is not None:  # the server's `retry:` hint, capped
                        retry_seconds = min(parser.retry_ms / 1000.0, MAX_BACKOFF_SECONDS)
            reason = "the server closed the stream"
        except ValueError as exc:  # JSON in a frame; not transient, and not ours to guess
            raise TpError(f"the server sent an unreadable log event: {exc}") from None
        except TpError as exc:
            if not isinstance(exc, (NetworkError, ServerError)):
                raise  # 401, 403, 404: reconnecting cannot help
            reason = exc.message
        except _TRANSIENT as exc:
            reason = f"connection lost ({type(exc).__name__})"
        now = clock()
        if failing_since is None:
            failing_since = now
        elif now - failing_since > retry_window:
            raise TpError(
                f"gave up following job {job_id}: {reason}; the server at {client.server} "
                f"did not answer for {int(retry_window)} s"
            )
        delay = min(retry_seconds * (2**failures), MAX_BACKOFF_SECONDS)
        failures += 1
        if on_retry is not None:
            on_retry(reason, delay, failures)
        sleep(delay)
