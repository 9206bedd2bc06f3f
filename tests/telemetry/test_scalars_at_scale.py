"""Rollups and chart reduction: the set-based path equals a brute-force reduction,
corrections repair extrema, retries add nothing, and the portable path agrees."""

from __future__ import annotations

import math
import random

import pytest

from apps.telemetry import scalars
from apps.telemetry.models import ScalarPoint, ScalarRollup, ScalarSeries

pytestmark = pytest.mark.django_db


def brute_force(points: dict[int, float | None], lo: int, hi: int, width: int) -> list[dict]:
    groups: dict[int, list[tuple[int, float | None]]] = {}
    for step in sorted(points):
        if lo <= step <= hi:
            groups.setdefault(step // width, []).append((step, points[step]))
    out = []
    for _, members in sorted(groups.items()):
        finite = [v for _, v in members if v is not None]
        out.append({
            "step": members[0][0], "last_step": members[-1][0],
            "min": min(finite) if finite else None, "max": max(finite) if finite else None,
            "mean": sum(finite) / len(finite) if finite else None,
            "first": members[0][1], "last": members[-1][1],
            "count": len(finite), "invalid_count": len(members) - len(finite),
        })
    return out


def send(attempt, points: dict[int, float | None], key: str = "loss", portable: bool = False) -> None:
    items = list(points.items())
    for i in range(0, len(items), 2048):
        batch = [{"key": key, "step": s, "value": ("NaN" if v is None else v)} for s, v in items[i:i + 2048]]
        scalars.ingest_scalars(attempt, {"points": batch}, portable=portable)


def assert_same(actual: list[dict], expected: list[dict]) -> None:
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        for field in ("step", "last_step", "count", "invalid_count", "min", "max", "first", "last"):
            assert a[field] == e[field], (field, a, e)
        assert (a["mean"] is None) == (e["mean"] is None)
        if a["mean"] is not None:
            assert math.isclose(a["mean"], e["mean"], rel_tol=1e-9, abs_tol=1e-12)


@pytest.fixture
def attempt(make_job):
    return make_job()[1]


def test_rollup_charts_equal_brute_force_for_any_window(attempt):
    rng = random.Random(3)
    points = {s: (None if rng.random() < 0.01 else rng.gauss(0, 1)) for s in range(0, 70_000, 1)}
    points[12_345] = 1e6  # a spike must survive any reduction
    send(attempt, points)
    series = ScalarSeries.objects.get(key="loss")
    for lo, hi, n in [(0, 69_999, 300), (0, 69_999, 7), (1000, 5000, 100), (17, 60_001, 1000), (12_000, 12_700, 50)]:
        _shift, width = scalars.chart_plan(lo, hi, n)
        actual = scalars.reduce_series(series, n, lo, hi)
        assert_same(actual, brute_force(points, lo, hi, width))
        assert len(actual) <= n + 1
    assert max(b["max"] for b in scalars.reduce_series(series, 10, None, None)) == 1e6


def test_the_chart_reads_the_coarsest_rollup_that_fits():
    assert scalars.chart_plan(0, 999_999, 1000) == (8, 1024)
    assert scalars.chart_plan(0, 999, 1000) == (None, 1)
    assert scalars.chart_plan(0, 15_999, 1000) == (4, 16)
    assert scalars.chart_plan(0, 99_999_999, 500) == (16, 262_144)


def test_summaries_are_maintained_during_ingest(attempt):
    send(attempt, {1: 5.0, 2: None, 3: -1.0, 4: 2.0})
    s = ScalarSeries.objects.get(key="loss")
    assert (s.count, s.invalid_count, s.min, s.max, s.first_step, s.last_step, s.last) == (4, 1, -1.0, 5.0, 1, 4, 2.0)


def test_a_retried_batch_adds_nothing(attempt):
    send(attempt, {s: float(s) for s in range(100)})
    before = list(ScalarRollup.objects.order_by("id").values())
    send(attempt, {s: float(s) for s in range(100)})
    s = ScalarSeries.objects.get(key="loss")
    assert s.count == 100 and ScalarPoint.objects.count() == 100
    assert list(ScalarRollup.objects.order_by("id").values()) == before


def test_a_corrected_step_repairs_extrema_everywhere(attempt):
    points = {s: float(s % 10) for s in range(5000)}
    points[4321] = 1000.0
    send(attempt, points)
    send(attempt, {4321: 1.0})  # the correction
    points[4321] = 1.0
    s = ScalarSeries.objects.get(key="loss")
    assert (s.max, s.count) == (9.0, 5000)
    _shift, width = scalars.chart_plan(0, 4999, 20)
    assert_same(scalars.reduce_series(s, 20, 0, 4999), brute_force(points, 0, 4999, width))


def test_a_correction_to_the_last_step_updates_last(attempt):
    send(attempt, {1: 1.0, 2: 2.0})
    send(attempt, {2: "NaN"})  # type: ignore[dict-item]
    s = ScalarSeries.objects.get(key="loss")
    assert (s.last, s.invalid_count, s.max) == (None, 1, 1.0)


def test_the_portable_path_gives_the_same_answers(make_job):
    rng = random.Random(9)
    points = {s: (None if rng.random() < 0.02 else rng.uniform(-5, 5)) for s in range(3000)}
    _, fast_attempt, _ = make_job(experiment="fast")
    _, slow_attempt, _ = make_job(experiment="slow")
    send(fast_attempt, points)
    send(slow_attempt, points, portable=True)
    fast = ScalarSeries.objects.get(job=fast_attempt.job)
    slow = ScalarSeries.objects.get(job=slow_attempt.job)
    for field in ("count", "invalid_count", "min", "max", "first_step", "last_step", "last"):
        assert getattr(fast, field) == getattr(slow, field), field
    columns = ("shift", "bucket", "count", "invalid_count", "min", "max", "first_step", "first_value", "last_step", "last_value")
    fast_rows = list(ScalarRollup.objects.filter(series=fast).order_by("shift", "bucket").values_list(*columns))
    slow_rows = list(ScalarRollup.objects.filter(series=slow).order_by("shift", "bucket").values_list(*columns))
    assert fast_rows == slow_rows


def test_rebuild_reconstructs_rollups_from_points(attempt):
    send(attempt, {s: float(s) for s in range(300)})
    series = ScalarSeries.objects.get(key="loss")
    before = list(ScalarRollup.objects.filter(series=series).order_by("shift", "bucket").values_list("count", "sum", "min", "max"))
    ScalarRollup.objects.all().delete()
    ScalarSeries.objects.filter(pk=series.pk).update(count=0, min=None, max=None)
    scalars.rebuild_series(series.pk)
    after = list(ScalarRollup.objects.filter(series=series).order_by("shift", "bucket").values_list("count", "sum", "min", "max"))
    assert after == before
    series.refresh_from_db()
    assert (series.count, series.max) == (300, 299.0)


def test_deleting_a_job_removes_its_points_and_rollups(attempt):
    # Points and rollups carry no database-level foreign key (see ScalarPoint): the ORM
    # cascade is what removes them, and must.
    from apps.jobs.models import Job

    send(attempt, {s: float(s) for s in range(50)})
    assert ScalarPoint.objects.exists() and ScalarRollup.objects.exists()
    Job.objects.filter(pk=attempt.job_id).delete()
    assert not ScalarPoint.objects.exists()
    assert not ScalarRollup.objects.exists()


def test_a_series_without_rollups_is_reduced_from_its_points(attempt):
    points = {s: float(s % 97) for s in range(20_000)}
    send(attempt, points)
    series = ScalarSeries.objects.get(key="loss")
    ScalarRollup.objects.all().delete()  # as before the backfill migration reached it
    _shift, width = scalars.chart_plan(0, 19_999, 50)
    assert_same(scalars.reduce_series(series, 50, 0, 19_999), brute_force(points, 0, 19_999, width))
