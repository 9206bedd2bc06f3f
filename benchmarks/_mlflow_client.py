"""The MLflow peer's client, run with the MLflow venv's Python (MLflow pins its own
dependencies, so it does not share the project's venv). Prints points/s as JSON.

    python _mlflow_client.py URL SECONDS CLIENTS
"""

from __future__ import annotations

import json
import sys
import threading
import time

from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

BATCH = 2048
KEYS = ("train/loss", "train/grad_norm", "train/lr", "train/tokens_per_s")


def main() -> None:
    url, seconds, clients = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    client = MlflowClient(tracking_uri=url)
    exp = client.create_experiment(f"bench-{time.time()}")
    runs = [client.create_run(exp).info.run_id for _ in range(clients)]

    def run(duration: float) -> tuple[int, float]:
        sent = [0] * clients
        stop = time.monotonic() + duration

        def worker(i: int) -> None:
            step = i * 10_000_000 + int(time.time() * 1000) % 1_000_000 * 10
            while time.monotonic() < stop:
                metrics = [Metric(k, (s % 1000) / 997.0 + i, 1_700_000_000_000 + s, s)
                           for s in range(step, step + BATCH // len(KEYS)) for k in KEYS]
                step += BATCH // len(KEYS)
                # log_batch takes at most 1,000 metrics a call: the same points, more calls.
                for j in range(0, len(metrics), 1000):
                    client.log_batch(runs[i], metrics=metrics[j:j + 1000])
                sent[i] += len(metrics)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sum(sent), time.monotonic() - t0

    run(2)  # warm-up
    n, elapsed = run(seconds)
    print(json.dumps({"points": n, "seconds": elapsed}))


if __name__ == "__main__":
    main()
