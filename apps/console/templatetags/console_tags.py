"""Small formatting filters for the console templates."""

from __future__ import annotations

from datetime import datetime, timedelta

from django import template
from django.utils import timezone

register = template.Library()


def format_duration(delta: timedelta) -> str:
    """Compact and sortable by eye: 45s, 3m 12s, 2h 05m, 3d 04h."""
    seconds = max(0, int(delta.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


@register.filter
def duration(obj: object) -> str:
    """Run time of a job or attempt: started -> finished, or -> now while it runs."""
    started: datetime | None = getattr(obj, "started_at", None)
    if started is None:
        return "—"
    finished: datetime | None = getattr(obj, "finished_at", None)
    return format_duration((finished or timezone.now()) - started)


@register.filter
def http_url(value: object) -> str:
    """The value if it is an http(s) URL, else "". Submission already insists on http(s);
    this keeps a javascript: URL out of an href even if a row was written by hand."""
    text = str(value or "")
    return text if text.lower().startswith(("http://", "https://")) else ""
