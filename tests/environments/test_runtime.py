"""Deployments at run time, from the runner's side: the OpenEnv server it starts for a
local taskset (driven by openenv-core's own client), the NeMo Gym files and shim, the
address of a remote environment, and the container sidecar for the executor's pod."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tuneplane._http import IngestError
from tuneplane.contracts import environment as C
from tuneplane.contracts.environment_bundle import build_archive
from tuneplane.runner import environment as R

from apps.environments.runtime import job_environment_variables, sidecar_container

from .conftest import CALCULATOR, EVAL_SENTINEL, TRAIN_SENTINEL

TRAIN_ONLY = C.split_tasks((CALCULATOR / "tasks.jsonl").read_bytes(), "train")
EVAL_ONLY = C.split_tasks((CALCULATOR / "tasks.jsonl").read_bytes(), "eval")


class FakeIngest:
    """Answers GET environment like the control plane's route would."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.archive = build_archive(files)
        self.calls: list[str] = []

    def get_bytes(self, route: str, max_bytes: int, timeout: float | None = None):
        self.calls.append(route)
        if route != C.ROUTE_ENVIRONMENT:
            raise IngestError("404", status=404, transient=False)
        return self.archive, {}


def block(**extra) -> dict:
    return {
        "ref": "alice/calculator-tasks@1.0.0",
        "version_id": 1,
        "split": "train",
        "protocol": "openenv",
        "deployment": "local",
        "address": None,
        "harness": None,
        **extra,
    }


def environ(b: dict) -> dict[str, str]:
    return {C.ENV_RUNNER_ENVIRONMENT: json.dumps(b), "PYTHONPATH": "/existing"}


def test_a_job_without_an_environment_prepares_nothing(tmp_path):
    assert R.prepare_environment(FakeIngest({}), {}, tmp_path) is None


def test_openenv_local_starts_a_server_the_trainer_drives_with_openenv_core(tmp_path):
    files = {
        "environment/manifest.json": (CALCULATOR / "manifest.json").read_bytes(),
        "environment/tasks.jsonl": TRAIN_ONLY,
    }
    client = FakeIngest(files)
    prepared = R.prepare_environment(client, environ(block()), tmp_path)
    assert prepared is not None
    try:
        url = prepared.variables[C.ENV_JOB_ENVIRONMENT_URL]
        assert url.startswith("http://127.0.0.1:")
        assert prepared.variables[C.ENV_JOB_ENVIRONMENT_SPLIT] == "train"
        env_dir = Path(prepared.variables[C.ENV_JOB_ENVIRONMENT_DIR])
        assert (env_dir / "tasks.jsonl").read_bytes() == TRAIN_ONLY

        from openenv.core import GenericEnvClient

        async def episode() -> tuple:
            async with GenericEnvClient(base_url=url) as env:
                first = await env.reset(task_index=0)
                right = await env.step({"answer": "57.8"})
                await env.reset(task_index=1)
                wrong = await env.step({"answer": "79"})
                state = await env.state()
            return first, right, wrong, state

        first, right, wrong, state = asyncio.run(episode())
        assert first.observation["prompt"] == TRAIN_SENTINEL
        assert first.observation["tools"][0]["name"] == "calculator"
        assert "reference" not in json.dumps(first.observation)  # the answer is not handed out
        assert (right.reward, right.done, right.observation["feedback"]) == (1.0, True, "correct")
        assert (wrong.reward, wrong.observation["feedback"]) == (0.0, "wrong")
        assert state["step_count"] == 1
    finally:
        prepared.stop()
    assert prepared.server is None


def test_the_runner_refuses_rows_of_the_other_split(tmp_path):
    files = {
        "environment/manifest.json": (CALCULATOR / "manifest.json").read_bytes(),
        "environment/tasks.jsonl": TRAIN_ONLY + EVAL_ONLY,
    }
    with pytest.raises(R.EnvironmentSetupError) as info:
        R.prepare_environment(FakeIngest(files), environ(block()), tmp_path)
    assert (
        str(info.value)
        == "tasks.jsonl line 4 belongs to the eval split; this job may read only train"
    )


def test_a_missing_openenv_core_is_a_clear_setup_failure(tmp_path):
    env_dir = tmp_path / "environment"
    env_dir.mkdir()
    (env_dir / "manifest.json").write_bytes((CALCULATOR / "manifest.json").read_bytes())
    (env_dir / "tasks.jsonl").write_bytes(TRAIN_ONLY)
    blocker = tmp_path / "blocker"
    (blocker / "openenv").mkdir(parents=True)
    (blocker / "openenv" / "__init__.py").write_text("raise ImportError('no openenv here')\n")
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(blocker)
    try:
        with pytest.raises(R.EnvironmentSetupError) as info:
            R.start_openenv_server(env_dir, tmp_path, timeout=30)
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = old
    assert (
        "openenv + local needs openenv-core in the job's image (pip install openenv-core)"
        in str(info.value)
    )


def test_nemo_gym_local_gets_the_files_and_a_two_line_shim(tmp_path):
    harness = {
        "plugin": "alice/calculator-harness",
        "version": "1.0.0",
        "entrypoint": "harness:CalculatorResources",
        "digest": "sha256:" + "b" * 64,
    }
    manifest = json.loads((CALCULATOR / "manifest.json").read_text())
    manifest.update(protocol="nemo-gym", category="math", harness=harness)
    files = {
        "environment/manifest.json": json.dumps(manifest).encode(),
        "environment/tasks.jsonl": EVAL_ONLY,
        "harness/plugin.yaml": b"schema: tuneplane/plugin/v1\n",
        "harness/harness.py": b"class CalculatorResources:\n    name = 'calc'\n",
    }
    b = block(protocol="nemo-gym", split="eval", harness=harness)
    prepared = R.prepare_environment(FakeIngest(files), environ(b), tmp_path)
    assert prepared is not None and prepared.server is None
    env_dir = Path(prepared.variables[C.ENV_JOB_ENVIRONMENT_DIR])
    server_dir = env_dir / "resources_servers" / "calculator_tasks"
    shim = (server_dir / "app.py").read_text()
    assert len(shim.splitlines()) <= 2
    assert shim.splitlines()[1] == "from harness import CalculatorResources  # noqa: F401"
    config = json.loads((server_dir / "configs" / "calculator_tasks.yaml").read_text())
    assert config["calculator_tasks"]["resources_servers"]["calculator_tasks"]["domain"] == "math"
    rows = [
        json.loads(line) for line in (server_dir / "data" / "eval.jsonl").read_text().splitlines()
    ]
    assert [r["responses_create_params"]["input"][0]["content"] for r in rows] == [
        EVAL_SENTINEL,
        "What is the sum of the integers from 1 to 20?",
    ]
    assert TRAIN_SENTINEL not in (server_dir / "data" / "eval.jsonl").read_text()

    child_env = {"PYTHONPATH": "/existing"}
    prepared.apply(child_env)
    assert (
        child_env["PYTHONPATH"]
        == f"{tmp_path.resolve()}/{next(iter(os.listdir(tmp_path)))}/harness:/existing"
    )
    # The shim really imports the harness entrypoint with the job's PYTHONPATH.
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import runpy; g = runpy.run_path('app.py'); print(g['CalculatorResources'].name)",
        ],
        cwd=server_dir,
        env={**os.environ, "PYTHONPATH": child_env["PYTHONPATH"]},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "calc"


def test_remote_and_container_hand_over_the_admitted_address(tmp_path):
    manifest = json.loads((CALCULATOR / "manifest.json").read_text())
    manifest["deployment"] = "remote"
    files = {"environment/manifest.json": json.dumps(manifest).encode()}
    b = block(deployment="remote", address="http://envbox-3.corp:8080")
    prepared = R.prepare_environment(FakeIngest(files), environ(b), tmp_path)
    assert prepared is not None and prepared.server is None
    assert prepared.variables[C.ENV_JOB_ENVIRONMENT_URL] == "http://envbox-3.corp:8080"

    spec = {
        "environment": block(
            deployment="container",
            image="ghcr.io/acme/env:1",
            image_port=8000,
            address="http://127.0.0.1:8000",
        )
    }
    variables = job_environment_variables(spec)
    assert variables[C.ENV_JOB_ENVIRONMENT_URL] == "http://127.0.0.1:8000"
    assert variables[C.ENV_JOB_ENVIRONMENT_SPLIT] == "train"


def test_the_container_sidecar_gets_no_gpu_and_no_volume_mounts():
    spec = {
        "environment": block(deployment="container", image="ghcr.io/acme/env:1", image_port=8000)
    }
    sidecar = sidecar_container(spec)
    assert sidecar is not None
    assert sidecar["image"] == "ghcr.io/acme/env:1"
    assert sidecar["ports"] == [{"name": "environment", "containerPort": 8000, "protocol": "TCP"}]
    assert sidecar["volumeMounts"] == []
    assert "nvidia.com/gpu" not in json.dumps(sidecar["resources"])
    assert sidecar["securityContext"]["privileged"] is False
    assert sidecar_container({"environment": block()}) is None
    assert sidecar_container({}) is None
    default_port = sidecar_container({"environment": block(deployment="container", image="i:1")})
    assert default_port["ports"][0]["containerPort"] == 8900
