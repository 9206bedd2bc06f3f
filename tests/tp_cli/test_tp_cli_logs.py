"""`tp job logs`: paging stored lines, and following the SSE stream across drops."""

from __future__ import annotations

import pytest
from click.testing import Result

from tp_cli.client import ApiClient
from tp_cli.config import Credentials
from tp_cli.errors import TpError
from tp_cli.logs import SseEvent, SseParser, cursor_key, follow_logs

from .api_stub import TOKEN, ApiStub, make_job, make_lines
from .tp_testlib import run_tp

JOB = "my-custom-3f9a1c"


def printed(result: Result, stream: str) -> list[str]:
    return (result.stdout if stream == "stdout" else result.stderr).splitlines()


def expected(lines: list[dict], stream: str) -> list[str]:
    return [line["text"] for line in lines if line["stream"] == stream]


@pytest.fixture(autouse=True)
def quick_reconnects(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before the stub's `retry: 10` arrives (a refused connection), the client's own
    # first delay applies; shorten it so the suite stays fast.
    monkeypatch.setattr("tp_cli.logs.DEFAULT_RETRY_SECONDS", 0.01)


@pytest.fixture
def job_with_lines(logged_in: ApiStub) -> list[dict]:
    lines = make_lines(8)
    logged_in.lines[JOB] = lines
    logged_in.jobs[JOB] = make_job(JOB, state="succeeded", exit_code=0)
    return lines


def test_logs_pages_until_no_more_lines_printing_each_once(
    logged_in: ApiStub, job_with_lines: list[dict]
) -> None:
    result = run_tp("job", "logs", JOB)

    assert result.exit_code == 0, result.output
    assert printed(result, "stdout") == expected(job_with_lines, "stdout")
    assert printed(result, "stderr") == expected(job_with_lines, "stderr")  # stderr lines on stderr
    afters = [
        c.query.get("after", [None])[0] for c in logged_in.calls("GET", f"/api/v1/jobs/{JOB}/logs")
    ]
    assert afters == [None, "1.3", "1.6", "1.8"]  # pages of 3, then an empty page


def test_follow_resumes_after_dropped_connections_without_duplicates_or_gaps(
    logged_in: ApiStub, job_with_lines: list[dict]
) -> None:
    result = run_tp("job", "logs", JOB, "--follow")

    assert result.exit_code == 0, result.output
    assert printed(result, "stdout") == expected(job_with_lines, "stdout")
    assert printed(result, "stderr") == [
        *expected(job_with_lines, "stderr"),
        f"job {JOB} finished: succeeded (exit code 0)",
    ]
    # 3 events a connection, each drop cut mid-frame; resumed from the last whole event.
    assert logged_in.last_event_ids(JOB) == [None, "1.3", "1.6"]


def test_follow_never_prints_a_line_twice_even_if_the_server_replays(
    logged_in: ApiStub, job_with_lines: list[dict]
) -> None:
    logged_in.events_per_connection = 5
    logged_in.replay_from_start = True

    result = run_tp("job", "logs", JOB, "--follow")

    assert result.exit_code == 0, result.output
    assert logged_in.last_event_ids(JOB) == [None, "1.5"]
    assert printed(result, "stdout") == expected(job_with_lines, "stdout")
    assert printed(result, "stderr")[:-1] == expected(job_with_lines, "stderr")


def test_follow_exits_1_when_the_job_failed(logged_in: ApiStub, job_with_lines: list[dict]) -> None:
    logged_in.final_states[JOB] = {"state": "failed", "exit_code": 3}

    result = run_tp("job", "logs", JOB, "--follow")

    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == f"job {JOB} finished: failed (exit code 3)"
    assert printed(result, "stdout") == expected(job_with_lines, "stdout")


def test_follow_reconnects_after_server_errors(
    logged_in: ApiStub, job_with_lines: list[dict]
) -> None:
    logged_in.stream_failures = [503, 502]  # the first two connections are refused

    result = run_tp("job", "logs", JOB, "--follow")

    assert result.exit_code == 0, result.output
    assert printed(result, "stdout") == expected(job_with_lines, "stdout")
    assert logged_in.last_event_ids(JOB) == [None, None, None, "1.3", "1.6"]
    assert "reconnecting to" in result.stderr  # the second failure in a row is reported


def test_follow_stops_at_once_on_a_client_error(logged_in: ApiStub) -> None:
    result = run_tp("job", "logs", "nope", "--follow")

    assert result.exit_code == 1
    assert result.stderr == "Error: no job nope\n"
    assert len(logged_in.calls("GET", "/api/v1/jobs/nope/logs/stream")) == 1


def test_follow_asks_for_the_job_when_the_stream_ends_without_a_state(
    logged_in: ApiStub, job_with_lines: list[dict]
) -> None:
    logged_in.events_per_connection = 100
    logged_in.jobs[JOB] = make_job(JOB, state="cancelled")

    def stream_without_state(stub: ApiStub, rec: object, h: object) -> None:
        h.send_response(200)  # type: ignore[attr-defined]
        h.send_header("Content-Type", "text/event-stream")  # type: ignore[attr-defined]
        h.end_headers()  # type: ignore[attr-defined]
        h.wfile.write(b"event: end\ndata: {}\n\n")  # type: ignore[attr-defined]

    logged_in.overrides[("GET", f"/api/v1/jobs/{JOB}/logs/stream")] = stream_without_state

    result = run_tp("job", "logs", JOB, "--follow")

    assert result.exit_code == 1
    assert result.stderr == f"job {JOB} finished: cancelled (exit code -)\n"


def test_follow_gives_up_after_the_retry_window(stub: ApiStub) -> None:
    stub.lines[JOB] = make_lines(2)
    stub.stream_failures = [503] * 1000
    now = [0.0]
    delays: list[float] = []

    def sleep(seconds: float) -> None:
        delays.append(seconds)
        now[0] += seconds

    client = ApiClient(Credentials(server=stub.url, token=TOKEN))
    with pytest.raises(TpError, match=f"gave up following job {JOB}"):
        follow_logs(
            client, JOB, lambda line: None, sleep=sleep, clock=lambda: now[0], retry_window=30
        )

    assert max(delays) == 5.0  # backoff capped at ~5 s
    assert delays == sorted(delays)
    assert 30 <= sum(delays) <= 40


def test_the_parser_handles_frames_split_anywhere() -> None:
    stream = (
        b"retry: 2000\r\n\r\n: keepalive\n\n"
        b'id: 1.1\nevent: log\ndata: {"a":\ndata: 1}\n\n'
        b"event: state\ndata: {}\n\n"
        b"id: 1.2\nevent: log\ndata: \xc3\xa9\n\n"
        b"id: 1.3\nevent: log\ndata: cut"
    )
    parser = SseParser()
    events: list[SseEvent] = []
    for i in range(len(stream)):  # one byte at a time
        events.extend(parser.feed(stream[i : i + 1]))

    assert events == [
        SseEvent(event="log", data='{"a":\n1}', id="1.1"),
        SseEvent(event="state", data="{}", id=None),
        SseEvent(event="log", data="\u00e9", id="1.2"),
    ]  # the unterminated last frame is never dispatched
    assert parser.retry_ms == 2000


def test_cursor_keys_order_attempts_before_sequence_numbers() -> None:
    assert cursor_key("1.10") == (1, 10)
    assert sorted(["2.1", "1.10", "1.999", "1.9"], key=lambda c: cursor_key(c) or (0, 0)) == [
        "1.9",
        "1.10",
        "1.999",
        "2.1",
    ]
    assert cursor_key("bogus") is None
