from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.decorators import api_view, parser_classes
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from apps.accounts.errors import DomainError, TooLarge
from tuneplane.contracts import limits

from .. import services
from ..choices import JobState
from .serializers import (
    ErrorSerializer,
    JobListItemSerializer,
    JobSerializer,
    SubmissionFormSerializer,
    SubmittedJobSerializer,
    ValidationResultSerializer,
)

ERRORS = {400: ErrorSerializer, 401: ErrorSerializer, 404: ErrorSerializer, 409: ErrorSerializer, 413: ErrorSerializer}


def _submission(request: Request) -> tuple[str | None, bytes | None]:
    upload = request.FILES.get("package")
    if upload is not None and upload.size > limits.PACKAGE_MAX_BYTES:
        raise TooLarge(f"package is {upload.size} bytes; the limit is {limits.PACKAGE_MAX_BYTES}", field="package")
    return request.data.get("request"), upload.read() if upload is not None else None


@extend_schema(request={"multipart/form-data": SubmissionFormSerializer}, responses={200: ValidationResultSerializer, **ERRORS})
@api_view(["POST"])
@parser_classes([MultiPartParser])
def validate_job(request: Request) -> Response:
    compiled = services.check_submission(*_submission(request), request.user)
    return Response({"ok": True, "spec": compiled.spec, "warnings": compiled.warnings})


@extend_schema(
    methods=["POST"], request={"multipart/form-data": SubmissionFormSerializer}, responses={201: SubmittedJobSerializer, **ERRORS}
)
@extend_schema(
    methods=["GET"],
    parameters=[OpenApiParameter("state", str, enum=JobState.values)],
    responses={200: JobListItemSerializer(many=True)},
)
@api_view(["GET", "POST"])
@parser_classes([MultiPartParser])
def jobs(request: Request) -> Response:
    if request.method == "POST":
        job, warnings = services.submit_job(request.user, *_submission(request))
        job = services.access_job_by_public_id(request.user, job.public_id)
        data = JobSerializer(job).data
        data["warnings"] = warnings
        return Response(data, status=201)
    qs = services.visible_jobs(request.user)
    state = request.query_params.get("state")
    if state:
        if state not in JobState.values:
            raise DomainError(f"state must be one of {', '.join(JobState.values)}", field="state")
        qs = qs.filter(state=state)
    return Response({"results": JobListItemSerializer(qs[:200], many=True).data})


@extend_schema(responses={200: JobSerializer, **ERRORS})
@api_view(["GET"])
def job_detail(request: Request, job_id: str) -> Response:
    return Response(JobSerializer(services.access_job_by_public_id(request.user, job_id)).data)


@extend_schema(request=None, responses={200: JobSerializer, **ERRORS})
@api_view(["POST"])
def job_cancel(request: Request, job_id: str) -> Response:
    job = services.cancel_job(services.access_job_by_public_id(request.user, job_id))
    return Response(JobSerializer(services.access_job_by_public_id(request.user, job.public_id)).data)
