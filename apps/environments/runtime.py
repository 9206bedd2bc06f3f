"""What an executor adds to a job that references an environment.

- `job_environment_variables(spec)`: the job's variables. The split and the reference
  are set here from the admitted spec; the directory (and, for openenv + local, the
  address) are set by the runner once it has materialised the version inside the job.
- `sidecar_container(spec)`: openenv + container. The image runs next to the trainer in
  the same Pod, so it answers on the Pod's loopback at `image_port`; it gets no GPU, no
  volume mounts and no service-account token (spec: "every resource it does not receive
  is one it cannot reach past its own execution"). The Kubernetes executor's renderer
  adds the returned dict to the Pod's containers.
"""

from __future__ import annotations

import json
from typing import Any

from tuneplane.contracts import environment as C

SIDECAR_NAME = "tuneplane-environment"
SIDECAR_RESOURCES = {
    "requests": {"cpu": "500m", "memory": "1Gi"},
    "limits": {"cpu": "2", "memory": "4Gi"},
}


def environment_block(spec: dict[str, Any]) -> dict[str, Any] | None:
    block = spec.get("environment") if isinstance(spec, dict) else None
    return block or None


def job_environment_variables(spec: dict[str, Any]) -> dict[str, str]:
    block = environment_block(spec)
    if block is None:
        return {}
    env = {
        C.ENV_JOB_ENVIRONMENT: block["ref"],
        C.ENV_JOB_ENVIRONMENT_SPLIT: block["split"],
        # The runner's instructions; TUNEPLANE_RUNNER_* never reaches train.sh.
        C.ENV_RUNNER_ENVIRONMENT: json.dumps(block, sort_keys=True, separators=(",", ":")),
    }
    if block.get("address"):
        env[C.ENV_JOB_ENVIRONMENT_URL] = block["address"]
    return env


def sidecar_container(spec: dict[str, Any]) -> dict[str, Any] | None:
    """The environment's container for the job's Pod, or None when it has none."""
    block = environment_block(spec)
    if block is None or block.get("deployment") != C.DEPLOYMENT_CONTAINER:
        return None
    port = int(block.get("image_port") or C.DEFAULT_IMAGE_PORT)
    return {
        "name": SIDECAR_NAME,
        "image": block["image"],
        # Pinned runtime artifact: pulled as admitted, never re-resolved ad hoc.
        "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "environment", "containerPort": port, "protocol": "TCP"}],
        "env": [{"name": "PORT", "value": str(port)}],
        # CPU and memory only: no nvidia.com/gpu, whatever the trainer asks for.
        "resources": json.loads(json.dumps(SIDECAR_RESOURCES)),
        "volumeMounts": [],
        "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 2, "failureThreshold": 60},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": False,
        },
    }
