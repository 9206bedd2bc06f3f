"""Forwarding train.sh's stdout and stderr to the `logs` ingest route.

The guarantee (docs/api.md, `logs`): every line reaches the control plane exactly once,
in order, even when the control plane restarts mid-run. The runner numbers lines itself
(one `seq` per attempt across both streams, from 1), keeps each line until a response
acknowledges it, and re-sends unacknowledged lines after any failure; the server ignores a
seq it already has. So a lost response costs a re-send, never a duplicate, and a failed
request costs a retry, never a gap.
"""

from __future__ import annotations

import codecs
import json
import os
import selectors
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import IO, Any

from .._http import IngestClient, IngestError
from ..contracts import ingest, limits
from .config import diag

# Room for {"lines": [...]}; the per-line overhead is counted per line.
_ENVELOPE_BYTES = 1024
_LINE_OVERHEAD_BYTES = 96  # {"seq":..,"stream":"stdout","text":..,"ts":..} around the text

# Lines held while the control plane is unreachable. Past this the reader stops reading,
# so train.sh blocks on a full pipe instead of the runner running out of memory: slower
# training beats a lost line or an OOM-killed job.
BUFFER_MAX_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class LogLine:
    seq: int
    stream: str
    text: str
    ts: float
    size: int  # bytes this line adds to a request body

    def payload(self) -> dict[str, Any]:
        return {"seq": self.seq, "stream": self.stream, "text": self.text, "ts": self.ts}


def split_text(text: str, max_bytes: int = limits.LOG_LINE_MAX_CHARS) -> list[str]:
    """Cut a line into pieces of at most `max_bytes` UTF-8 bytes, at character boundaries.

    The route takes at most 16 KiB of text per line; longer lines are split, never
    dropped or truncated. Bounding the bytes also bounds the characters, whichever of the
    two the server counts.
    """
    if len(text) * 4 <= max_bytes:
        return [text]
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return [text]
    pieces: list[str] = []
    start = 0
    while start < len(encoded):
        end = min(start + max_bytes, len(encoded))
        # Back off to the first byte of a character (continuation bytes are 0b10xxxxxx).
        while end < len(encoded) and (encoded[end] & 0xC0) == 0x80:
            end -= 1
        pieces.append(encoded[start:end].decode("utf-8"))
        start = end
    return pieces


class LogBuffer:
    """Lines not yet acknowledged, in seq order. Shared by the reader and the sender."""

    def __init__(self, max_bytes: int = BUFFER_MAX_BYTES) -> None:
        self._cond = threading.Condition()
        self._lines: deque[LogLine] = deque()
        self._next_seq = 1
        self._bytes = 0
        self._max_bytes = max_bytes
        self.closed = False  # no more lines will be added

    def add(self, stream: str, text: str) -> int:
        size = len(json.dumps(text, ensure_ascii=False).encode("utf-8")) + _LINE_OVERHEAD_BYTES
        with self._cond:
            seq = self._next_seq
            self._next_seq += 1
            self._lines.append(LogLine(seq, stream, text, time.time(), size))
            self._bytes += size
            return seq

    def peek(self, max_lines: int, max_bytes: int) -> tuple[list[LogLine], bool]:
        """The oldest unacknowledged lines that fit one request (at least one line), and
        whether more lines are waiting behind them."""
        batch: list[LogLine] = []
        budget = max_bytes - _ENVELOPE_BYTES
        with self._cond:
            for line in self._lines:
                if len(batch) >= max_lines or (batch and line.size > budget):
                    break
                batch.append(line)
                budget -= line.size
            return batch, len(self._lines) > len(batch)

    def ack(self, through: int) -> None:
        with self._cond:
            while self._lines and self._lines[0].seq <= through:
                self._bytes -= self._lines.popleft().size
            self._cond.notify_all()

    def wait_for_room(self, timeout: float) -> bool:
        with self._cond:
            if self._bytes < self._max_bytes:
                return True
            self._cond.wait(timeout)
            return self._bytes < self._max_bytes

    def close(self) -> None:
        with self._cond:
            self.closed = True

    def __len__(self) -> int:
        return len(self._lines)

    @property
    def last_seq(self) -> int:
        return self._next_seq - 1


class _StreamSplitter:
    """Bytes of one stream -> complete lines, decoding UTF-8 across read boundaries."""

    def __init__(self, stream: str, buffer: LogBuffer) -> None:
        self.stream = stream
        self._buffer = buffer
        # errors="replace": a job's output is shown, not parsed; a stray byte must not
        # cost the line. The incremental decoder keeps a character split across two
        # reads whole.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""

    def feed(self, data: bytes, final: bool = False) -> None:
        text = self._pending + self._decoder.decode(data, final)
        parts = text.split("\n")
        self._pending = parts.pop()
        for part in parts:
            self._emit(part.removesuffix("\r"))
        # A line without a newline yet: ship the full-size pieces now, keep the tail.
        if len(self._pending) * 4 > limits.LOG_LINE_MAX_CHARS:
            pieces = split_text(self._pending)
            self._pending = pieces.pop()
            for piece in pieces:
                self._buffer.add(self.stream, piece)
        if final and self._pending:
            self._emit(self._pending)
            self._pending = ""

    def _emit(self, line: str) -> None:
        for piece in split_text(line):
            self._buffer.add(self.stream, piece)


def _write_all(fd: int, data: bytes) -> None:
    """Echo to the runner's own stdout/stderr (kubectl logs); failures are ignored."""
    view = memoryview(data)
    try:
        while view:
            written = os.write(fd, view)
            view = view[written:]
    except OSError:
        pass


class OutputReader(threading.Thread):
    """Reads the child's stdout and stderr pipes into the buffer, in arrival order.

    One thread with a selector serves both pipes, so lines get their seq in the order the
    runner saw them, and a pipe held open by an orphaned grandchild can be abandoned
    without a thread stuck in read() forever.
    """

    def __init__(self, buffer: LogBuffer, pipes: Iterable[tuple[str, IO[bytes], int]]) -> None:
        super().__init__(name="tuneplane-runner-reader", daemon=True)
        self._buffer = buffer
        self._pipes = list(pipes)  # (stream name, pipe, echo fd)
        self._abandon = threading.Event()

    def abandon(self) -> None:
        """Stop after what is readable right now: train.sh is gone but a pipe stays open."""
        self._abandon.set()

    def run(self) -> None:
        selector = selectors.DefaultSelector()
        splitters: dict[int, tuple[_StreamSplitter, int]] = {}
        for stream, pipe, echo_fd in self._pipes:
            fd = pipe.fileno()
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
            splitters[fd] = (_StreamSplitter(stream, self._buffer), echo_fd)
        try:
            while selector.get_map():
                if not self._buffer.wait_for_room(0.2) and not self._abandon.is_set():
                    continue  # backpressure: the control plane is behind, train.sh waits
                events = selector.select(0.2)
                if not events and self._abandon.is_set():
                    break
                for key, _mask in events:
                    fd = key.fd
                    splitter, echo_fd = splitters[fd]
                    try:
                        data = os.read(fd, 65536)
                    except BlockingIOError:
                        continue
                    except OSError:
                        data = b""
                    if data:
                        _write_all(echo_fd, data)
                        splitter.feed(data)
                    else:
                        splitter.feed(b"", final=True)
                        selector.unregister(fd)
        finally:
            for open_key in list(selector.get_map().values()):
                # An abandoned pipe's last partial line.
                splitters[open_key.fd][0].feed(b"", final=True)
            selector.close()
            self._buffer.close()


class LogShipper(threading.Thread):
    """Posts buffered lines in seq order, one request in flight, retrying forever until
    `finish()` gives it a deadline. Empty batches are heartbeats; a response asking for
    cancellation calls `on_cancel`."""

    def __init__(
        self,
        client: IngestClient,
        buffer: LogBuffer,
        *,
        interval: float,
        heartbeat: float,
        backoff_max: float,
        on_cancel: Callable[[], None],
    ) -> None:
        super().__init__(name="tuneplane-runner-logs", daemon=True)
        self._client = client
        self._buffer = buffer
        self._interval = interval
        self._heartbeat = heartbeat
        self._backoff_max = backoff_max
        self._on_cancel = on_cancel
        self._wake = threading.Event()
        self._deadline: float | None = None  # set by finish(): drain, then stop
        self.failed_requests = 0
        self.cancel_requested = False

    def finish(self, deadline: float) -> bool:
        """Send everything left (the reader is done), until `deadline` (monotonic).

        Returns True when every line was acknowledged.
        """
        self._deadline = deadline
        self._wake.set()
        if self.is_alive():
            self.join(max(0.0, deadline - time.monotonic()) + 5.0)
        return len(self._buffer) == 0

    def run(self) -> None:
        max_lines = limits.LOG_BATCH_MAX_LINES
        backoff = self._interval
        last_request = time.monotonic()
        while True:
            deadline = self._deadline
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return
            final = deadline is not None and self._buffer.closed
            batch, more = self._buffer.peek(max_lines, limits.LOG_BATCH_MAX_BYTES)
            if final and not batch:
                return
            if batch or now - last_request >= self._heartbeat:
                last_request = now
                try:
                    answer = self._client.post_json(
                        ingest.ROUTE_LOGS, {"lines": [line.payload() for line in batch]}
                    )
                except IngestError as exc:
                    self.failed_requests += 1
                    if exc.status in (400, 413) and max_lines > 1:
                        # The server refused the batch as a whole: smaller ones may pass.
                        max_lines = max(1, min(max_lines, len(batch)) // 2)
                    if self.failed_requests == 1 or self.failed_requests % 20 == 0:
                        pending = len(self._buffer)
                        diag(f"log upload failed ({exc}); keeping {pending} lines, retrying")
                    self._sleep(backoff, deadline)
                    backoff = min(max(backoff, 0.05) * 2, self._backoff_max)
                    continue
                backoff = self._interval
                max_lines = limits.LOG_BATCH_MAX_LINES
                self._settle(batch, answer)
                if more:
                    continue  # a backlog beyond one request: send the next batch at once
            if final:
                continue
            self._wake.wait(self._interval)
            self._wake.clear()

    def _settle(self, batch: list[LogLine], answer: Any) -> None:
        if batch:
            sent_through = batch[-1].seq
            acked = answer.get("acked_through") if isinstance(answer, dict) else None
            if isinstance(acked, int) and not isinstance(acked, bool):
                # Never trust an ack past what this request carried; a re-send of a line
                # the server already has is harmless, a line dropped unsent is not.
                through = min(acked, sent_through)
            else:
                through = sent_through  # a 2xx without the field: the batch was stored
            self._buffer.ack(through)
        if (
            isinstance(answer, dict)
            and answer.get("cancel_requested") is True
            and not self.cancel_requested
        ):
            self.cancel_requested = True
            self._on_cancel()

    def _sleep(self, seconds: float, deadline: float | None) -> None:
        if deadline is not None:
            seconds = min(seconds, max(0.0, deadline - time.monotonic()))
        time.sleep(seconds)
