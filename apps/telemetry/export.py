"""Streaming CSV export of the original scalars.

Pages of at most PAGE rows by keyset (`step > last`), so memory stays flat however long
the series. On PostgreSQL each page is formatted by the database into one text block
(float8's text form is the shortest that reads back as the same double, as Python's
repr is); the embedded SQLite formats in Python.
"""

from __future__ import annotations

import csv
import io

from asgiref.sync import sync_to_async
from django.db import connection

from .models import ScalarPoint

PAGE = 10_000
HEADER = "key,step,value,attempt,ts\r\n"

_PAGE_SQL = """
SELECT max(step), string_agg(
    %(key)s || ',' || step || ',' || coalesce(nullif(invalid, ''), value::text) || ','
      || attempt_number || ',' || to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'),
    E'\\r\\n' ORDER BY step) || E'\\r\\n'
FROM (
    SELECT step, value, invalid, attempt_number, ts FROM telemetry_scalarpoint
    WHERE series_id = %(series)s AND step > %(after)s ORDER BY step LIMIT %(limit)s
) page
"""


def csv_field(text: str) -> str:
    """One CSV field, quoted as the csv module would (keys may hold commas or quotes)."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="").writerow([text])
    return buffer.getvalue()


def page(series_id: int, key: str, after: int) -> tuple[int | None, str]:
    """(last step of the page or None when done, CSV text of the page)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_PAGE_SQL, {"key": csv_field(key), "series": series_id, "after": after, "limit": PAGE})
            last, text = cursor.fetchone()
        return last, text or ""
    rows = list(
        ScalarPoint.objects.filter(series_id=series_id, step__gt=after)
        .order_by("step")
        .values_list("step", "value", "invalid", "attempt_number", "ts")[:PAGE]
    )
    if not rows:
        return None, ""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    for step, value, invalid, attempt, ts in rows:
        writer.writerow((key, step, invalid or repr(value), attempt, ts.isoformat()))
    return rows[-1][0], buffer.getvalue()


async def stream(series: list[tuple[int, str]]):
    """An async iterator, so that daphne streams the body instead of buffering it."""
    yield HEADER
    for series_id, key in series:
        after = -1
        while True:
            last, text = await sync_to_async(page)(series_id, key, after)
            if last is None:
                break
            yield text
            after = last
