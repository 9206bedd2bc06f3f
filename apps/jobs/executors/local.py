"""The `local` executor: the runner as a process on this host (the embedded default).

It ignores `--image` (there is no container engine) and the GPU profile (it allocates
nothing): it exists so that the whole path, from `tp submit` to charts, runs on a laptop.
The runner is started in its own session so that restarting the web server or the worker
never kills a job, and it is detached through an intermediate process so that it is
reparented away from the worker and never lingers as a zombie.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings

from ..contract import job_environment
from ..models import ExecutionAttempt

# Variables worth passing from the control plane's environment to a job. Nothing else
# crosses: DATABASE_URL, secrets and cloud credentials stay with the control plane.
PASSTHROUGH = ("HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "HF_HOME", "HF_TOKEN")

_SPAWN = """
import json, os, subprocess, sys
spec = json.loads(sys.stdin.read())
with open(spec["log"], "ab") as log:
    proc = subprocess.Popen(spec["argv"], env=spec["env"], cwd=spec["cwd"], stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
print(proc.pid)
"""

CANCEL_GRACE_SECONDS = 10.0


def _paths(attempt: ExecutionAttempt) -> tuple[Path, Path]:
    base = settings.TUNEPLANE_LOCAL_ROOT / attempt.job.public_id / f"attempt-{attempt.number}"
    return base / "work", base / "out"


def _process_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    # A zombie has exited; only its parent has not collected it yet.
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _signal_group(pid: int | None, sig: int) -> None:
    if not pid:
        return
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class LocalExecutor:
    def launch(self, attempt: ExecutionAttempt, token: str) -> dict:
        work_root, out_dir = _paths(attempt)
        work_root.mkdir(parents=True, exist_ok=True)
        env = {name: os.environ[name] for name in PASSTHROUGH if name in os.environ}
        venv_bin = str(Path(sys.executable).parent)
        env["PATH"] = venv_bin + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin")
        env["PYTHONUNBUFFERED"] = "1"
        env.update(job_environment(attempt, token, out_dir=str(out_dir), work_root=str(work_root)))
        spec = {
            "argv": [sys.executable, "-m", "tuneplane.runner"],
            "env": env,
            "cwd": str(work_root),
            "log": str(work_root.parent / "runner.log"),
        }
        done = subprocess.run(
            [sys.executable, "-c", _SPAWN], input=json.dumps(spec), capture_output=True, text=True, timeout=60, check=True
        )
        pid = int(done.stdout.strip())
        return {"runner_pid": pid, "work_root": str(work_root), "out_dir": str(out_dir)}

    def is_alive(self, attempt: ExecutionAttempt) -> bool | None:
        pid = attempt.handle.get("runner_pid")
        return _process_alive(pid) if pid else None

    def cancel(self, attempt: ExecutionAttempt) -> None:
        """SIGTERM the runner's and train.sh's process groups, SIGKILL after a grace."""
        groups = [attempt.handle.get("runner_pid"), attempt.child_pid]
        for pid in groups:
            _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + CANCEL_GRACE_SECONDS
        while time.monotonic() < deadline and any(pid and _process_alive(pid) for pid in groups):
            time.sleep(0.2)
        for pid in groups:
            _signal_group(pid, signal.SIGKILL)
