"""`tuneplane.report.log()` call cost with the ingest server up, and with it down
(nothing listening): the median must not move, because log() never waits on the network.

    .venv/bin/python benchmarks/log_cost.py
"""

from __future__ import annotations

import importlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stack import Daphne, free_port, make_run, setup_django  # noqa: E402

CALLS = 1000
ROUNDS = 30


def measure(label: str, endpoint: str, run_id: str, token: str) -> float:
    os.environ.update({"TUNEPLANE_JOB_ENDPOINT": endpoint, "TUNEPLANE_JOB_RUN_ID": run_id,
                       "TUNEPLANE_JOB_TOKEN": token, "TUNEPLANE_JOB_ENABLED": "1"})
    import tuneplane.report as report

    report = importlib.reload(report)  # a fresh binding for this endpoint
    report.init(hparams={"bench": label})
    medians = []
    for r in range(ROUNDS):
        samples = []
        for i in range(CALLS):
            t0 = time.perf_counter_ns()
            report.log({"train/loss": 0.5, "train/lr": 1e-5, "train/grad_norm": 1.25}, step=r * CALLS + i)
            samples.append(time.perf_counter_ns() - t0)
        medians.append(statistics.median(samples))
    report.finish(timeout=5)
    stats = report.stats()
    median_us = statistics.median(medians) / 1000
    print(f"  server {label:4}: log() median {median_us:5.2f} us over {ROUNDS}x{CALLS} calls; stats {stats}")
    return median_us


def main() -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="tp-bench-"))
    setup_django(data_dir)
    job, _attempt, token = make_run("logcost")
    print("log() call cost (3-key dict)")
    daphne = Daphne(data_dir, processes=1)
    try:
        up = measure("up", f"{daphne.url}/api/ingest/v1", job.public_id, token)
    finally:
        daphne.close()
    down = measure("down", f"http://127.0.0.1:{free_port()}/api/ingest/v1", job.public_id, token)
    print(f"  ratio down / up: {down / up:.2f}")


if __name__ == "__main__":
    main()
