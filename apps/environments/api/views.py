"""The environment API: thin views over apps.environments.services."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework.decorators import api_view, parser_classes
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from tuneplane.contracts import environment as C

from apps.accounts.errors import DomainError, TooLarge
from apps.jobs.api.serializers import ErrorSerializer

from .. import services
from ..models import EnvironmentVersion, HarnessPluginVersion
from .serializers import (
    EnvironmentSerializer,
    PluginPushFormSerializer,
    PluginVersionSerializer,
    PushFormSerializer,
    RegisterRemoteSerializer,
    RunnerSerializer,
    ServeRunnerSerializer,
    VersionDetailSerializer,
    VersionSerializer,
    environment_dict,
    plugin_version_dict,
    runner_dict,
    version_detail,
    version_summary,
)

ERRORS = {
    400: ErrorSerializer,
    401: ErrorSerializer,
    403: ErrorSerializer,
    404: ErrorSerializer,
    409: ErrorSerializer,
    413: ErrorSerializer,
}


def _bundle(request: Request) -> bytes | None:
    upload = request.FILES.get("bundle")
    if upload is None:
        return None
    if upload.size > C.BUNDLE_MAX_BYTES:
        raise TooLarge(
            f"bundle is {upload.size} bytes; the limit is {C.BUNDLE_MAX_BYTES}", field="bundle"
        )
    return upload.read()


def _version(request: Request, owner: str, name: str, version: str) -> EnvironmentVersion:
    return services.access_version(request.user, C.Reference(owner, name, version))


@extend_schema(
    methods=["GET"],
    operation_id="environments_list",
    responses={
        200: inline_serializer("EnvironmentList", {"results": EnvironmentSerializer(many=True)})
    },
)
@extend_schema(
    methods=["POST"],
    operation_id="environments_push",
    request={"multipart/form-data": PushFormSerializer},
    responses={201: VersionSerializer, **ERRORS},
)
@api_view(["GET", "POST"])
@parser_classes([MultiPartParser])
def environments(request: Request) -> Response:
    if request.method == "POST":
        version = services.push_environment(
            request.user, request.data.get("request"), _bundle(request)
        )
        return Response(
            version_summary(
                services.access_version(
                    request.user,
                    C.Reference(
                        version.environment.owner.get_username(),
                        version.environment.name,
                        version.version,
                    ),
                )
            ),
            status=201,
        )
    envs = list(services.visible_environments(request.user))
    by_env: dict[int, list[EnvironmentVersion]] = {env.pk: [] for env in envs}
    for version in EnvironmentVersion.objects.filter(environment__in=envs).select_related(
        "environment__owner", "pushed_by"
    ):
        by_env[version.environment_id].append(version)
    return Response({"results": [environment_dict(env, by_env[env.pk]) for env in envs]})


@extend_schema(
    operation_id="environments_register_remote",
    request=RegisterRemoteSerializer,
    responses={
        201: inline_serializer(
            "RemoteRegistered", {"environment": VersionSerializer(), "runner": RunnerSerializer()}
        ),
        **ERRORS,
    },
)
@api_view(["POST"])
@parser_classes([JSONParser])
def register_remote(request: Request) -> Response:
    data = request.data if isinstance(request.data, dict) else {}
    version, runner = services.register_remote(
        request.user,
        url=data.get("url"),
        name=data.get("name"),
        version=data.get("version"),
        description=data.get("description") or "",
        rubric=data.get("rubric"),
        fleet=data.get("fleet"),
        public=data.get("public", False),
    )
    return Response(
        {"environment": version_summary(version), "runner": runner_dict(runner)}, status=201
    )


@extend_schema(
    operation_id="environments_retrieve", responses={200: EnvironmentSerializer, **ERRORS}
)
@api_view(["GET"])
def environment_detail(request: Request, owner: str, name: str) -> Response:
    env = services.access_environment(request.user, owner, name)
    versions = list(env.versions.select_related("environment__owner", "pushed_by"))
    return Response(environment_dict(env, versions))


@extend_schema(
    operation_id="environments_versions_retrieve",
    responses={200: VersionDetailSerializer, **ERRORS},
)
@api_view(["GET"])
def version_detail_view(request: Request, owner: str, name: str, version: str) -> Response:
    return Response(version_detail(request.user, _version(request, owner, name, version)))


@extend_schema(
    methods=["GET"],
    operation_id="environments_runners_list",
    responses={
        200: inline_serializer("RunnerList", {"results": RunnerSerializer(many=True)}),
        **ERRORS,
    },
)
@extend_schema(
    methods=["POST"],
    operation_id="environments_runners_serve",
    request=ServeRunnerSerializer,
    responses={201: RunnerSerializer, **ERRORS},
)
@api_view(["GET", "POST"])
@parser_classes([JSONParser])
def runners(request: Request, owner: str, name: str, version: str) -> Response:
    row = _version(request, owner, name, version)
    if request.method == "POST":
        data = request.data if isinstance(request.data, dict) else {}
        runner = services.serve_runner(request.user, row, data.get("url"), data.get("name") or "")
        return Response(runner_dict(runner), status=201)
    items = row.runners.select_related("version__environment__owner", "registered_by", "drained_by")
    return Response({"results": [runner_dict(r) for r in items]})


@extend_schema(
    operation_id="environments_runners_heartbeat",
    request=None,
    responses={200: RunnerSerializer, **ERRORS},
)
@api_view(["POST"])
def runner_heartbeat(
    request: Request, owner: str, name: str, version: str, runner_id: int
) -> Response:
    runner = services.access_runner(
        request.user, _version(request, owner, name, version), runner_id
    )
    return Response(runner_dict(services.heartbeat(request.user, runner)))


@extend_schema(
    operation_id="environments_runners_drain",
    request=None,
    responses={200: RunnerSerializer, **ERRORS},
)
@api_view(["POST"])
def runner_drain(request: Request, owner: str, name: str, version: str, runner_id: int) -> Response:
    runner = services.access_runner(
        request.user, _version(request, owner, name, version), runner_id
    )
    return Response(runner_dict(services.drain_runner(request.user, runner)))


@extend_schema(
    methods=["GET"],
    operation_id="plugins_list",
    responses={
        200: inline_serializer("PluginList", {"results": PluginVersionSerializer(many=True)})
    },
)
@extend_schema(
    methods=["POST"],
    operation_id="plugins_push",
    request={"multipart/form-data": PluginPushFormSerializer},
    responses={201: PluginVersionSerializer, **ERRORS},
)
@api_view(["GET", "POST"])
@parser_classes([MultiPartParser])
def plugins(request: Request) -> Response:
    if request.method == "POST":
        version = services.push_plugin(request.user, _bundle(request))
        return Response(plugin_version_dict(version, with_files=True), status=201)
    items = HarnessPluginVersion.objects.select_related("plugin__owner", "pushed_by")
    return Response({"results": [plugin_version_dict(v) for v in items]})


@extend_schema(
    operation_id="plugins_versions_retrieve", responses={200: PluginVersionSerializer, **ERRORS}
)
@api_view(["GET"])
def plugin_version_detail(request: Request, owner: str, name: str, version: str) -> Response:
    row = services.find_plugin_version(f"{owner}/{name}", version)
    if row is None:
        raise DomainError(
            f"plugin {owner}/{name}@{version} does not exist", field="plugin", status_code=404
        )
    return Response(plugin_version_dict(row, with_files=True))
