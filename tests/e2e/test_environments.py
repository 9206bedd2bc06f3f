"""Agent environments end to end: the spec's calculator example pushed and shown with
`tp`, a job through the local executor that reads its train split and drives the OpenEnv
server the runner started for it, the same job as an evaluation that gets only the eval
tasks, and remote runners against a real OpenEnv server."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from apps.environments.models import EnvironmentVersion, Runner
from apps.jobs.models import Job
from apps.recipes.models import Recipe
from tests.e2e.conftest import ROOT, git, job_id_from, wait_finished
from tests.environments.conftest import EVAL_SENTINEL, TRAIN_SENTINEL, OpenEnvServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

IMAGE = "registry.example.com/trainer:v1"
OBS = "https://wandb.example/proj"
REF = "alice/calculator-tasks@1.0.0"
CALCULATOR = ROOT / "fixtures" / "environments" / "calculator"

# train.sh of the experiment: reads the split it was given, then plays every task through
# openenv-core's client against the server the runner started, answering with the
# reference it read (a perfect policy), and prints what it saw.
TRAIN_SH = r"""#!/usr/bin/env bash
set -euo pipefail
echo "environment ${TUNEPLANE_JOB_ENVIRONMENT} split ${TUNEPLANE_JOB_ENVIRONMENT_SPLIT}"
python3 - <<'PY'
import asyncio, json, os
directory = os.environ["TUNEPLANE_JOB_ENVIRONMENT_DIR"]
rows = [json.loads(l) for l in open(os.path.join(directory, "tasks.jsonl")) if l.strip()]
print("tasks", len(rows), "splits", sorted({r.get("split", "train") for r in rows}))
for row in rows:
    print("prompt:", row["prompt"])
from openenv.core import GenericEnvClient
async def play():
    total = 0.0
    async with GenericEnvClient(base_url=os.environ["TUNEPLANE_JOB_ENVIRONMENT_URL"]) as env:
        for index, row in enumerate(rows):
            first = await env.reset(task_index=index)
            assert first.observation["prompt"] == row["prompt"], first.observation
            result = await env.step({"answer": str(row["reference"])})
            total += result.reward
    print("reward", total, "of", len(rows))
asyncio.run(play())
PY
"""


PROBE_LOCK = {
    "name": "tests/env-probe",
    "version": "1.0.0",
    "digest": "sha256:" + "0" * 64,
    "entrypoint": "train.sh",
    "operations": ["train", "eval"],
}


def write_experiment(workspace: Path, name: str, recipe: dict) -> None:
    exp = workspace / "experiments" / name
    exp.mkdir(parents=True, exist_ok=True)
    (exp / "train.sh").write_text(TRAIN_SH)
    (exp / "train.sh").chmod(0o755)
    (exp / "recipe.lock.json").write_text(json.dumps(recipe))
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", name)


def test_the_calculator_pushes_shows_and_feeds_a_training_job_and_an_evaluation(stack, logged_in):
    pushed = stack.tp(
        "env",
        "push",
        str(CALCULATOR),
        "--name",
        "calculator-tasks",
        "--version",
        "1.0.0",
        cwd=logged_in,
    )
    assert pushed.returncode == 0, pushed.stderr
    assert f"Pushed {REF}: 2 file(s)" in pushed.stdout
    assert "openenv + local, tasks: train 3, eval 2" in pushed.stdout

    again = stack.tp(
        "env",
        "push",
        str(CALCULATOR),
        "--name",
        "calculator-tasks",
        "--version",
        "1.0.0",
        cwd=logged_in,
    )
    assert again.returncode == 1
    assert (
        f"Error: {REF} already exists; versions are immutable: push a new version" in again.stderr
    )
    assert EnvironmentVersion.objects.count() == 1

    shown = stack.tp("env", "show", REF, cwd=logged_in, check=True).stdout
    for line in (
        "protocol     openenv",
        "deployment   local",
        "verifier     rubric: alice/arithmetic-correctness",
        "tools        calculator  /tools/calculator  (expression: string) required: expression",
        "sandbox      not required",
        "tasks        train 3, eval 2",
    ):
        assert line in shown, shown
    listed = stack.tp("env", "ls", cwd=logged_in, check=True).stdout
    assert re.search(
        r"alice/calculator-tasks\s+1\.0\.0\s+openenv\s+local\s+rubric: alice/arithmetic-correctness"
        r"\s+calculator\s+not required",
        listed,
    ), listed

    # Training: the job reads the train split and nothing else.
    write_experiment(
        logged_in,
        "calc-agent",
        {
            "name": "custom/custom",
            "version": "1.0.0",
            "entrypoint": "train.sh",
            "operations": ["train"],
        },
    )
    submitted = stack.tp(
        "submit",
        "calc-agent",
        "--profile",
        "cpu",
        "--image",
        IMAGE,
        "--observability-url",
        OBS,
        "--env",
        REF,
        cwd=logged_in,
    )
    assert submitted.returncode == 0, submitted.stderr
    train_id = job_id_from(submitted.stdout)
    logs = stack.tp("job", "logs", train_id, "--follow", cwd=logged_in, timeout=240)
    assert logs.returncode == 0, logs.stdout + logs.stderr + stack.log("worker")
    assert f"environment {REF} split train" in logs.stdout
    assert "tasks 3 splits ['train']" in logs.stdout
    assert f"prompt: {TRAIN_SENTINEL}" in logs.stdout
    assert EVAL_SENTINEL not in logs.stdout + logs.stderr
    assert "reward 3.0 of 3" in logs.stdout
    assert wait_finished(train_id).state == "succeeded"

    # The same job as an evaluation: a recipe that compiles eval (custom/custom only
    # trains), the same train.sh, and only the eval half arrives.
    Recipe.objects.create(
        name="tests/env-probe",
        version="1.0.0",
        digest="sha256:" + "0" * 64,
        framework="script",
        observability="external",
        entrypoint="train.sh",
        parameters={},
        operations=["train", "eval"],
        runtime={"default_version": "user-managed"},
    )
    write_experiment(logged_in, "calc-eval", PROBE_LOCK)
    preview = stack.tp(
        "eval",
        "calc-eval",
        "--profile",
        "cpu",
        "--image",
        IMAGE,
        "--observability-url",
        OBS,
        "--env",
        REF,
        cwd=logged_in,
    )
    assert preview.returncode == 0, preview.stderr
    assert "environment.split: eval" in preview.stdout
    eval_id = submit_evaluation(stack, logged_in, "calc-eval")
    logs = stack.tp("job", "logs", eval_id, "--follow", cwd=logged_in, timeout=240)
    assert logs.returncode == 0, logs.stdout + logs.stderr + stack.log("worker")
    assert f"environment {REF} split eval" in logs.stdout
    assert "tasks 2 splits ['eval']" in logs.stdout
    assert f"prompt: {EVAL_SENTINEL}" in logs.stdout
    assert TRAIN_SENTINEL not in logs.stdout + logs.stderr
    assert "reward 2.0 of 2" in logs.stdout

    # Both runs are listed on the version, in tp and in the API the console uses.
    shown = stack.tp("env", "show", REF, "--json", cwd=logged_in, check=True).stdout
    runs = {(r["id"], r["operation"], r["split"]) for r in json.loads(shown)["runs"]}
    assert runs == {(train_id, "train", "train"), (eval_id, "eval", "eval")}


def submit_evaluation(stack, workspace: Path, name: str) -> str:
    """`tp eval` previews; an evaluation job is submitted through the same API tp uses."""
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from tp_cli.client import ApiClient\n"
        "from tp_cli.config import load_credentials\n"
        "from tp_cli.packaging import build_package\n"
        f"pkg = build_package(Path.cwd(), {name!r}, 'eval')\n"
        "request = {'experiment': pkg.experiment, 'operation': 'eval', 'recipe': pkg.lock['name'],\n"
        f"           'profile': 'cpu', 'image': {IMAGE!r}, 'observability_url': {OBS!r},\n"
        f"           'environment': {REF!r}, 'hyperparams': {{}}}}\n"
        "job = ApiClient(load_credentials()).post_package('api/v1/jobs', json.dumps(request), pkg.data, pkg.filename)\n"
        "print(job['id'])\n"
    )
    done = subprocess.run(
        [str(Path(stack.env["PATH"].split(":")[0]) / "python"), "-c", script],
        cwd=workspace,
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_an_evaluation_against_an_undeclared_split_is_refused_by_tp(stack, logged_in, tmp_path):
    env_dir = tmp_path / "train-only"
    env_dir.mkdir()
    (env_dir / "manifest.json").write_bytes((CALCULATOR / "manifest.json").read_bytes())
    (env_dir / "tasks.jsonl").write_text('{"prompt": "What is 2+2?", "reference": "4"}\n')
    stack.tp(
        "env",
        "push",
        str(env_dir),
        "--name",
        "calculator-tasks",
        "--version",
        "1.0.0",
        cwd=logged_in,
        check=True,
    )
    Recipe.objects.create(
        name="tests/env-probe",
        version="1.0.0",
        digest="sha256:" + "0" * 64,
        framework="script",
        observability="external",
        entrypoint="train.sh",
        parameters={},
        operations=["train", "eval"],
        runtime={"default_version": "user-managed"},
    )
    write_experiment(logged_in, "calc-eval", PROBE_LOCK)
    refused = stack.tp(
        "eval",
        "calc-eval",
        "--profile",
        "cpu",
        "--image",
        IMAGE,
        "--observability-url",
        OBS,
        "--env",
        REF,
        cwd=logged_in,
    )
    assert refused.returncode == 1
    assert (
        f"Error: environment {REF} declares no eval tasks; an evaluation is refused rather than served "
        "the train split"
    ) in refused.stderr
    assert Job.objects.count() == 0


def test_tp_refuses_symlinks_before_uploading(stack, logged_in, tmp_path):
    env_dir = tmp_path / "linked"
    env_dir.mkdir()
    (env_dir / "manifest.json").write_bytes((CALCULATOR / "manifest.json").read_bytes())
    (env_dir / "tasks.jsonl").symlink_to(CALCULATOR / "tasks.jsonl")
    refused = stack.tp(
        "env", "push", str(env_dir), "--name", "linked", "--version", "1", cwd=logged_in
    )
    assert refused.returncode == 1
    assert "Error: tasks.jsonl is a symlink; symlinks are refused in a bundle" in refused.stderr
    assert EnvironmentVersion.objects.count() == 0


def test_remote_runners_with_tp_against_a_real_openenv_server(stack, logged_in, tmp_path):
    server = OpenEnvServer(tmp_path)
    server.start()
    try:
        registered = stack.tp(
            "env",
            "runner",
            "register",
            server.url,
            "--name",
            "shared-sim",
            "--version",
            "1.0.0",
            "--description",
            "Shared simulator, ops-managed",
            cwd=logged_in,
        )
        assert registered.returncode == 0, registered.stderr
        assert (
            f"Registered alice/shared-sim@1.0.0: openenv + remote, answering at {server.url}"
            in registered.stdout
        )
        assert f"verifier endpoint: {server.url}" in registered.stdout
        listed = stack.tp(
            "env", "runner", "ls", "alice/shared-sim@1.0.0", cwd=logged_in, check=True
        ).stdout
        assert re.search(rf"{re.escape(server.url)}\s+-\s+answering", listed), listed
    finally:
        server.stop()

    from apps.environments import services

    services.probe_all_runners()  # what Celery beat does every 30 s
    listed = stack.tp("env", "runner", "ls", "alice/shared-sim", cwd=logged_in, check=True).stdout
    assert re.search(rf"{re.escape(server.url)}\s+-\s+not answering", listed), listed
    runner_id = str(Runner.objects.get().pk)
    drained = stack.tp(
        "env", "runner", "drain", "alice/shared-sim@1.0.0", runner_id, cwd=logged_in, check=True
    )
    assert (
        f"runner #{runner_id} of alice/shared-sim@1.0.0 at {server.url}: drained" in drained.stdout
    )
    listed = stack.tp(
        "env", "runner", "ls", "alice/shared-sim@1.0.0", cwd=logged_in, check=True
    ).stdout
    assert re.search(rf"{re.escape(server.url)}\s+-\s+drained", listed), listed

    # serve: a fleet version, this machine as a runner, two heartbeats.
    server.start()
    try:
        stack.tp(
            "env",
            "runner",
            "register",
            server.url,
            "--name",
            "pool-sim",
            "--version",
            "1",
            "--fleet",
            "pool",
            cwd=logged_in,
            check=True,
        )
        served = stack.tp(
            "env",
            "runner",
            "serve",
            "alice/pool-sim@1",
            "--at",
            server.url.replace("127.0.0.1", "localhost"),
            "--name",
            "box-2",
            "--interval",
            "0.2",
            "--count",
            "2",
            cwd=logged_in,
        )
        assert served.returncode == 0, served.stderr
        assert (
            "Serving alice/pool-sim@1 as runner #" in served.stdout
            and ": answering" in served.stdout
        )
        listed = stack.tp(
            "env", "runner", "ls", "alice/pool-sim@1", cwd=logged_in, check=True
        ).stdout
        assert "box-2" in listed and listed.count("answering") == 2
    finally:
        server.stop()
