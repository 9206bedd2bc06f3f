"""A user's whole path: tp new, tp submit, the local executor, tp job logs, charts."""

from __future__ import annotations

import json
import time

import pytest

from apps.jobs.models import Job
from apps.telemetry.models import LogLine, ScalarSeries
from tests.e2e.conftest import copy_demo, job_id_from, wait_finished, write_experiment
from tuneplane.contracts import errors

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

IMAGE = "registry.example.com/trainer:v1"
OBS = "https://wandb.example/proj"


def submit(stack, workspace, name: str, *extra: str):
    return stack.tp("submit", name, "--profile", "cpu", "--image", IMAGE, "--observability-url", OBS, *extra,
                    cwd=workspace)


def test_a_scaffolded_train_sh_fails_in_seconds_saying_why(stack, logged_in):
    stack.tp("new", "fresh", "--method", "custom/custom", cwd=logged_in, check=True)
    for name in ("train.sh", "config.yaml", "recipe.lock.json", "README.md"):
        assert (logged_in / "experiments" / "fresh" / name).is_file()
    write_experiment(logged_in, "fresh", (logged_in / "experiments/fresh/train.sh").read_text())
    started = time.monotonic()
    done = submit(stack, logged_in, "fresh")
    assert done.returncode == 0, done.stderr
    job_id = job_id_from(done.stdout)
    logs = stack.tp("job", "logs", job_id, "--follow", cwd=logged_in, timeout=120)
    assert logs.returncode == 1  # the job failed, and tp says so
    assert errors.SCAFFOLD_NO_TRAINING_COMMAND in logs.stdout + logs.stderr
    job = wait_finished(job_id)
    assert (job.state, job.exit_code) == ("failed", 1)
    assert time.monotonic() - started < 60


def test_the_demo_trains_and_its_logs_and_points_arrive(stack, logged_in):
    stack.tp("new", "linreg", "--method", "custom/custom", cwd=logged_in, check=True)
    copy_demo(logged_in, "linreg")
    done = submit(stack, logged_in, "linreg", "--set", "lr=0.05", "--set", "note=e2e")
    assert done.returncode == 0, done.stderr
    job_id = job_id_from(done.stdout)

    logs = stack.tp("job", "logs", job_id, "--follow", cwd=logged_in, timeout=180)
    assert logs.returncode == 0, stack.log("worker") + logs.stderr
    assert "launching linreg on 1 node(s) x 0 GPU(s)" in logs.stdout
    assert "step  300/300" in logs.stdout
    job = wait_finished(job_id)
    assert job.state == "succeeded"
    assert job.spec["hyperparams"] == {"lr": "0.05", "note": "e2e"}
    assert job.hparams["steps"] == 300

    stored = list(LogLine.objects.filter(job=job).order_by("seq").values_list("seq", "text"))
    assert [s for s, _ in stored] == list(range(1, len(stored) + 1))  # every line once, in order
    assert logs.stdout.count("step  300/300") == 1

    series = {s.key: s for s in ScalarSeries.objects.filter(job=job)}
    assert set(series) == {"train/loss", "train/weight_error", "lr"}
    assert series["train/loss"].count == 300
    assert series["train/loss"].last < series["train/loss"].max / 10  # it actually learned

    show = stack.tp("job", "show", job_id, "--json", cwd=logged_in, check=True)
    assert json.loads(show.stdout)["state"] == "succeeded"
    listing = stack.tp("job", "ls", cwd=logged_in, check=True)
    assert job_id in listing.stdout

    # Without --follow, tp pages the same log.
    plain = stack.tp("job", "logs", job_id, cwd=logged_in, check=True)
    assert plain.stdout.splitlines() == [t for _, t in stored if t in plain.stdout.splitlines()]
    assert "step  300/300" in plain.stdout


def test_spec_errors_reach_the_user_verbatim(stack, logged_in):
    stack.tp("new", "err", "--method", "custom/custom", cwd=logged_in, check=True)
    write_experiment(logged_in, "err", "#!/usr/bin/env bash\necho hi\n")
    no_url = stack.tp("submit", "err", "--profile", "cpu", "--image", IMAGE, cwd=logged_in)
    assert no_url.returncode == 1
    assert errors.CUSTOM_OBSERVABILITY_URL_REQUIRED in no_url.stderr
    bad_registry = stack.tp("submit", "err", "--profile", "cpu", "--image", "quay.io/x/y:1",
                            "--observability-url", OBS, cwd=logged_in)
    assert bad_registry.returncode == 1
    assert "'quay.io' is not in TUNEPLANE_ALLOWED_IMAGE_REGISTRIES" in bad_registry.stderr
    export = stack.tp("export", "err", cwd=logged_in)
    assert export.returncode == 1
    assert errors.CUSTOM_NO_EXPORT_OR_EVAL.format(operation="export") in export.stderr
    assert Job.objects.count() == 0


def test_cancel_ends_the_process_tree(stack, logged_in):
    stack.tp("new", "sleepy", "--method", "custom/custom", cwd=logged_in, check=True)
    write_experiment(logged_in, "sleepy", "#!/usr/bin/env bash\nset -euo pipefail\n"
                     "echo \"child pid $$\"\nsleep 300 &\nwait\n")
    job_id = job_id_from(submit(stack, logged_in, "sleepy").stdout)
    deadline = time.monotonic() + 60
    while not LogLine.objects.filter(job__public_id=job_id, text__startswith="child pid").exists():
        assert time.monotonic() < deadline, stack.log("worker")
        time.sleep(0.2)
    pid = int(LogLine.objects.get(job__public_id=job_id, text__startswith="child pid").text.split()[-1])
    cancelled = stack.tp("job", "cancel", job_id, cwd=logged_in, check=True)
    assert "cancelled" in cancelled.stdout
    deadline = time.monotonic() + 30
    import os

    def alive(p: int) -> bool:
        try:
            os.kill(p, 0)
            return True
        except ProcessLookupError:
            return False

    while alive(pid):
        assert time.monotonic() < deadline, "train.sh survived the cancel"
        time.sleep(0.2)
    assert Job.objects.get(public_id=job_id).state == "cancelled"
