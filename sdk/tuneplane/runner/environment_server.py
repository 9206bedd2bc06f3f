"""`python -m tuneplane.runner.environment_server --dir DIR --port P`: an OpenEnv server
for a taskset (openenv + local), started by the runner inside the job.

The trainer drives episodes through openenv-core's client (reset / step / state over the
WebSocket `/ws`): `reset` hands out a task's prompt and the declared tools (never the
reference), `step({"answer": ...})` scores the answer against the task's reference and
ends the episode. The server reads DIR/tasks.jsonl, which holds only the split this job
was admitted for. openenv-core must be installed in the job's image, as it is wherever a
trainer uses OpenEnv; the SDK wheel itself stays dependency-free, so it is imported here.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path
from typing import Any
from uuid import uuid4

from ..contracts import environment as C


def normalise(answer: str) -> str:
    return " ".join(answer.strip().lower().split()).rstrip(".")


def matches(answer: str, reference: str) -> bool:
    """Reference match: numerically equal (to 1e-6 relative) or equal as normalised text."""
    try:
        a, b = float(answer.strip().replace(",", "")), float(reference.strip().replace(",", ""))
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    except ValueError:
        return normalise(answer) == normalise(reference)


def build_app(env_dir: Path) -> Any:
    try:
        from openenv.core.env_server.http_server import create_app
        from openenv.core.env_server.interfaces import Environment
        from openenv.core.env_server.types import Action, Observation, State
    except ImportError as exc:
        raise SystemExit(
            f"openenv + local needs openenv-core in the job's image (pip install openenv-core): {exc}"
        ) from None

    manifest = C.parse_manifest((env_dir / C.MANIFEST_FILE).read_bytes())
    tasks_path = env_dir / C.TASKS_FILE
    tasks = list(C.iter_tasks(tasks_path.read_bytes())) if tasks_path.is_file() else []
    if not tasks:
        raise SystemExit(f"{tasks_path} has no tasks for this job")
    tools = [{"name": t.name, "endpoint": t.endpoint, "schema": t.schema} for t in manifest.tools]

    class TaskAction(Action):
        answer: str

    class TaskObservation(Observation):
        prompt: str = ""
        task_index: int = 0
        split: str = ""
        tools: list[dict[str, Any]] = []
        feedback: str = ""

    class TasksetEnvironment(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            super().__init__()
            self._state = State(episode_id=None, step_count=0)
            self._task = tasks[0]
            self._index = 0

        def reset(
            self,
            seed: int | None = None,
            episode_id: str | None = None,
            task_index: int | None = None,
            **kw: Any,
        ) -> TaskObservation:
            if task_index is not None:
                self._index = int(task_index) % len(tasks)
            else:
                self._index = random.Random(seed).randrange(len(tasks))
            self._task = tasks[self._index]
            self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
            return TaskObservation(
                prompt=self._task.prompt,
                task_index=self._index,
                split=self._task.split,
                tools=tools,
                done=False,
                reward=0.0,
            )

        def step(
            self, action: TaskAction, timeout_s: float | None = None, **kw: Any
        ) -> TaskObservation:
            self._state.step_count += 1
            ok = matches(action.answer, self._task.reference)
            return TaskObservation(
                prompt=self._task.prompt,
                task_index=self._index,
                split=self._task.split,
                tools=tools,
                feedback="correct" if ok else "wrong",
                done=True,
                reward=1.0 if ok else 0.0,
            )

        @property
        def state(self) -> State:
            return self._state

    return create_app(
        TasksetEnvironment,
        TaskAction,
        TaskObservation,
        env_name="tuneplane-taskset",
        max_concurrent_envs=64,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tuneplane.runner.environment_server")
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    app = build_app(args.dir)
    import uvicorn

    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
