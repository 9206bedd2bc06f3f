"""train.sh as a child process in its own process group.

`bash train.sh` commonly starts a launcher that starts workers (torchrun, accelerate), so
stopping the job means signalling the whole group, not the one pid we know. SIGTERM
first so trainers can save; SIGKILL after the grace period for whatever ignored it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from .config import diag


class Child:
    def __init__(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> None:
        self.proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,  # a job has no terminal; a prompt must not hang it
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own session and process group: pgid == pid
        )
        self.pid = self.proc.pid
        # A plain flag rather than a lock: terminate() runs from a signal handler on the
        # main thread, and a handler that waits for a lock its own thread holds deadlocks.
        self._terminating = False

    def terminate(self, grace: float, reason: str) -> None:
        """SIGTERM the group now, SIGKILL it after `grace` seconds if anything is left."""
        if self._terminating:
            return
        self._terminating = True
        diag(f"{reason}: sending SIGTERM to the job's process group {self.pid}")
        self._signal_group(signal.SIGTERM)
        timer = threading.Timer(grace, self._kill_after_grace)
        timer.daemon = True
        timer.start()

    def _kill_after_grace(self) -> None:
        if self.group_alive():
            diag(f"the job's process group {self.pid} outlived the grace period: sending SIGKILL")
            self._signal_group(signal.SIGKILL)

    def kill_group(self) -> None:
        self._signal_group(signal.SIGKILL)

    def group_alive(self) -> bool:
        try:
            os.killpg(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def wait(self) -> int:
        """The exit code as a shell reports it: a death by signal N is 128 + N."""
        code = self.proc.wait()
        return 128 - code if code < 0 else code

    def _signal_group(self, signum: int) -> None:
        try:
            os.killpg(self.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass
