"""CSV export peak memory of the serving process at 1,000,000 and 4,000,000 points:
the export streams, so the peak should not grow with the series.

    .venv/bin/python benchmarks/export_memory.py [--sizes 1000000 4000000]

Points are written with one INSERT ... generate_series (the export is what is measured,
not ingest). Each size gets a fresh daphne; its peak RSS (VmHWM) is read after the
whole CSV was streamed and counted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stack import Daphne, make_run, setup_django  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 4_000_000])
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="tp-bench-"))
    setup_django(data_dir)
    import requests
    from django.db import connection

    from apps.accounts.services import issue_api_token
    from apps.telemetry.models import ScalarSeries

    print("CSV export peak memory (daphne VmHWM), streamed over HTTP")
    results = []
    for size in args.sizes:
        job, _attempt, _ = make_run(f"export-{size}")
        series = ScalarSeries.objects.create(job=job, key="train/loss")
        with connection.cursor() as c:
            c.execute(
                "INSERT INTO telemetry_scalarpoint (series_id, step, value, invalid, attempt_number, ts) "
                "SELECT %s, g, random(), '', 1, now() FROM generate_series(0, %s - 1) g", [series.pk, size])
            c.execute("ANALYZE telemetry_scalarpoint")  # as autovacuum would after such a load
        _, token = issue_api_token(job.owner)
        daphne = Daphne(data_dir, processes=1)
        try:
            baseline = daphne.peak_rss_kib()[0]
            t0 = time.perf_counter()
            lines = body = 0
            with requests.get(f"{daphne.url}/api/v1/jobs/{job.public_id}/series.csv", stream=True, timeout=600,
                              headers={"Authorization": f"Bearer {token}"}) as r:
                r.raise_for_status()
                for chunk in r.iter_content(chunk_size=1 << 16):
                    body += len(chunk)
                    lines += chunk.count(b"\n")
            elapsed = time.perf_counter() - t0
            peak = daphne.peak_rss_kib()[0]
        finally:
            daphne.close()
        assert lines == size + 1, (lines, size)
        results.append(peak)
        print(f"  {size:>10,} points: {body / 1e6:7.1f} MB of CSV in {elapsed:5.1f} s; "
              f"peak RSS {peak / 1024:6.1f} MiB (idle {baseline / 1024:6.1f} MiB)")
    if len(results) >= 2:
        print(f"  ratio peak({args.sizes[-1]:,}) / peak({args.sizes[0]:,}): {results[-1] / results[0]:.2f}")


if __name__ == "__main__":
    main()
