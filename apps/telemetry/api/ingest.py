"""Ingest routes: the runner and the SDK inside a job, authenticated by the attempt's
ingest token. A user token is refused here, and an ingest token is refused everywhere
else (accounts.middleware)."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from django.core.files.storage import default_storage
from django.http import FileResponse
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import authentication, exceptions, permissions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.auth import bearer_secret
from apps.accounts.errors import DomainError
from apps.jobs import services as jobs
from apps.jobs.api.serializers import ErrorSerializer
from tuneplane.contracts.ingest import LIFECYCLE_EXITED, LIFECYCLE_STARTED

from .. import observations, scalars, services
from .parsers import IngestJSONParser
from ..models import IngestToken
from ..tokens import IngestTokenRefused, resolve_ingest_token

ERRORS = {400: ErrorSerializer, 401: ErrorSerializer, 413: ErrorSerializer}


class IngestTokenAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        secret = bearer_secret(request.META.get("HTTP_AUTHORIZATION"))
        if secret is None:
            raise exceptions.NotAuthenticated("an ingest token is required (Authorization: Bearer tpi_...)")
        run_id = request.parser_context["kwargs"].get("run_id", "")
        try:
            token = resolve_ingest_token(secret, run_id)
        except IngestTokenRefused as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from None
        return AnonymousUser(), token

    def authenticate_header(self, request) -> str:
        return "Bearer"


class HasIngestToken(permissions.BasePermission):
    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, IngestToken)


class IngestView(APIView):
    authentication_classes = [IngestTokenAuthentication]
    permission_classes = [HasIngestToken]
    parser_classes = [IngestJSONParser]

    def attempt(self, request: Request):
        return request.auth.attempt


class PackageView(IngestView):
    @extend_schema(responses={(200, "application/gzip"): bytes, **ERRORS})
    def get(self, request: Request, run_id: str):
        package = self.attempt(request).job.package
        response = FileResponse(default_storage.open(package.storage_name, "rb"), content_type="application/gzip")
        response["X-Package-Sha256"] = package.sha256
        response["Content-Length"] = str(package.size)
        return response


class LifecycleView(IngestView):
    @extend_schema(
        request=inline_serializer("Lifecycle", {"event": serializers.ChoiceField([LIFECYCLE_STARTED, LIFECYCLE_EXITED]),
                                                "pid": serializers.IntegerField(required=False),
                                                "exit_code": serializers.IntegerField(required=False)}),
        responses={200: inline_serializer("LifecycleResult", {"state": serializers.CharField()}), **ERRORS},
    )
    def post(self, request: Request, run_id: str) -> Response:
        data = request.data if isinstance(request.data, dict) else {}
        event = data.get("event")
        attempt = self.attempt(request)
        if event == LIFECYCLE_STARTED:
            pid = data.get("pid")
            state = jobs.record_started(attempt, pid if isinstance(pid, int) and not isinstance(pid, bool) else None)
        elif event == LIFECYCLE_EXITED:
            code = data.get("exit_code")
            if isinstance(code, bool) or not isinstance(code, int):
                raise DomainError("exit_code must be an integer", field="exit_code")
            state = jobs.record_exited(attempt, code)
        else:
            raise DomainError(f"event must be {LIFECYCLE_STARTED!r} or {LIFECYCLE_EXITED!r}", field="event")
        return Response({"state": state})


class LogsIngestView(IngestView):
    @extend_schema(
        request=inline_serializer("LogBatch", {"lines": serializers.ListField(child=serializers.DictField())}),
        responses={200: inline_serializer("LogAck", {"acked_through": serializers.IntegerField(),
                                                     "cancel_requested": serializers.BooleanField()}), **ERRORS},
    )
    def post(self, request: Request, run_id: str) -> Response:
        return Response(services.ingest_logs(self.attempt(request), request.data))


class ScalarsIngestView(IngestView):
    @extend_schema(
        request=inline_serializer("ScalarBatch", {"points": serializers.ListField(child=serializers.DictField())}),
        responses={200: inline_serializer("ScalarAck", {"accepted": serializers.IntegerField()}), **ERRORS},
    )
    def post(self, request: Request, run_id: str) -> Response:
        return Response(scalars.ingest_scalars(self.attempt(request), request.data))


class InitView(IngestView):
    @extend_schema(
        request=inline_serializer("RunInit", {"hparams": serializers.DictField()}),
        responses={200: inline_serializer("RunInitAck", {"ok": serializers.BooleanField()}), **ERRORS},
    )
    def post(self, request: Request, run_id: str) -> Response:
        services.record_init(self.attempt(request), request.data)
        return Response({"ok": True})


class EventsIngestView(IngestView):
    @extend_schema(
        request=inline_serializer("EventBatch", {"events": serializers.ListField(child=serializers.DictField())}),
        responses={200: inline_serializer("EventAck", {"accepted": serializers.IntegerField(),
                                                       "duplicates": serializers.IntegerField()}), **ERRORS},
    )
    def post(self, request: Request, run_id: str) -> Response:
        return Response(observations.ingest_events(self.attempt(request), request.data))


class HeartbeatView(IngestView):
    @extend_schema(
        request=inline_serializer("Heartbeat", {"sdk": serializers.DictField(),
                                                "queue_occupancy": serializers.FloatField(required=False)}),
        responses={200: inline_serializer("HeartbeatAck", {"ok": serializers.BooleanField()}), **ERRORS},
    )
    def post(self, request: Request, run_id: str) -> Response:
        observations.record_heartbeat(self.attempt(request), request.data)
        return Response({"ok": True})
