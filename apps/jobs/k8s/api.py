"""HTTP routes of the Kubernetes side: the job's events (the Events tab) and the
runner's GPU usage samples (the watchdog's input, an ingest route)."""

from __future__ import annotations

from django.urls import path
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from apps.accounts.errors import DomainError
from apps.jobs.api.serializers import ErrorSerializer
from apps.telemetry.api.ingest import IngestView

from .. import services
from .models import ClusterEvent
from .watchdog import record_usage

EVENTS_LIMIT = 500


class ClusterEventSerializer(serializers.ModelSerializer):
    attempt = serializers.IntegerField(source="attempt.number")

    class Meta:
        model = ClusterEvent
        fields = ["attempt", "type", "reason", "message", "source", "involved_object", "count", "first_seen",
                  "last_seen"]


@extend_schema(
    responses={200: inline_serializer("JobClusterEvents", {"results": ClusterEventSerializer(many=True)}),
               404: ErrorSerializer}
)
@api_view(["GET"])
def job_cluster_events(request: Request, job_id: str) -> Response:
    job = services.access_job_by_public_id(request.user, job_id)
    events = ClusterEvent.objects.filter(attempt__job=job).select_related("attempt").order_by("first_seen", "id")
    return Response({"results": ClusterEventSerializer(events[:EVENTS_LIMIT], many=True).data})


def _count(data: dict, name: str, *, required: bool = True) -> int:
    value = data.get(name, None if required else 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1024:
        raise DomainError(f"{name} must be an integer from 0 to 1024", field=name)
    return value


class GpuUsageView(IngestView):
    @extend_schema(
        request=inline_serializer("GpuUsage", {"node_rank": serializers.IntegerField(),
                                               "gpus_in_use": serializers.IntegerField(),
                                               "gpus_visible": serializers.IntegerField(required=False)}),
        responses={200: inline_serializer("GpuUsageResult", {"ok": serializers.BooleanField()}),
                   400: ErrorSerializer, 401: ErrorSerializer},
    )
    def post(self, request: Request, run_id: str) -> Response:
        data = request.data if isinstance(request.data, dict) else {}
        record_usage(
            self.attempt(request),
            node_rank=_count(data, "node_rank", required=False),
            gpus_in_use=_count(data, "gpus_in_use"),
            gpus_visible=_count(data, "gpus_visible", required=False),
        )
        return Response({"ok": True})


user_urlpatterns = [path("jobs/<slug:job_id>/cluster-events", job_cluster_events, name="job-cluster-events")]
ingest_urlpatterns = [path("runs/<slug:run_id>/gpu-usage", GpuUsageView.as_view(), name="ingest-gpu-usage")]
