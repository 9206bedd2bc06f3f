"""The one route that returns task content: the environment of a running job.

`GET <ingest>/runs/<run_id>/environment`, authenticated by the attempt's ingest token
(a user token is refused here; an ingest token is refused everywhere else). It answers
only while that attempt is live, and it serves the version's files with tasks.jsonl cut
to the split the job's operation implies: a training job never receives the held-out
rows. The version's files are under `environment/`; a harness plugin, when the manifest
names one, comes along under `harness/`.
"""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from tuneplane.contracts import environment as C
from tuneplane.contracts.environment_bundle import build_archive

from apps.accounts.errors import DomainError
from apps.jobs.api.serializers import ErrorSerializer
from apps.jobs.choices import TERMINAL_STATES, AttemptState
from apps.telemetry.api.ingest import IngestView

from . import services
from .models import EnvironmentFile, HarnessPluginFile

# The archive's two top-level folders: the version as pushed (tasks cut to the split) and,
# when the manifest names one, the harness plugin's files.
ENVIRONMENT_DIR = "environment"
HARNESS_DIR = "harness"
LIVE_ATTEMPT_STATES = (AttemptState.LAUNCHING, AttemptState.RUNNING)


def runtime_archive(spec: dict) -> bytes:
    block = spec["environment"]
    split = block["split"]
    files: dict[str, bytes] = {}
    for row in EnvironmentFile.objects.filter(version_id=block["version_id"]).order_by("path"):
        data = services.read_file(row.storage_name)
        if row.path == C.TASKS_FILE:
            data = C.split_tasks(data, split)
        files[f"{ENVIRONMENT_DIR}/{row.path}"] = data
    harness = block.get("harness")
    if harness:
        for row in HarnessPluginFile.objects.filter(
            version_id=harness["plugin_version_id"]
        ).order_by("path"):
            files[f"{HARNESS_DIR}/{row.path}"] = services.read_file(row.storage_name)
    return build_archive(files)


class EnvironmentIngestView(IngestView):
    @extend_schema(
        operation_id="ingest_environment",
        responses={
            (200, "application/gzip"): bytes,
            401: ErrorSerializer,
            404: ErrorSerializer,
            409: ErrorSerializer,
        },
    )
    def get(self, request: Request, run_id: str) -> HttpResponse:
        attempt = self.attempt(request)
        job = attempt.job
        block = (job.spec or {}).get("environment")
        if not block:
            raise DomainError(f"job {job.public_id} references no environment", status_code=404)
        # Only inside the approved runtime: a finished attempt's token opens nothing.
        if attempt.state not in LIVE_ATTEMPT_STATES or job.state in TERMINAL_STATES:
            raise DomainError(
                f"job {job.public_id} is {job.state}; its environment is served only while it runs",
                status_code=409,
            )
        response = HttpResponse(runtime_archive(job.spec), content_type="application/gzip")
        response["X-Environment"] = block["ref"]
        response["X-Environment-Split"] = block["split"]
        response["Cache-Control"] = "no-store"
        return response
