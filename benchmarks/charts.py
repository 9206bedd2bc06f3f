"""Chart query on a 1,000,000-point series: the rollup-backed reduction against
fetching the whole history (and, for scale, a full-scan reduction in SQL).

    .venv/bin/python benchmarks/charts.py [--points 1000000] [--buckets 1000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stack import Daphne, make_run, setup_django  # noqa: E402


def timed(fn, repeat: int) -> tuple[float, object]:
    samples, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1000, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--buckets", type=int, default=1000)
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="tp-bench-"))
    setup_django(data_dir)
    import requests
    from django.db import connection

    from apps.accounts.services import issue_api_token
    from apps.telemetry import scalars
    from apps.telemetry.models import ScalarPoint, ScalarSeries

    job, attempt, _ = make_run("charts")
    t0 = time.perf_counter()
    for start in range(0, args.points, 2048):
        batch = [{"key": "train/loss", "step": s, "value": 1.0 / (1 + s % 5000) + (10.0 if s == 777_777 else 0.0)}
                 for s in range(start, min(start + 2048, args.points))]
        scalars.ingest_scalars(attempt, {"points": batch})
    print(f"chart benchmark: {args.points:,} points ingested through the ingest module in {time.perf_counter() - t0:.1f} s")
    series = ScalarSeries.objects.get(job=job, key="train/loss")

    ours_ms, buckets = timed(lambda: scalars.reduce_series(series, args.buckets, None, None), 21)
    assert max(b["max"] for b in buckets) > 10, "the spike must survive the reduction"
    zoom_ms, _ = timed(lambda: scalars.reduce_series(series, args.buckets, 250_000, 750_000), 21)
    fetch_ms, rows = timed(lambda: list(ScalarPoint.objects.filter(series=series).order_by("step")
                                        .values_list("step", "value")), 3)

    def full_scan():
        with connection.cursor() as c:
            c.execute("SELECT step / %s, min(value), max(value), avg(value) FROM telemetry_scalarpoint "
                      "WHERE series_id = %s GROUP BY 1", [args.points // args.buckets, series.pk])
            return c.fetchall()

    scan_ms, _ = timed(full_scan, 5)

    user = job.owner
    _, token = issue_api_token(user)
    daphne = Daphne(data_dir, processes=1)
    try:
        url = f"{daphne.url}/api/v1/jobs/{job.public_id}/series/points"
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {token}"

        def over_http():
            r = session.get(url, params={"key": "train/loss", "buckets": args.buckets}, timeout=30)
            r.raise_for_status()
            return r.json()

        http_ms, body = timed(over_http, 21)
    finally:
        daphne.close()

    print(f"  rollup reduction to {len(buckets)} buckets:           {ours_ms:8.1f} ms (median of 21)")
    print(f"  same, zoom window of 500,000 steps:            {zoom_ms:8.1f} ms")
    print(f"  same, through HTTP (daphne, JSON):             {http_ms:8.1f} ms ({len(body['buckets'])} buckets)")
    print(f"  peer: fetch the whole history ({len(rows):,} rows): {fetch_ms:8.1f} ms (median of 3)")
    print(f"  peer: full-scan reduction in SQL:              {scan_ms:8.1f} ms (median of 5)")
    print(f"  ratio whole-history fetch / rollup reduction:  {fetch_ms / ours_ms:8.1f}x")
    print(f"  ratio full-scan reduction / rollup reduction:  {scan_ms / ours_ms:8.1f}x")


if __name__ == "__main__":
    main()
