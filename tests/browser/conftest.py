"""A real daphne serving the test database, and headless Chromium driving it.

The server is a separate process, so the rows a test writes must be committed: browser
tests use `django_db(transaction=True)`. Chromium is Debian's (/usr/bin/chromium); the
suite never downloads a browser.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class DaphneServer:
    """daphne on 127.0.0.1:<port> against the pytest-django test database. It can be
    stopped and started again on the same port, to test that browsers reconnect."""

    def __init__(self, database_url: str, data_dir: Path, log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "DJANGO_SETTINGS_MODULE": "tuneplane_site.settings",
            "TUNEPLANE_DATA_DIR": str(data_dir),
            # Fast polling and keep-alives make live updates show up within a test's patience.
            "TUNEPLANE_SSE_POLL_SECONDS": "0.2",
            "TUNEPLANE_SSE_KEEPALIVE_SECONDS": "2",
            "TUNEPLANE_BROKER_URL": "memory://",
            "PYTHONUNBUFFERED": "1",
        }
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> None:
        daphne = Path(sys.executable).with_name("daphne")
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [str(daphne), "-b", "127.0.0.1", "-p", str(self.port), "tuneplane_site.asgi:application"],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daphne exited with {self.proc.returncode}:\n{self.log_path.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/login/", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"daphne did not answer within {timeout}s:\n{self.log_path.read_text()[-4000:]}")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None


@pytest.fixture(scope="session")
def daphne_server(django_db_setup, tmp_path_factory) -> Iterator[DaphneServer]:
    from django.db import connection

    if connection.vendor != "postgresql":
        # An in-memory SQLite test database cannot be shared with another process.
        pytest.skip("browser tests need the PostgreSQL test database: set DATABASE_URL=postgres://...")
    db = connection.settings_dict
    # pytest-django has switched the connection to the test database by now.
    user = db.get("USER") or "postgres"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    database_url = f"postgres://{user}{password}@{host}:{port}/{db['NAME']}"

    data_dir = tmp_path_factory.mktemp("daphne-data")
    server = DaphneServer(database_url, data_dir, data_dir / "daphne.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop on this thread, and Django then refuses
    # ORM calls ("async context"). The test's ORM calls are plain synchronous code, so
    # lift the guard, but only while a browser is up.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                yield browser
            finally:
                browser.close()


@pytest.fixture
def page(browser):
    """A fresh browser context per test (own cookies), failing the test on any script
    error the page reports."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
    page.on("console", lambda msg: msg.type == "error" and errors.append(f"console: {msg.text}"))
    page.script_errors = errors
    page.set_default_timeout(15000)
    try:
        yield page
    finally:
        context.close()
