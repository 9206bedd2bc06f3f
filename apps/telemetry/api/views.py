"""User-facing telemetry reads: log pages, series and chart buckets."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view, renderer_classes
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from apps.accounts.errors import DomainError
from apps.jobs.api.serializers import ErrorSerializer
from apps.jobs.services import access_job_by_public_id

from tuneplane.contracts import limits
from tuneplane.contracts.ingest import EVENT_KINDS

from .. import export, observations, scalars, services
from ..models import ScalarSeries

ERRORS = {400: ErrorSerializer, 401: ErrorSerializer, 404: ErrorSerializer}
MAX_LOG_PAGE = 5000
MAX_BUCKETS = 5000


def _int_param(request: Request, name: str, default: int | None, lo: int, hi: int) -> int | None:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise DomainError(f"{name} must be an integer", field=name) from None
    if not lo <= value <= hi:
        raise DomainError(f"{name} must be between {lo} and {hi}", field=name)
    return value


@extend_schema(
    parameters=[OpenApiParameter("after", str), OpenApiParameter("limit", int)],
    responses={200: inline_serializer("LogPage", {
        "lines": serializers.ListField(child=serializers.DictField()), "next_cursor": serializers.CharField(allow_null=True),
        "state": serializers.CharField(), "complete": serializers.BooleanField()}), **ERRORS},
)
@api_view(["GET"])
def job_logs(request: Request, job_id: str) -> Response:
    job = access_job_by_public_id(request.user, job_id)
    after = services.Cursor.parse(request.query_params.get("after"))
    limit = _int_param(request, "limit", 1000, 1, MAX_LOG_PAGE)
    # Decide completeness before reading the lines: if nothing could arrive then, these are all.
    finished = services.logs_complete(job)
    lines = services.log_page(job, after, limit)
    next_cursor = f"{lines[-1].attempt_number}.{lines[-1].seq}" if lines else (str(after) if after else None)
    return Response({
        "lines": [services.line_dict(line) for line in lines],
        "next_cursor": next_cursor,
        "state": job.state,
        "complete": finished and len(lines) < limit,
    })


@extend_schema(responses={200: inline_serializer("SeriesList", {"results": serializers.ListField(child=serializers.DictField())}), **ERRORS})
@api_view(["GET"])
def job_series(request: Request, job_id: str) -> Response:
    job = access_job_by_public_id(request.user, job_id)
    return Response({"results": [services.series_dict(s) for s in ScalarSeries.objects.filter(job=job)]})


@extend_schema(
    parameters=[OpenApiParameter("key", str, required=True), OpenApiParameter("buckets", int),
                OpenApiParameter("start", int), OpenApiParameter("end", int)],
    responses={200: inline_serializer("SeriesPoints", {"key": serializers.CharField(), "buckets": serializers.ListField(child=serializers.DictField())}), **ERRORS},
)
@api_view(["GET"])
def job_series_points(request: Request, job_id: str) -> Response:
    job = access_job_by_public_id(request.user, job_id)
    key = request.query_params.get("key")
    if not key:
        raise DomainError("key is required", field="key")
    series = get_object_or_404(ScalarSeries, job=job, key=key)
    buckets = _int_param(request, "buckets", 500, 1, MAX_BUCKETS)
    start = _int_param(request, "start", None, 0, 2**62)
    end = _int_param(request, "end", None, 0, 2**62)
    return Response({"key": key, "summary": services.series_dict(series),
                     "buckets": scalars.reduce_series(series, buckets, start, end)})


class CSVRenderer(BaseRenderer):
    """Lets `Accept: text/csv` negotiate; the body itself is the streamed response."""

    media_type = "text/csv"
    format = "csv"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data


@extend_schema(
    parameters=[OpenApiParameter("key", str, many=True)],
    responses={(200, "text/csv"): bytes, **ERRORS},
)
@api_view(["GET"])
@renderer_classes([JSONRenderer, CSVRenderer])
def job_series_csv(request: Request, job_id: str) -> StreamingHttpResponse:
    job = access_job_by_public_id(request.user, job_id)
    keys = request.query_params.getlist("key")
    qs = ScalarSeries.objects.filter(job=job).order_by("key")
    if keys:
        qs = qs.filter(key__in=keys)
        missing = set(keys) - set(qs.values_list("key", flat=True))
        if missing:
            raise DomainError(f"no series {sorted(missing)[0]!r} in job {job.public_id}", field="key")
    response = StreamingHttpResponse(export.stream(list(qs.values_list("id", "key"))), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{job.public_id}-scalars.csv"'
    return response


@extend_schema(
    parameters=[OpenApiParameter("kind", str, enum=list(EVENT_KINDS)), OpenApiParameter("limit", int)],
    responses={200: inline_serializer("EventList", {"results": serializers.ListField(child=serializers.DictField())}), **ERRORS},
)
@api_view(["GET"])
def job_events(request: Request, job_id: str) -> Response:
    job = access_job_by_public_id(request.user, job_id)
    kind = request.query_params.get("kind", "event")
    if kind not in EVENT_KINDS:
        raise DomainError(f"kind must be one of {', '.join(EVENT_KINDS)}", field="kind")
    limit = _int_param(request, "limit", limits.RECENT_EVENTS, 1, limits.RECENT_EVENTS)
    return Response({"results": observations.recent_events(job, kind, limit)})


@extend_schema(responses={200: inline_serializer("Observations", {
    "transport": serializers.DictField(), "health": serializers.ListField(child=serializers.DictField()),
    "distributions": serializers.ListField(child=serializers.DictField()),
    "capabilities": serializers.ListField(child=serializers.CharField(), allow_null=True),
    "requirements": serializers.DictField(allow_null=True)}), **ERRORS})
@api_view(["GET"])
def job_observations(request: Request, job_id: str) -> Response:
    job = access_job_by_public_id(request.user, job_id)
    return Response(observations.observation_summary(job))
