"""The job environment contract (spec: "The environment contract"), built once for
every executor so that local processes and Kubernetes pods see the same variables."""

from __future__ import annotations

import json

from django.conf import settings

from tuneplane.contracts import env as E
from tuneplane.contracts.ingest import INGEST_PREFIX

from .models import ExecutionAttempt


def ingest_endpoint() -> str:
    return f"{settings.TUNEPLANE_INGEST_URL}/{INGEST_PREFIX}"


def job_environment(attempt: ExecutionAttempt, token: str, *, out_dir: str, work_root: str) -> dict[str, str]:
    """Every TUNEPLANE_* variable the runner and train.sh get, except WORK_DIR and
    EXP_DIR, which the runner sets once it has unpacked the package under work_root."""
    job = attempt.job
    spec = job.spec
    framework = spec["framework"]
    resources = spec["resources"]
    recipe_name = spec["recipe"]["name"]
    env = {
        E.OUT_DIR: out_dir,
        E.FRAMEWORK: framework["name"],
        E.RECIPE: recipe_name.split("/", 1)[-1],
        # The allocation, not the request: quota and the watchdog measure against these.
        E.CLUSTER_NUM_NODES: str(resources["num_nodes"]),
        E.CLUSTER_GPUS_PER_NODE: str(resources["gpus_per_node"]),
        E.JOB_ENDPOINT: ingest_endpoint(),
        E.JOB_RUN_ID: job.public_id,
        E.JOB_TOKEN: token,
        E.JOB_ENABLED: "1",
        E.RUNNER_WORK_ROOT: work_root,
        E.RUNNER_ENTRYPOINT: framework["entrypoint"],
        E.RUNNER_EXPERIMENT: spec["experiment"],
        E.RUNNER_PACKAGE_SHA256: spec["package"]["sha256"],
    }
    if framework.get("observability_url"):
        env[E.EXTERNAL_OBSERVABILITY_URL] = framework["observability_url"]
    # How the runner launches the entrypoint, and whether it puts the SDK capsule on the
    # child's PYTHONPATH (platform observability). Jobs admitted before these existed
    # have no "launch" section: bash train.sh, as custom always was.
    launch = spec.get("launch") or {}
    env[E.RUNNER_LAUNCHER] = launch.get("launcher") or "bash"
    env[E.RUNNER_ARGS] = json.dumps(launch.get("args") or [])
    env[E.RUNNER_OBSERVABILITY] = framework.get("observability") or "external"
    # A referenced environment: its reference, split and address (apps.environments).
    from apps.environments.runtime import job_environment_variables

    env.update(job_environment_variables(spec))
    return env
