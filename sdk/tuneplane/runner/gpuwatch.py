"""What the GPU watchdog sees: how many GPUs the job's node actually uses.

Every node's runner samples nvidia-smi and posts the count to the `gpu-usage` ingest
route; the control plane compares it with TUNEPLANE_CLUSTER_GPUS_PER_NODE (the
allocation), warns, and stops a job that stays over it. Inside a correctly isolated pod
nvidia-smi lists only the allocated GPUs, so an over-use shows up exactly when the
isolation leaks (a runtime exposing every GPU of the node) and the trainer takes them.
No nvidia-smi (CPU jobs, the local executor on a laptop): no sampler, nothing posted.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Mapping

from .._http import IngestClient, IngestError
from ..contracts import ingest
from .config import diag

SAMPLE_SECONDS = "TUNEPLANE_RUNNER_GPU_SAMPLE_SECONDS"
DEFAULT_SAMPLE_SECONDS = 30.0
TIMEOUT_SECONDS = 10.0


def _lines(nvidia_smi: str, query: str) -> list[str] | None:
    try:
        done = subprocess.run([nvidia_smi, query, "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def sample_gpus(nvidia_smi: str) -> tuple[int, int] | None:
    """(GPUs with a compute process, GPUs visible), or None when nvidia-smi fails."""
    visible = _lines(nvidia_smi, "--query-gpu=uuid")
    busy = _lines(nvidia_smi, "--query-compute-apps=gpu_uuid")
    if visible is None or busy is None:
        return None
    return len(set(busy)), len(visible)


class GpuSampler(threading.Thread):
    def __init__(self, client: IngestClient, node_rank: int, interval: float, nvidia_smi: str) -> None:
        super().__init__(name="tuneplane-runner-gpu", daemon=True)
        self._client = client
        self._rank = node_rank
        self._interval = interval
        self._nvidia_smi = nvidia_smi
        self._stopped = threading.Event()

    def stop(self) -> None:
        self._stopped.set()

    def run(self) -> None:
        while not self._stopped.wait(self._interval):
            sample = sample_gpus(self._nvidia_smi)
            if sample is None:
                continue
            try:
                self._client.post_json(ingest.ROUTE_GPU_USAGE, {
                    "node_rank": self._rank, "gpus_in_use": sample[0], "gpus_visible": sample[1]})
            except IngestError as exc:  # best effort: the watchdog simply sees nothing new
                diag(f"gpu usage report failed: {exc}")


def start_gpu_sampler(client: IngestClient, environ: Mapping[str, str], node_rank: int) -> GpuSampler | None:
    nvidia_smi = shutil.which("nvidia-smi", path=environ.get("PATH"))
    if not nvidia_smi:
        return None
    try:
        interval = float(environ.get(SAMPLE_SECONDS, "") or DEFAULT_SAMPLE_SECONDS)
    except ValueError:
        interval = DEFAULT_SAMPLE_SECONDS
    sampler = GpuSampler(client, node_rank, max(interval, 0.05), nvidia_smi)
    sampler.start()
    return sampler
