"""Shared set-up for the benchmarks: a PostgreSQL database of their own, migrated, a
job with an execution attempt and its ingest token, and daphne processes to serve it.

Benchmarks print figures and ratios against a peer run in the same invocation; they
are not tests and assert nothing about speed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
DB_NAME = os.environ.get("TUNEPLANE_BENCH_DB", "tuneplane_bench")
DATABASE_URL = f"postgres://postgres@127.0.0.1:5432/{DB_NAME}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(data_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tuneplane_site.settings",
        "DATABASE_URL": DATABASE_URL,
        "TUNEPLANE_DATA_DIR": str(data_dir),
        "TUNEPLANE_BROKER_URL": "memory://",
        "TUNEPLANE_DB_POOL_SIZE": "4",
        "TUNEPLANE_ALLOWED_IMAGE_REGISTRIES": "registry.example.com",
        "TUNEPLANE_LOG_LEVEL": "WARNING",
        # This checkout's code, whatever the venv's editable installs point at.
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "sdk"), os.environ.get("PYTHONPATH", "")]),
    }


def setup_django(data_dir: Path) -> None:
    os.environ.update(base_env(data_dir))
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", f"DROP DATABASE IF EXISTS {DB_NAME}"],
                   check=True, capture_output=True)
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", f"CREATE DATABASE {DB_NAME}"],
                   check=True, capture_output=True)
    sys.path[:0] = [str(ROOT), str(ROOT / "sdk")]
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def make_run(experiment: str = "bench"):
    """A job with a started attempt; returns (job, attempt, ingest token)."""
    import io
    import json
    import tarfile

    from django.contrib.auth import get_user_model

    from apps.jobs import services

    user, _ = get_user_model().objects.get_or_create(username="bench")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"#!/usr/bin/env bash\necho bench\n"
        info = tarfile.TarInfo(f"experiments/{experiment}/train.sh")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    request = {"experiment": experiment, "recipe": "custom/custom", "profile": "cpu",
               "image": "registry.example.com/x:1", "observability_url": "http://o/"}
    job, _ = services.submit_job(user, json.dumps(request), buf.getvalue())
    attempt, token = services.start_attempt(job.pk)
    return job, attempt, token


class Daphne:
    def __init__(self, data_dir: Path, processes: int = 1):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = base_env(data_dir)
        self.procs: list[subprocess.Popen] = []
        # Several daphne processes share one listening socket (as a process manager would).
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen(512)
        self.sock.set_inheritable(True)
        for _ in range(processes):
            self.procs.append(subprocess.Popen(
                [str(VENV_BIN / "daphne"), "--fd", str(self.sock.fileno()), "tuneplane_site.asgi:application"],
                cwd=ROOT, env=self.env, pass_fds=(self.sock.fileno(),),
                stdout=subprocess.DEVNULL, stderr=open(data_dir / f"daphne-{len(self.procs)}.log", "ab"),
                start_new_session=True,
            ))
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.url + "/login/", timeout=2)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise RuntimeError("daphne did not start")
                time.sleep(0.2)

    def peak_rss_kib(self) -> list[int]:
        out = []
        for p in self.procs:
            for line in Path(f"/proc/{p.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    out.append(int(line.split()[1]))
        return out

    def close(self) -> None:
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(p.pid, signal.SIGKILL)
        self.sock.close()
