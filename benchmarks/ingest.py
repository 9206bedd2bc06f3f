"""Scalar ingest throughput through the real HTTP path into PostgreSQL, summaries and
rollups included, against MLflow's tracking server (`log_batch`, PostgreSQL backend)
on the same machine with the same workload.

    .venv/bin/python benchmarks/ingest.py [--seconds 20] [--clients 4] [--servers 2]

The peer runs from its own venv, benchmarks/.mlflow-venv (MLflow pins its own
dependencies): `python3 -m venv benchmarks/.mlflow-venv && benchmarks/.mlflow-venv/bin/pip
install 'mlflow==3.17.*' 'psycopg[binary]'`. Without it the peer is reported as skipped.
Both servers get the same number of worker processes (--servers).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stack import VENV_BIN, Daphne, free_port, make_run, setup_django  # noqa: E402

import orjson  # noqa: E402
import requests  # noqa: E402

BATCH = 2048
KEYS = ("train/loss", "train/grad_norm", "train/lr", "train/tokens_per_s")


def batches(client: int, start: int):
    """Steps advance like a training run: each batch covers 512 steps of 4 keys."""
    step = start
    while True:
        points = []
        for s in range(step, step + BATCH // len(KEYS)):
            for k in KEYS:
                points.append({"key": k, "step": s, "value": (s % 1000) / 997.0 + client, "ts": 1.7e9 + s})
        step += BATCH // len(KEYS)
        yield points


def run_clients(seconds: float, clients: int, send_one) -> tuple[int, float]:
    sent = [0] * clients
    stop = time.monotonic() + seconds
    errors: list[str] = []

    def worker(i: int) -> None:
        gen = batches(i, i * 10_000_000)
        try:
            while time.monotonic() < stop:
                points = next(gen)
                send_one(i, points)
                sent[i] += len(points)
        except Exception as exc:  # report, do not hide
            errors.append(repr(exc))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    if errors:
        raise RuntimeError(errors[0])
    return sum(sent), elapsed


def bench_tuneplane(seconds: float, clients: int, servers: int, data_dir: Path) -> float:
    runs = [make_run(f"bench-{i}") for i in range(clients)]
    daphne = Daphne(data_dir, processes=servers)
    try:
        sessions = [requests.Session() for _ in range(clients)]

        def send(i: int, points) -> None:
            job, _attempt, token = runs[i]
            # Training clients run on other machines; here they share two cores with the
            # server, so they encode with orjson to take as little of them as they can.
            r = sessions[i].post(f"{daphne.url}/api/ingest/v1/runs/{job.public_id}/scalars",
                                 data=orjson.dumps({"points": points}),
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                                 timeout=60)
            r.raise_for_status()

        run_clients(2, clients, send)  # warm-up: connections, temp tables, caches
        n, elapsed = run_clients(seconds, clients, send)
    finally:
        daphne.close()
    from apps.telemetry.models import ScalarSeries

    stored = sum(ScalarSeries.objects.values_list("count", flat=True))
    print(f"  tuneplane: {n:,} points in {elapsed:.1f} s = {n / elapsed:,.0f} points/s "
          f"({clients} clients, {servers} daphne process(es)); summaries count {stored:,} points")
    return n / elapsed


MLFLOW_VENV = Path(os.environ.get("TUNEPLANE_BENCH_MLFLOW_VENV", Path(__file__).resolve().parent / ".mlflow-venv"))


def bench_mlflow(seconds: float, clients: int, data_dir: Path, workers: int) -> float | None:
    """MLflow's tracking server with a PostgreSQL backend, fed by MLflow's own client."""
    python = MLFLOW_VENV / "bin" / "python"
    if not python.exists():
        print(f"  mlflow: skipped (python3 -m venv {MLFLOW_VENV} && "
              f"{MLFLOW_VENV}/bin/pip install 'mlflow==3.17.*' 'psycopg[binary]')")
        return None
    db = "tuneplane_bench_mlflow"
    for sql in (f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}"):
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", sql], check=True)
    port = free_port()
    server = subprocess.Popen(
        [str(MLFLOW_VENV / "bin" / "mlflow"), "server", "--backend-store-uri",
         f"postgresql://postgres@127.0.0.1:5432/{db}", "--default-artifact-root", str(data_dir / "mlflow-artifacts"),
         "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while True:
            try:
                requests.get(url + "/health", timeout=2).raise_for_status()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise RuntimeError("mlflow server did not start")
                time.sleep(0.5)
        done = subprocess.run([str(python), str(Path(__file__).with_name("_mlflow_client.py")), url,
                               str(seconds), str(clients)], capture_output=True, text=True, check=True)
        result = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        os.killpg(server.pid, 15)
        server.wait()
    rate = result["points"] / result["seconds"]
    print(f"  mlflow:    {result['points']:,} points in {result['seconds']:.1f} s = {rate:,.0f} points/s "
          f"({clients} clients, {workers} server workers)")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--servers", type=int, default=2)
    parser.add_argument("--skip-peer", action="store_true")
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="tp-bench-"))
    setup_django(data_dir)
    print(f"ingest benchmark: {args.seconds:.0f} s, batches of {BATCH} points, {os.cpu_count()} cores")
    ours = bench_tuneplane(args.seconds, args.clients, args.servers, data_dir)
    peer = None if args.skip_peer else bench_mlflow(args.seconds, args.clients, data_dir, args.servers)
    if peer:
        print(f"  ratio tuneplane / mlflow: {ours / peer:.1f}x")


if __name__ == "__main__":
    main()
