"""Helpers for the environment tests: bundles from fixtures/environments, pushes, and a
real OpenEnv server (openenv-core, the integration facts' arith_env) on 127.0.0.1."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from tuneplane.contracts.environment_bundle import build_archive, collect_directory

ROOT = Path(__file__).resolve().parents[2]
CALCULATOR = ROOT / "fixtures" / "environments" / "calculator"
TRAIN_SENTINEL = "What is 17% of 340?"
EVAL_SENTINEL = "Convert 45 degrees Celsius to Fahrenheit."
REFERENCE_SENTINEL = '"reference": "57.8"'


def calculator_files(**overrides: bytes | None) -> dict[str, bytes]:
    files = collect_directory(CALCULATOR)
    for name, data in overrides.items():
        path = name.replace("__", ".")
        if data is None:
            files.pop(path, None)
        else:
            files[path] = data
    return files


def manifest_bytes(**changes) -> bytes:
    data = json.loads((CALCULATOR / "manifest.json").read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return json.dumps(data).encode()


def push(
    client,
    files: dict[str, bytes] | bytes | None = None,
    name: str = "calculator-tasks",
    version: str = "1.0.0",
    public: bool | None = None,
    request: dict | None = None,
):
    body = request if request is not None else {"name": name, "version": version}
    if public is not None and request is None:
        body["public"] = public
    data: dict = {"request": json.dumps(body)}
    archive = (
        files
        if isinstance(files, bytes)
        else build_archive(files if files is not None else calculator_files())
    )
    upload = io.BytesIO(archive)
    upload.name = "bundle.tar.gz"
    data["bundle"] = upload
    return client.post("/api/v1/environments", data, format="multipart")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# The integration facts' verified OpenEnv server (section 1), unchanged apart from the port.
ARITH_ENV = textwrap.dedent("""
    import random, sys
    from typing import Any, Optional
    from uuid import uuid4
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State

    class ArithAction(Action):
        answer: int

    class ArithObservation(Observation):
        question: str
        feedback: str = ""

    class ArithEnvironment(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True
        def __init__(self):
            super().__init__(); self._state = State(episode_id=None, step_count=0); self._a = self._b = 0
        def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kw: Any) -> ArithObservation:
            rng = random.Random(seed); self._a, self._b = rng.randint(1, 9), rng.randint(1, 9)
            self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
            return ArithObservation(question=f"{self._a}+{self._b}", done=False, reward=0.0)
        def step(self, action: ArithAction, timeout_s: Optional[float] = None, **kw: Any) -> ArithObservation:
            self._state.step_count += 1; ok = action.answer == self._a + self._b
            return ArithObservation(question=f"{self._a}+{self._b}", feedback="correct" if ok else "wrong",
                                    done=True, reward=1.0 if ok else 0.0)
        @property
        def state(self) -> State:
            return self._state

    app = create_app(ArithEnvironment, ArithAction, ArithObservation, env_name="arith", max_concurrent_envs=4)
    if __name__ == "__main__":
        import uvicorn; uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
""")


class OpenEnvServer:
    """arith_env under uvicorn on 127.0.0.1:<port>; stop() and start() again at will."""

    def __init__(self, tmp: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.script = tmp / "arith_env.py"
        self.script.write_text(ARITH_ENV)
        self.log = tmp / "arith_env.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(self.script), str(self.port)],
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            env={**os.environ, "ENABLE_WEB_INTERFACE": "0"},
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"arith_env exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=1) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"arith_env did not answer: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
            self.proc = None


@pytest.fixture
def openenv_server(tmp_path) -> Iterator[OpenEnvServer]:
    server = OpenEnvServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()
