"""Names of the `TUNEPLANE_*` variables of the job environment contract.

See spec/bring-your-own-trainer.md, "The environment contract". Do not rename them:
users' train.sh scripts check every one of them with `:?`.
"""

from __future__ import annotations

WORK_DIR = "TUNEPLANE_WORK_DIR"
EXP_DIR = "TUNEPLANE_EXP_DIR"
OUT_DIR = "TUNEPLANE_OUT_DIR"
FRAMEWORK = "TUNEPLANE_FRAMEWORK"
RECIPE = "TUNEPLANE_RECIPE"
CLUSTER_NUM_NODES = "TUNEPLANE_CLUSTER_NUM_NODES"
CLUSTER_GPUS_PER_NODE = "TUNEPLANE_CLUSTER_GPUS_PER_NODE"
JOB_ENDPOINT = "TUNEPLANE_JOB_ENDPOINT"
JOB_RUN_ID = "TUNEPLANE_JOB_RUN_ID"
JOB_TOKEN = "TUNEPLANE_JOB_TOKEN"
JOB_ENABLED = "TUNEPLANE_JOB_ENABLED"
EXTERNAL_OBSERVABILITY_URL = "TUNEPLANE_EXTERNAL_OBSERVABILITY_URL"
JOB_MONITOR_INTERVAL = "TUNEPLANE_JOB_MONITOR_INTERVAL"
JOB_HEARTBEAT_INTERVAL = "TUNEPLANE_JOB_HEARTBEAT_INTERVAL"  # seconds; overrides the contract's default

# Every variable a train.sh may rely on, in the order the scaffold checks them.
JOB_CONTRACT = (
    WORK_DIR,
    EXP_DIR,
    OUT_DIR,
    FRAMEWORK,
    RECIPE,
    CLUSTER_NUM_NODES,
    CLUSTER_GPUS_PER_NODE,
    JOB_ENDPOINT,
    JOB_RUN_ID,
    JOB_TOKEN,
    JOB_ENABLED,
)

# Set by an executor for the runner only; not part of the user-facing contract.
RUNNER_WORK_ROOT = "TUNEPLANE_RUNNER_WORK_ROOT"  # scratch dir the package is unpacked into
RUNNER_ENTRYPOINT = "TUNEPLANE_RUNNER_ENTRYPOINT"  # package-relative path of train.sh
RUNNER_EXPERIMENT = "TUNEPLANE_RUNNER_EXPERIMENT"  # experiment name (experiments/<name>)
RUNNER_PACKAGE_SHA256 = "TUNEPLANE_RUNNER_PACKAGE_SHA256"
RUNNER_RETRY_SECONDS = "TUNEPLANE_RUNNER_RETRY_SECONDS"  # how long lifecycle calls keep retrying

# Multi-node jobs (the kubernetes executor's Indexed Jobs). Set on every node; a single
# node job has rank 0 and no master address.
CLUSTER_NODE_RANK = "TUNEPLANE_CLUSTER_NODE_RANK"  # this node's index, 0..NUM_NODES-1
CLUSTER_MASTER_ADDR = "TUNEPLANE_CLUSTER_MASTER_ADDR"  # DNS name of node 0 (torchrun rendezvous)
CLUSTER_MASTER_PORT = "TUNEPLANE_CLUSTER_MASTER_PORT"

# How the runner launches the entrypoint and what it adds for the child (runner only).
RUNNER_LAUNCHER = "TUNEPLANE_RUNNER_LAUNCHER"  # bash (custom) | torchrun (catalogue frameworks)
RUNNER_ARGS = "TUNEPLANE_RUNNER_ARGS"  # JSON list: checked hyperparameters and bindings as flags
RUNNER_OBSERVABILITY = "TUNEPLANE_RUNNER_OBSERVABILITY"  # platform: put the SDK capsule on PYTHONPATH
RUNNER_CAPSULE = "TUNEPLANE_RUNNER_CAPSULE"  # a directory holding only the tuneplane package
