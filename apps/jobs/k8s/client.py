"""The official `kubernetes` client for a fleet, built from the fleet's settings.

connection `in-cluster` (the worker's service account, deploy/kubernetes/rbac.yaml),
`kubeconfig` (a context of the worker's kubeconfig) or `url` (an API server URL and a
bearer token file). Tests use `url` to point the real client at an HTTP stub.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from apps.governance.fleets import validate_fleet_settings
from apps.governance.models import Fleet

REQUEST_TIMEOUT = (5, 30)  # connect, read: a task must not hang on a dead API server


@dataclass
class FleetClient:
    fleet: str
    settings: dict[str, Any]
    batch: k8s.BatchV1Api
    core: k8s.CoreV1Api

    @property
    def namespace(self) -> str:
        return self.settings["namespace"]


def _api_client(settings: dict[str, Any]) -> k8s.ApiClient:
    connection = settings.get("connection", "in-cluster")
    configuration = k8s.Configuration()
    if connection == "in-cluster":
        k8s_config.load_incluster_config(client_configuration=configuration)
    elif connection == "kubeconfig":
        k8s_config.load_kube_config(context=settings.get("kubeconfig_context") or None,
                                    client_configuration=configuration)
    else:
        configuration.host = settings["api_url"]
        configuration.verify_ssl = settings.get("verify_ssl", True)
        token_file = settings.get("token_file")
        if token_file:
            configuration.api_key = {"authorization": "Bearer " + Path(token_file).read_text().strip()}
    return k8s.ApiClient(configuration)


def fleet_client(fleet_name: str) -> FleetClient:
    fleet = Fleet.objects.get(name=fleet_name)
    settings = validate_fleet_settings(fleet.kind, fleet.settings)
    api = _api_client(settings)
    return FleetClient(fleet=fleet.name, settings=settings, batch=k8s.BatchV1Api(api), core=k8s.CoreV1Api(api))


def is_not_found(exc: Exception) -> bool:
    return isinstance(exc, k8s.ApiException) and exc.status == 404
