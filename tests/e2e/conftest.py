"""The real thing: daphne, a Celery worker (Redis broker) and the `tp` CLI as
subprocesses against the pytest-django test database, and jobs run by the local
executor. Tests here use transactional databases so the servers see committed rows."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
# Several suites may run at once on one machine (developers, CI): each needs its own broker DB.
REDIS_DB = os.environ.get("TUNEPLANE_TEST_REDIS_DB", "13")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url() -> str:
    s = connection.settings_dict
    return f"postgres://{s['USER'] or 'postgres'}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


class Stack:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.procs: dict[str, subprocess.Popen] = {}
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tuneplane_site.settings",
            "DATABASE_URL": database_url(),
            "TUNEPLANE_DATA_DIR": str(tmp / "data"),
            "TUNEPLANE_BROKER_URL": f"redis://127.0.0.1:6379/{REDIS_DB}",
            "TUNEPLANE_INGEST_URL": self.url,
            "TUNEPLANE_ALLOWED_IMAGE_REGISTRIES": "registry.example.com",
            "TUNEPLANE_SSE_POLL_SECONDS": "0.2",
            "TUNEPLANE_SSE_KEEPALIVE_SECONDS": "2",
            "XDG_CONFIG_HOME": str(tmp / "config"),
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        }

    def _start(self, name: str, argv: list[str]) -> None:
        log = open(self.tmp / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen(
            argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def start_web(self) -> None:
        self._start("web", [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(self.port),
                            "tuneplane_site.asgi:application"])
        self.wait_for(f"{self.url}/login/")

    def stop_web(self) -> None:
        self._stop("web")

    def stop_worker(self) -> None:
        self._stop("worker")

    def start_worker(self) -> None:
        self._start("worker", [sys.executable, "-m", "celery", "-A", "tuneplane_site", "worker",
                               "--loglevel", "INFO", "--concurrency", "2", "--without-gossip", "--without-mingle"])

    def _stop(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def wait_for(self, url: str, seconds: float = 45) -> None:
        deadline = time.monotonic() + seconds
        while True:
            try:
                urllib.request.urlopen(url, timeout=2)
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise AssertionError(f"{url} did not answer; web log:\n{self.log('web')}")
                time.sleep(0.2)

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace")[-6000:] if path.exists() else ""

    def tp(self, *args: str, cwd: Path, timeout: float = 180, check: bool = False) -> subprocess.CompletedProcess:
        done = subprocess.run([str(VENV_BIN / "tp"), *args], cwd=cwd, env=self.env, capture_output=True,
                              text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"tp {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return done

    def close(self) -> None:
        for name in list(self.procs):
            self._stop(name)
        # Runners started by the local executor live in their own sessions (so that a
        # server restart never kills a job): end any still working under this stack's dir.
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cwd = os.readlink(proc / "cwd")
            except OSError:
                continue
            if cwd.startswith(str(self.tmp)):
                try:
                    os.kill(int(proc.name), signal.SIGKILL)
                except ProcessLookupError:
                    pass


def _flush_broker() -> None:
    import redis

    redis.Redis(host="127.0.0.1", port=6379, db=int(REDIS_DB)).flushdb()


@pytest.fixture
def stack(transactional_db, tmp_path):
    _flush_broker()
    stack = Stack(tmp_path)
    try:
        stack.start_web()
        stack.start_worker()
        yield stack
    finally:
        stack.close()


@pytest.fixture
def logged_in(stack, django_user_model, tmp_path):
    """Alice's git workspace, logged in with `tp login`."""
    from apps.accounts.services import issue_api_token

    alice = django_user_model.objects.create_user("alice", password="alice-password-1")
    _, token = issue_api_token(alice)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    git(workspace, "init", "-q")
    git(workspace, "config", "user.email", "alice@example.com")
    git(workspace, "config", "user.name", "Alice")
    stack.tp("login", "--server", stack.url, "--token", token, cwd=workspace, check=True)
    return workspace


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def write_experiment(workspace: Path, name: str, train_sh: str, extra: dict[str, str] | None = None) -> None:
    exp = workspace / "experiments" / name
    (exp / "train.sh").write_text(train_sh)
    (exp / "train.sh").chmod(0o755)
    for filename, content in (extra or {}).items():
        (exp / filename).write_text(content)
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", f"{name}")


def copy_demo(workspace: Path, name: str) -> None:
    source = ROOT / "fixtures" / "demo" / "experiments" / "linreg"
    for path in source.iterdir():
        shutil.copy2(path, workspace / "experiments" / name / path.name)
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "demo")


@pytest.fixture
def web(transactional_db, tmp_path):
    """Only daphne: for tests that write rows themselves."""
    stack = Stack(tmp_path)
    try:
        stack.start_web()
        yield stack
    finally:
        stack.close()


def job_id_from(output: str) -> str:
    """The job id in `tp submit`'s output."""
    import re

    match = re.search(r"Submitted job (\S+):", output)
    assert match, output
    return match.group(1)


def wait_finished(public_id: str, seconds: float = 180):
    """Poll the database until the job is finished; fail with its state otherwise."""
    from apps.jobs.models import Job

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        job = Job.objects.get(public_id=public_id)
        if job.is_finished:
            return job
        time.sleep(0.3)
    raise AssertionError(f"{public_id} is still {Job.objects.get(public_id=public_id).state}")
