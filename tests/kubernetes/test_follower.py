"""Node 1 of a multi-node job: the real runner fetches and runs the same package but
reports nothing (node 0 owns the attempt's log sequence and lifecycle); its output goes
to its own stdout (kubectl logs) and its exit code is train.sh's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from tuneplane.contracts import env as E

from apps.jobs import services
from apps.jobs.choices import JobState
from apps.jobs.contract import job_environment
from tests.conftest import build_package, submission

TRAIN_SH = '#!/usr/bin/env bash\necho "node rank ${TUNEPLANE_CLUSTER_NODE_RANK} of ${TUNEPLANE_CLUSTER_NUM_NODES}"\nexit 7\n'


@pytest.mark.django_db(transaction=True)
def test_a_follower_node_runs_the_package_and_reports_nothing(live_server, settings, alice, tmp_path):
    settings.TUNEPLANE_INGEST_URL = live_server.url
    job, _ = services.submit_job(alice, json.dumps(submission()), build_package({"experiments/exp/train.sh": TRAIN_SH}))
    attempt, token = services.start_attempt(job.pk)
    env = {
        "PATH": os.environ["PATH"],
        **job_environment(attempt, token, out_dir=str(tmp_path / "out"), work_root=str(tmp_path / "work")),
        E.CLUSTER_NUM_NODES: "2",
        E.CLUSTER_NODE_RANK: "1",
    }

    done = subprocess.run([sys.executable, "-m", "tuneplane.runner"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)

    assert done.returncode == 7, done.stderr
    assert "node rank 1 of 2" in done.stdout
    assert "node 0 reports to the control plane" in done.stderr
    job.refresh_from_db()
    assert job.state == JobState.QUEUED  # no `started`, no `exited` from node 1
    logs = api_client_for(alice).get(f"/api/v1/jobs/{job.public_id}/logs").json()
    assert logs["lines"] == []


def api_client_for(user):
    from tests.conftest import api_client

    return api_client(user)
