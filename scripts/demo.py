"""`make demo`: the embedded default, end to end, on this machine.

Starts the console (daphne) and a Celery worker (filesystem transport, embedded beat) in
the background, creates the demo user, scaffolds and commits the bundled `linreg`
experiment in a demo workspace, submits it with `tp`, follows its logs to the end and
prints where to look. `python scripts/demo.py stop` stops the servers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
DATA = Path(os.environ.get("TUNEPLANE_DEMO_DIR", ROOT / "var" / "demo")).resolve()
PORT = int(os.environ.get("TUNEPLANE_DEMO_PORT", "8000"))
URL = f"http://127.0.0.1:{PORT}"
USER, PASSWORD = "demo", "demo-password"
IMAGE = "registry.example.com/tuneplane-demo:v1"

ENV = {
    **os.environ,
    "DJANGO_SETTINGS_MODULE": "tuneplane_site.settings",
    "TUNEPLANE_DATA_DIR": str(DATA),
    "TUNEPLANE_INGEST_URL": URL,
    "TUNEPLANE_ALLOWED_IMAGE_REGISTRIES": "registry.example.com",
    "TUNEPLANE_DEBUG": "1",
    "XDG_CONFIG_HOME": str(DATA / "config"),  # keep the demo's tp login out of ~/.config
    "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
}
for name in ("DATABASE_URL", "TUNEPLANE_BROKER_URL", "TUNEPLANE_S3_BUCKET", "TUNEPLANE_CHANNEL_LAYER_URL"):
    ENV.pop(name, None)  # the demo is the embedded default, whatever the shell has set


def run(*argv: str, cwd: Path = ROOT, capture: bool = False) -> str:
    done = subprocess.run(argv, cwd=cwd, env=ENV, check=True, text=True, capture_output=capture)
    return done.stdout if capture else ""


def manage(*args: str, capture: bool = False) -> str:
    return run(sys.executable, "manage.py", *args, capture=capture)


def start_background(name: str, argv: list[str]) -> None:
    log = open(DATA / f"{name}.log", "ab")
    proc = subprocess.Popen(argv, cwd=ROOT, env=ENV, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    (DATA / f"{name}.pid").write_text(str(proc.pid))


def stop() -> None:
    for pid_file in DATA.glob("*.pid"):
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGTERM)
        except (ProcessLookupError, ValueError, PermissionError):
            pass
        pid_file.unlink()
    print("demo servers stopped")


def wait_for_http(url: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except Exception:
            if time.monotonic() > deadline:
                sys.exit(f"{url} did not answer in {seconds:.0f} s; see {DATA}/web.log")
            time.sleep(0.3)


def prepare_workspace(token: str) -> Path:
    workspace = DATA / "workspace"
    if workspace.exists():
        shutil.rmtree(workspace)
    workspace.mkdir(parents=True)
    run("tp", "login", "--server", URL, "--token", token, cwd=workspace)
    run("git", "init", "-q", cwd=workspace)
    run("git", "config", "user.email", "demo@tuneplane.local", cwd=workspace)
    run("git", "config", "user.name", "TunePlane demo", cwd=workspace)
    run("tp", "new", "linreg", "--method", "custom/custom", cwd=workspace)
    source = ROOT / "fixtures" / "demo" / "experiments" / "linreg"
    for path in source.iterdir():
        shutil.copy2(path, workspace / "experiments" / "linreg" / path.name)
    run("git", "add", "-A", cwd=workspace)
    run("git", "commit", "-q", "-m", "linreg demo", cwd=workspace)
    return workspace


def start() -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    if any(DATA.glob("*.pid")):
        stop()
    print(f"==> database and catalogue ({DATA})")
    manage("migrate", "--no-input", "-v", "0")
    manage("shell", "--no-imports", "-c", (
        "from django.contrib.auth import get_user_model as g;"
        f"u, _ = g().objects.get_or_create(username={USER!r}, defaults={{'is_staff': True, 'is_superuser': True}});"
        f"u.set_password({PASSWORD!r}); u.save()"
    ))
    token = manage("create_api_token", USER, "--name", "demo", capture=True).strip()

    print(f"==> console on {URL} and a Celery worker (logs in {DATA})")
    start_background("web", [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(PORT), "tuneplane_site.asgi:application"])
    start_background("worker", [
        sys.executable, "-m", "celery", "-A", "tuneplane_site", "worker", "-B", "--loglevel", "INFO",
        "--concurrency", "2", "--schedule", str(DATA / "celerybeat-schedule"),
    ])
    wait_for_http(f"{URL}/login/")

    print("==> tp login, tp new linreg, tp submit")
    workspace = prepare_workspace(token)
    out = run("tp", "submit", "linreg", "--profile", "cpu", "--image", IMAGE,
              "--observability-url", f"{URL}/", "--set", "note=demo", cwd=workspace, capture=True)
    print(out, end="")
    job_id = _latest_job_id(token)

    print(f"==> tp job logs {job_id} --follow")
    follow = subprocess.run(["tp", "job", "logs", job_id, "--follow"], cwd=workspace, env=ENV)
    job = _get(f"/api/v1/jobs/{job_id}", token)
    series = _get(f"/api/v1/jobs/{job_id}/series", token)["results"]
    print()
    print(f"Demo job {job_id}: {job['state']} (exit code {job['exit_code']}), "
          f"{sum(s['count'] for s in series)} points in {len(series)} series")
    print(f"Console:  {URL}/   (user {USER!r}, password {PASSWORD!r})")
    print(f"Demo job: {URL}/jobs/{job_id}/")
    print("Stop the servers with: make demo-stop")
    sys.exit(0 if follow.returncode == 0 and job["state"] == "succeeded" else 1)


def _get(path: str, token: str) -> dict:
    request = urllib.request.Request(URL + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def _latest_job_id(token: str) -> str:
    return _get("/api/v1/jobs", token)["results"][0]["id"]


if __name__ == "__main__":
    if sys.argv[1:] == ["stop"]:
        stop()
    else:
        start()
