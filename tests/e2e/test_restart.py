"""The control plane restarted in the middle of a running job loses no line."""

from __future__ import annotations

import time

import pytest

from apps.jobs.models import Job
from apps.telemetry.models import LogLine
from tests.e2e.conftest import write_experiment
from tests.e2e.conftest import job_id_from, wait_finished
from tests.e2e.test_custom_job import IMAGE, OBS

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

LINES = 120


def test_a_control_plane_restart_mid_run_loses_and_duplicates_nothing(stack, logged_in):
    stack.tp("new", "steady", "--method", "custom/custom", cwd=logged_in, check=True)
    write_experiment(logged_in, "steady", "#!/usr/bin/env bash\nset -euo pipefail\n"
                     f"for i in $(seq 1 {LINES}); do echo \"line $i\"; sleep 0.05; done\n")
    done = stack.tp("submit", "steady", "--profile", "cpu", "--image", IMAGE, "--observability-url", OBS,
                    cwd=logged_in, check=True)
    job_id = job_id_from(done.stdout)

    deadline = time.monotonic() + 60
    while LogLine.objects.filter(job__public_id=job_id).count() < 10:
        assert time.monotonic() < deadline, stack.log("worker")
        time.sleep(0.1)
    # The whole control plane goes down: web server and worker. The job must not.
    stack.stop_web()
    stack.stop_worker()
    during = LogLine.objects.filter(job__public_id=job_id).count()
    time.sleep(3)  # the script keeps printing while nothing answers
    assert LogLine.objects.filter(job__public_id=job_id).count() == during
    stack.start_web()
    stack.start_worker()

    job = wait_finished(job_id, seconds=120)
    assert job.state == "succeeded", stack.log("web")
    texts = list(LogLine.objects.filter(job=job).order_by("seq").values_list("text", flat=True))
    assert texts == [f"line {i}" for i in range(1, LINES + 1)]

    # And the follower sees each line once too.
    follow = stack.tp("job", "logs", job_id, "--follow", cwd=logged_in, check=True)
    assert follow.stdout.splitlines() == [f"line {i}" for i in range(1, LINES + 1)]
    assert Job.objects.get(public_id=job_id).exit_code == 0
