"""Scalar ingest and chart reduction at scale.

Ingest (spec "Delivery and capacity limits"): a batch is validated whole, then written
with one COPY into a per-connection staging table and set-based statements:

1. insert the points that are new (ON CONFLICT DO NOTHING), remembering which were new;
2. update the series summaries and the rollups from the new points only (LEAST/GREATEST,
   sums and counts), so a retried batch adds nothing;
3. re-sent steps whose value changed are updated in place, and only the summaries and
   rollup buckets holding them are recomputed from the raw points ("corrected steps
   repair their extrema").

Charts read the coarsest rollup level that still gives each chart bucket at least one
whole rollup bucket, plus raw points for the partial buckets at the window's edges, so a
chart reads rows in proportion to its buckets and never averages a spike away.

PostgreSQL gets the set-based path. The embedded default's SQLite gets a portable ORM
path with the same results (tests run it on PostgreSQL too and compare).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import UTC, datetime

from django.db import connection, transaction
from django.db.models import Count, Max, Min, Q, Sum
from django.utils import timezone

from apps.accounts.errors import DomainError, TooLarge
from apps.jobs.models import ExecutionAttempt, Job
from tuneplane.contracts import limits
from tuneplane.contracts.ingest import NONFINITE_ENCODING

from .models import ROLLUP_SHIFTS, ScalarPoint, ScalarRollup, ScalarSeries

Row = tuple[str, int, "float | None", str, float]  # key, step, value, invalid, ts (Unix seconds)

_NONFINITE_NAMES = {"NaN", "Infinity", "-Infinity"}
_MAX_STEP = 2**62


def _invalid(field: str, message: str) -> DomainError:
    return DomainError(f"{field} {message}", field=field)


def parse_points(payload: object) -> list[Row]:
    """Validate a whole batch; the later of two copies of a (key, step) wins."""
    if not isinstance(payload, dict) or not isinstance(payload.get("points"), list):
        raise DomainError("body must be a JSON object with a 'points' list", field="points")
    points = payload["points"]
    if len(points) > limits.SCALAR_BATCH_MAX_POINTS:
        raise TooLarge(
            f"points: {len(points)} in one batch; the limit is {limits.SCALAR_BATCH_MAX_POINTS}",
            field="points",
        )
    now = timezone.now().timestamp()
    latest: dict[tuple[str, int], Row] = {}
    max_key = limits.SCALAR_KEY_MAX_CHARS
    for i, point in enumerate(points):
        if type(point) is not dict:
            raise _invalid(f"points[{i}]", "must be an object")
        key = point.get("key")
        if type(key) is not str or not key or len(key) > max_key:
            raise _invalid(f"points[{i}].key", f"must be a non-empty string of at most {max_key} characters")
        step = point.get("step")
        if type(step) is not int or not 0 <= step <= _MAX_STEP:
            raise _invalid(f"points[{i}].step", f"must be an integer from 0 to {_MAX_STEP}")
        raw = point.get("value")
        kind = type(raw)
        if kind is float:
            if math.isfinite(raw):
                value, invalid = raw, ""
            else:  # a client that sent a bare NaN token
                value, invalid = None, ("NaN" if math.isnan(raw) else ("Infinity" if raw > 0 else "-Infinity"))
        elif kind is int:
            value, invalid = float(raw), ""
            if not math.isfinite(value):
                raise _invalid(f"points[{i}].value", "is out of range")
        elif kind is str and raw in _NONFINITE_NAMES:
            value, invalid = None, raw
        else:
            raise _invalid(f"points[{i}].value", "must be a number or one of 'NaN', 'Infinity', '-Infinity'")
        ts = point.get("ts")
        if ts is None:
            when = now
        elif type(ts) in (int, float) and 0 <= ts < 1e11:  # rejects NaN too
            when = float(ts)
        else:
            raise _invalid(f"points[{i}].ts", "must be a Unix timestamp in seconds")
        latest[(key, step)] = (key, step, value, invalid, when)
    return list(latest.values())


assert set(NONFINITE_ENCODING) == _NONFINITE_NAMES  # the contract and the parser agree


def ensure_series(job_id: int, keys: set[str]) -> dict[str, int]:
    """Series ids for `keys`, creating missing ones within the per-run cap."""
    found = dict(ScalarSeries.objects.filter(job_id=job_id, key__in=keys).values_list("key", "id"))
    missing = keys - found.keys()
    if missing:
        # Serialise series creation per job so two concurrent batches cannot both pass the cap.
        Job.objects.select_for_update().filter(pk=job_id).values_list("pk", flat=True).first()
        existing = ScalarSeries.objects.filter(job_id=job_id).count()
        if existing + len(missing) > limits.SCALAR_SERIES_MAX_PER_RUN:
            raise TooLarge(
                f"this run has {existing} series and the batch adds {len(missing)}; "
                f"a run admits at most {limits.SCALAR_SERIES_MAX_PER_RUN} scalar series",
                field="points",
            )
        ScalarSeries.objects.bulk_create(
            [ScalarSeries(job_id=job_id, key=k) for k in sorted(missing)], ignore_conflicts=True
        )
        found = dict(ScalarSeries.objects.filter(job_id=job_id, key__in=keys).values_list("key", "id"))
    return found


def ingest_scalars(attempt: ExecutionAttempt, payload: object, *, portable: bool = False) -> dict:
    rows = parse_points(payload)
    if not rows:
        return {"accepted": 0}
    with transaction.atomic():
        series_ids = ensure_series(attempt.job_id, {r[0] for r in rows})
        if connection.vendor == "postgresql" and not portable:
            _store_postgresql(attempt.number, rows, series_ids)
        else:
            _store_portable(attempt.number, rows, series_ids)
    return {"accepted": len(rows)}


# PostgreSQL ---------------------------------------------------------------------------

_STAGING = """
CREATE TEMP TABLE IF NOT EXISTS tp_scalar_in (
    series_id bigint, step bigint, value double precision, invalid varchar(9), ts double precision
) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS tp_scalar_new (
    series_id bigint, step bigint, value double precision, invalid varchar(9)
) ON COMMIT DELETE ROWS;
-- Emptied explicitly as well: a batch nested in an outer transaction (a savepoint) must
-- not see the rows of the previous batch.
DELETE FROM tp_scalar_in;
DELETE FROM tp_scalar_new;
"""

_INSERT_NEW = """
WITH ins AS (
    INSERT INTO telemetry_scalarpoint (series_id, step, value, invalid, attempt_number, ts)
    SELECT series_id, step, value, invalid, %s, to_timestamp(ts) FROM tp_scalar_in
    ON CONFLICT (series_id, step) DO NOTHING
    RETURNING series_id, step, value, invalid
)
INSERT INTO tp_scalar_new SELECT series_id, step, value, invalid FROM ins
"""

_UPDATE_SUMMARIES = """
UPDATE telemetry_scalarseries s SET
    count = s.count + a.n,
    invalid_count = s.invalid_count + a.n_invalid,
    min = LEAST(s.min, a.min_value),
    max = GREATEST(s.max, a.max_value),
    first_step = LEAST(s.first_step, a.first_step),
    last = CASE WHEN s.last_step IS NULL OR a.last_step >= s.last_step THEN a.last_value ELSE s.last END,
    last_step = GREATEST(s.last_step, a.last_step)
FROM (
    SELECT series_id, count(*) AS n, count(*) FILTER (WHERE invalid <> '') AS n_invalid,
           min(value) AS min_value, max(value) AS max_value, min(step) AS first_step,
           max(step) AS last_step, (array_agg(value ORDER BY step DESC))[1] AS last_value
    FROM tp_scalar_new GROUP BY series_id
) a
WHERE s.id = a.series_id
"""

_FINEST = ROLLUP_SHIFTS[0]

# The finest level is aggregated from the new points once; each coarser level is folded
# from the finest level's partial aggregates of this batch (a few rows), not re-sorted
# from the points.
_BATCH_ROLLUP = f"""
CREATE TEMP TABLE IF NOT EXISTS tp_scalar_fine (
    series_id bigint, bucket bigint, count bigint, invalid_count bigint, min double precision,
    max double precision, sum double precision, first_step bigint, first_value double precision,
    last_step bigint, last_value double precision
) ON COMMIT DELETE ROWS;
DELETE FROM tp_scalar_fine;
INSERT INTO tp_scalar_fine
SELECT series_id, step >> {_FINEST}, count(value), count(*) FILTER (WHERE invalid <> ''),
       min(value), max(value), coalesce(sum(value), 0),
       min(step), (array_agg(value ORDER BY step))[1],
       max(step), (array_agg(value ORDER BY step DESC))[1]
FROM tp_scalar_new GROUP BY series_id, step >> {_FINEST};
"""

_UPSERT_SET = """
ON CONFLICT (series_id, shift, bucket) DO UPDATE SET
    count = r.count + EXCLUDED.count,
    invalid_count = r.invalid_count + EXCLUDED.invalid_count,
    min = LEAST(r.min, EXCLUDED.min),
    max = GREATEST(r.max, EXCLUDED.max),
    sum = r.sum + EXCLUDED.sum,
    first_value = CASE WHEN EXCLUDED.first_step < r.first_step THEN EXCLUDED.first_value ELSE r.first_value END,
    first_step = LEAST(r.first_step, EXCLUDED.first_step),
    last_value = CASE WHEN EXCLUDED.last_step > r.last_step THEN EXCLUDED.last_value ELSE r.last_value END,
    last_step = GREATEST(r.last_step, EXCLUDED.last_step)
"""

_UPDATE_ROLLUPS = f"""
INSERT INTO telemetry_scalarrollup AS r
    (series_id, shift, bucket, count, invalid_count, min, max, sum,
     first_step, first_value, last_step, last_value)
SELECT series_id, {_FINEST}, bucket, count, invalid_count, min, max, sum,
       first_step, first_value, last_step, last_value
FROM tp_scalar_fine
{_UPSERT_SET};
""" + "".join(
    f"""
INSERT INTO telemetry_scalarrollup AS r
    (series_id, shift, bucket, count, invalid_count, min, max, sum,
     first_step, first_value, last_step, last_value)
SELECT series_id, {shift}, bucket >> {shift - _FINEST}, sum(count), sum(invalid_count), min(min), max(max),
       sum(sum), min(first_step), (array_agg(first_value ORDER BY first_step))[1],
       max(last_step), (array_agg(last_value ORDER BY last_step DESC))[1]
FROM tp_scalar_fine GROUP BY series_id, bucket >> {shift - _FINEST}
{_UPSERT_SET};
"""
    for shift in ROLLUP_SHIFTS[1:]
)

_UPDATE_CHANGED = """
UPDATE telemetry_scalarpoint p
SET value = i.value, invalid = i.invalid, attempt_number = %s, ts = to_timestamp(i.ts)
FROM tp_scalar_in i
WHERE p.series_id = i.series_id AND p.step = i.step
  AND NOT EXISTS (SELECT 1 FROM tp_scalar_new n WHERE n.series_id = i.series_id AND n.step = i.step)
  AND (p.value IS DISTINCT FROM i.value OR p.invalid <> i.invalid)
RETURNING p.series_id, p.step
"""


_COPY_NULL = "\\N"


def _store_postgresql(attempt_number: int, rows: list[Row], series_ids: dict[str, int]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(_STAGING)
        # One text payload for COPY: building it with a join is several times faster than
        # psycopg's per-row write_row, and repr() keeps every float exact.
        payload = "".join(
            f"{series_ids[key]}\t{step}\t{_COPY_NULL if value is None else repr(value)}\t{invalid}\t{ts!r}\n"
            for key, step, value, invalid, ts in rows
        )
        with cursor.cursor.copy("COPY tp_scalar_in (series_id, step, value, invalid, ts) FROM STDIN") as copy:
            copy.write(payload)
        cursor.execute(_INSERT_NEW, [attempt_number])
        inserted = cursor.rowcount
        if inserted:
            cursor.execute(_UPDATE_SUMMARIES)
            cursor.execute(_BATCH_ROLLUP)
            cursor.execute(_UPDATE_ROLLUPS)
        if inserted < len(rows):
            cursor.execute(_UPDATE_CHANGED, [attempt_number])
            changed = cursor.fetchall()
            if changed:
                repair(changed)


# Portable (SQLite, and the correction path) --------------------------------------------


def _store_portable(attempt_number: int, rows: list[Row], series_ids: dict[str, int]) -> None:
    ScalarPoint.objects.bulk_create(
        [
            ScalarPoint(series_id=series_ids[key], step=step, value=value, invalid=invalid,
                        attempt_number=attempt_number, ts=datetime.fromtimestamp(ts, tz=UTC))
            for key, step, value, invalid, ts in rows
        ],
        update_conflicts=True,
        unique_fields=["series", "step"],
        update_fields=["value", "invalid", "attempt_number", "ts"],
        batch_size=500,
    )
    repair((series_ids[key], step) for key, step, *_ in rows)


def repair(points: Iterable[tuple[int, int]]) -> None:
    """Recompute the rollup buckets holding these (series_id, step) pairs from the raw
    points, then the summaries of their series from the rollups."""
    buckets: dict[int, set[tuple[int, int]]] = {}
    for series_id, step in points:
        target = buckets.setdefault(series_id, set())
        for shift in ROLLUP_SHIFTS:
            target.add((shift, step >> shift))
    for series_id, pairs in buckets.items():
        for shift, bucket in sorted(pairs):
            _recompute_bucket(series_id, shift, bucket)
        recompute_summary(series_id)


def _recompute_bucket(series_id: int, shift: int, bucket: int) -> None:
    lo, hi = bucket << shift, ((bucket + 1) << shift) - 1
    points = ScalarPoint.objects.filter(series_id=series_id, step__gte=lo, step__lte=hi)
    agg = points.aggregate(
        count=Count("value"),
        invalid_count=Count("step", filter=~Q(invalid="")),
        min=Min("value"),
        max=Max("value"),
        sum=Sum("value"),
        first_step=Min("step"),
        last_step=Max("step"),
    )
    if agg["first_step"] is None:
        ScalarRollup.objects.filter(series_id=series_id, shift=shift, bucket=bucket).delete()
        return
    values = dict(points.filter(step__in=[agg["first_step"], agg["last_step"]]).values_list("step", "value"))
    ScalarRollup.objects.update_or_create(
        series_id=series_id,
        shift=shift,
        bucket=bucket,
        defaults={
            **agg,
            "sum": agg["sum"] or 0.0,
            "first_value": values.get(agg["first_step"]),
            "last_value": values.get(agg["last_step"]),
        },
    )


def recompute_summary(series_id: int) -> None:
    """A series' summary from its coarsest rollups: a handful of rows, not the series."""
    coarsest = ScalarRollup.objects.filter(series_id=series_id, shift=ROLLUP_SHIFTS[-1])
    agg = coarsest.aggregate(
        finite=Sum("count"),
        invalid_count=Sum("invalid_count"),
        min=Min("min"),
        max=Max("max"),
        first_step=Min("first_step"),
        last_step=Max("last_step"),
    )
    last = None
    if agg["last_step"] is not None:
        last = coarsest.filter(last_step=agg["last_step"]).values_list("last_value", flat=True).first()
    ScalarSeries.objects.filter(pk=series_id).update(
        count=(agg["finite"] or 0) + (agg["invalid_count"] or 0),
        invalid_count=agg["invalid_count"] or 0,
        min=agg["min"],
        max=agg["max"],
        first_step=agg["first_step"],
        last_step=agg["last_step"],
        last=last,
    )


def rebuild_series(series_id: int) -> None:
    """Rollups and summary of a whole series from its points (the backfill migration)."""
    ScalarRollup.objects.filter(series_id=series_id).delete()
    steps = ScalarPoint.objects.filter(series_id=series_id).values_list("step", flat=True)
    repair((series_id, step) for step in steps.iterator(chunk_size=10_000))


# Charts -------------------------------------------------------------------------------

_ROLLUP_BUCKETS = """
SELECT (bucket << %(shift)s) / %(width)s AS chart_bucket,
       min(min), max(max), sum(sum), sum(count)::bigint, sum(invalid_count)::bigint,
       min(first_step), (array_agg(first_value ORDER BY first_step))[1],
       max(last_step), (array_agg(last_value ORDER BY last_step DESC))[1]
FROM telemetry_scalarrollup
WHERE series_id = %(series)s AND shift = %(shift)s AND bucket BETWEEN %(lo)s AND %(hi)s
GROUP BY 1
"""

_RAW_BUCKETS = """
SELECT step / %(width)s AS chart_bucket,
       min(value), max(value), coalesce(sum(value), 0), count(value), count(*) FILTER (WHERE invalid <> ''),
       min(step), (array_agg(value ORDER BY step))[1],
       max(step), (array_agg(value ORDER BY step DESC))[1]
FROM telemetry_scalarpoint
WHERE series_id = %(series)s AND step BETWEEN %(lo)s AND %(hi)s
GROUP BY 1
"""


def _merge(into: dict[int, list], rows) -> None:
    for b, mn, mx, total, n, n_invalid, fs, fv, ls, lv in rows:
        cur = into.get(b)
        if cur is None:
            into[b] = [mn, mx, total or 0.0, n or 0, n_invalid or 0, fs, fv, ls, lv]
            continue
        cur[0] = mn if cur[0] is None else (cur[0] if mn is None else min(cur[0], mn))
        cur[1] = mx if cur[1] is None else (cur[1] if mx is None else max(cur[1], mx))
        cur[2] += total or 0.0
        cur[3] += n or 0
        cur[4] += n_invalid or 0
        if fs < cur[5]:
            cur[5], cur[6] = fs, fv
        if ls > cur[7]:
            cur[7], cur[8] = ls, lv


def chart_plan(lo: int, hi: int, buckets: int) -> tuple[int | None, int]:
    """(rollup shift or None for raw points, chart bucket width in steps)."""
    want = max(1, math.ceil((hi - lo + 1) / buckets))
    usable = [s for s in ROLLUP_SHIFTS if (1 << s) <= want]
    if not usable:
        return None, want
    shift = usable[-1]
    unit = 1 << shift
    return shift, math.ceil(want / unit) * unit


def reduce_series(series: ScalarSeries, buckets: int, start: int | None, end: int | None) -> list[dict]:
    """At most about `buckets` buckets over [start, end] with min, max, mean, first and last
    per bucket. Chart buckets are aligned to multiples of their width so zooming is stable."""
    lo = series.first_step if start is None else max(start, 0)
    hi = series.last_step if end is None else end
    if lo is None or hi is None or hi < lo:
        return []
    if connection.vendor != "postgresql":
        return _reduce_portable(series, buckets, lo, hi)
    shift, width = chart_plan(lo, hi, buckets)
    if shift is not None and not ScalarRollup.objects.filter(series=series).exists():
        shift = None  # stored before rollups existed and not yet rebuilt: reduce raw points
    merged: dict[int, list] = {}
    with connection.cursor() as cursor:
        if shift is None:
            cursor.execute(_RAW_BUCKETS, {"series": series.pk, "width": width, "lo": lo, "hi": hi})
            _merge(merged, cursor.fetchall())
        else:
            unit = 1 << shift
            first_full = -(-lo // unit)  # ceil
            last_full = (hi + 1) // unit - 1
            if first_full <= last_full:
                cursor.execute(_ROLLUP_BUCKETS, {"series": series.pk, "shift": shift, "width": width,
                                                 "lo": first_full, "hi": last_full})
                _merge(merged, cursor.fetchall())
                edges = [(lo, first_full * unit - 1), ((last_full + 1) * unit, hi)]
            else:
                edges = [(lo, hi)]
            for edge_lo, edge_hi in edges:
                if edge_lo <= edge_hi:
                    cursor.execute(_RAW_BUCKETS, {"series": series.pk, "width": width, "lo": edge_lo, "hi": edge_hi})
                    _merge(merged, cursor.fetchall())
    return [_bucket_dict(v) for _, v in sorted(merged.items())]


def _bucket_dict(v: list) -> dict:
    mn, mx, total, n, n_invalid, fs, fv, ls, lv = v
    return {"step": fs, "last_step": ls, "min": mn, "max": mx, "mean": (total / n) if n else None,
            "first": fv, "last": lv, "count": n, "invalid_count": n_invalid}


def _reduce_portable(series: ScalarSeries, buckets: int, lo: int, hi: int) -> list[dict]:
    width = max(1, math.ceil((hi - lo + 1) / buckets))
    merged: dict[int, list] = {}
    points = ScalarPoint.objects.filter(series=series, step__gte=lo, step__lte=hi).order_by("step")
    for step, value, invalid in points.values_list("step", "value", "invalid").iterator(chunk_size=5000):
        row = (step // width, value, value, value or 0.0, 0 if value is None else 1, 1 if invalid else 0,
               step, value, step, value)
        _merge(merged, [row])
    return [_bucket_dict(v) for _, v in sorted(merged.items())]
