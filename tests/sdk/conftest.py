"""Fixtures for the SDK tests: the ingest stub and a clean, fast `tuneplane.report`.

No Django here: the SDK goes into training images without it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator

import pytest
from ingest_stub import IngestStub
from tuneplane import report
from tuneplane.contracts import env


@pytest.fixture
def stub() -> Iterator[IngestStub]:
    server = IngestStub().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No TUNEPLANE_* or rank variable leaks in from the shell running the tests."""
    for name in list(os.environ):
        if name.startswith("TUNEPLANE_") or name in ("RANK", "LOCAL_RANK"):
            monkeypatch.delenv(name)


@pytest.fixture
def fast_report(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Short intervals so delivery and retries happen in milliseconds, and a reporter
    that reads the environment afresh for each test."""
    monkeypatch.setattr(report, "FLUSH_INTERVAL_SECONDS", 0.05)
    monkeypatch.setattr(report, "RETRY_BACKOFF_SECONDS", 0.01)
    monkeypatch.setattr(report, "RETRY_BACKOFF_MAX_SECONDS", 0.05)
    monkeypatch.setattr(report, "REQUEST_TIMEOUT_SECONDS", 2.0)
    report._reset()
    yield
    report._reset()


@pytest.fixture
def bind_to(fast_report: None, monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str, str], None]:
    """Sets the ingest binding an executor gives a job, then lets report read it."""

    def bind(endpoint: str, run_id: str = "run-1", token: str = "tpi_stub-token") -> None:
        monkeypatch.setenv(env.JOB_ENDPOINT, endpoint)
        monkeypatch.setenv(env.JOB_RUN_ID, run_id)
        monkeypatch.setenv(env.JOB_TOKEN, token)
        monkeypatch.setenv(env.JOB_ENABLED, "1")
        report._reset()

    return bind


@pytest.fixture
def bound(stub: IngestStub, bind_to: Callable[[str, str, str], None]) -> IngestStub:
    """report bound to a running stub."""
    bind_to(stub.endpoint, stub.run_id, stub.token)
    return stub


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on: connections are refused at once."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (kernel backlog) but never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield sock.getsockname()[1]
    sock.close()
