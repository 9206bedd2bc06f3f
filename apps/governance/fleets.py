"""Fleet settings, checked per kind, and the Kubernetes scheduling fields of profiles.

Settings are JSON an administrator types into the admin; a typo there would otherwise
surface as a Job the API server rejects at dispatch, long after admission said yes. So
every key is known, typed and bounded here, unknown keys are refused by name, and the
defaults are filled in so the executor reads one complete shape.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlparse

from .choices import FleetKind

# RFC 1123 label: what Kubernetes accepts for namespaces, claims and secret names.
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# A label key: optional DNS-subdomain prefix, then a name of at most 63 characters.
LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
TOLERATION_OPERATORS = ("Exists", "Equal")
TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
CONNECTIONS = ("in-cluster", "kubeconfig", "url")


class FleetSettingsError(ValueError):
    """The message names the key and what is expected."""


def _int(settings: dict, key: str, *, minimum: int, maximum: int, default: int | None = None) -> int:
    value = settings.get(key, default)
    if value is None:
        raise FleetSettingsError(f"{key} is required (an integer from {minimum} to {maximum})")
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise FleetSettingsError(f"{key} must be an integer from {minimum} to {maximum}, not {value!r}")
    return value


def _str(settings: dict, key: str, *, default: str | None = None, pattern: re.Pattern | None = None,
         what: str = "a string") -> str:
    value = settings.get(key, default)
    if value is None:
        raise FleetSettingsError(f"{key} is required ({what})")
    if not isinstance(value, str) or (pattern is not None and not pattern.match(value)):
        raise FleetSettingsError(f"{key} must be {what}, not {value!r}")
    return value


def _bool(settings: dict, key: str, default: bool) -> bool:
    value = settings.get(key, default)
    if not isinstance(value, bool):
        raise FleetSettingsError(f"{key} must be true or false, not {value!r}")
    return value


def _refuse_unknown(settings: dict, known: set[str], kind: str) -> None:
    unknown = sorted(set(settings) - known)
    if unknown:
        raise FleetSettingsError(
            f"unknown setting{'s' if len(unknown) > 1 else ''} for a {kind} fleet: {', '.join(unknown)} "
            f"(known: {', '.join(sorted(known))})"
        )


def _capacity(settings: dict) -> dict[str, int]:
    return {
        "gpus_per_node": _int(settings, "gpus_per_node", minimum=0, maximum=64),
        "max_nodes": _int(settings, "max_nodes", minimum=1, maximum=1024, default=1),
    }


def _kubernetes(settings: dict) -> dict[str, Any]:
    known = {
        "namespace", "gpus_per_node", "max_nodes", "connection", "kubeconfig_context", "api_url",
        "token_file", "verify_ssl", "output_claim", "service_account", "image_pull_secrets",
        "runtime_image", "ttl_seconds_after_finished", "ingest_url",
    }
    _refuse_unknown(settings, known, FleetKind.KUBERNETES)
    label = "an RFC 1123 label (lower case letters, digits and '-', at most 63 characters)"
    clean: dict[str, Any] = {
        "namespace": _str(settings, "namespace", pattern=DNS_LABEL, what=label),
        **_capacity(settings),
        "connection": _str(settings, "connection", default="in-cluster", what=" or ".join(CONNECTIONS)),
        "verify_ssl": _bool(settings, "verify_ssl", True),
        "output_claim": _str(settings, "output_claim", default="tuneplane-outputs", pattern=DNS_LABEL, what=label),
        "service_account": _str(settings, "service_account", default="tuneplane-job", pattern=DNS_LABEL, what=label),
        "runtime_image": _str(settings, "runtime_image", default="", what="an image reference"),
        "ttl_seconds_after_finished": _int(
            settings, "ttl_seconds_after_finished", minimum=0, maximum=7 * 86400, default=3600
        ),
    }
    if clean["connection"] not in CONNECTIONS:
        raise FleetSettingsError(f"connection must be one of {', '.join(CONNECTIONS)}, not {clean['connection']!r}")
    if clean["connection"] == "kubeconfig":
        clean["kubeconfig_context"] = _str(settings, "kubeconfig_context", default="", what="a context name")
    if clean["connection"] == "url":
        api_url = _str(settings, "api_url", what="the API server's http(s) URL")
        if urlparse(api_url).scheme not in {"http", "https"} or not urlparse(api_url).netloc:
            raise FleetSettingsError(f"api_url must be an http(s) URL, not {api_url!r}")
        clean["api_url"] = api_url.rstrip("/")
        clean["token_file"] = _str(settings, "token_file", default="", what="a path to a bearer token file")
    elif "api_url" in settings:
        raise FleetSettingsError("api_url is only used with connection: url")
    if "ingest_url" in settings:
        ingest = _str(settings, "ingest_url", what="the URL pods reach the control plane at")
        if urlparse(ingest).scheme not in {"http", "https"}:
            raise FleetSettingsError(f"ingest_url must be an http(s) URL, not {ingest!r}")
        clean["ingest_url"] = ingest.rstrip("/")
    secrets = settings.get("image_pull_secrets", [])
    if not isinstance(secrets, list) or not all(isinstance(s, str) and DNS_LABEL.match(s) for s in secrets):
        raise FleetSettingsError("image_pull_secrets must be a list of secret names")
    clean["image_pull_secrets"] = secrets
    return clean


def _node(settings: dict) -> dict[str, Any]:
    _refuse_unknown(settings, {"gpus_per_node", "max_nodes", "hosts"}, FleetKind.NODE)
    hosts = settings.get("hosts", [])
    if not isinstance(hosts, list) or not all(isinstance(h, str) and h for h in hosts):
        raise FleetSettingsError("hosts must be a list of host names")
    return {**_capacity(settings), "hosts": hosts}


def _slurm(settings: dict) -> dict[str, Any]:
    _refuse_unknown(settings, {"gpus_per_node", "max_nodes", "partition", "account"}, FleetKind.SLURM)
    return {
        **_capacity(settings),
        "partition": _str(settings, "partition", what="a partition name"),
        "account": _str(settings, "account", default="", what="an account name"),
    }


_BY_KIND = {FleetKind.KUBERNETES: _kubernetes, FleetKind.NODE: _node, FleetKind.SLURM: _slurm}


def validate_fleet_settings(kind: str, settings: Any) -> dict[str, Any]:
    """The settings with defaults filled in; raises FleetSettingsError naming the key."""
    if kind not in _BY_KIND:
        raise FleetSettingsError(f"kind must be one of {', '.join(FleetKind.values)}, not {kind!r}")
    if not isinstance(settings, dict):
        raise FleetSettingsError("settings must be a JSON object")
    return _BY_KIND[kind](settings)


def validate_node_selector(value: Any) -> dict[str, str]:
    if value in (None, ""):
        return {}
    if not isinstance(value, dict):
        raise FleetSettingsError('node_selector must be an object of label: value, e.g. {"gpu": "h200"}')
    for key, label in value.items():
        if not LABEL_KEY.match(key):
            raise FleetSettingsError(f"node_selector key {key!r} is not a valid Kubernetes label key")
        if not isinstance(label, str) or not LABEL_VALUE.match(label):
            raise FleetSettingsError(f"node_selector[{key!r}] must be a label value (string), not {label!r}")
    return value


def validate_tolerations(value: Any) -> list[dict[str, Any]]:
    if value in (None, ""):
        return []
    if not isinstance(value, list):
        raise FleetSettingsError("tolerations must be a list of objects")
    known = {"key", "operator", "value", "effect", "tolerationSeconds"}
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise FleetSettingsError(f"tolerations[{i}] must be an object")
        unknown = sorted(set(item) - known)
        if unknown:
            raise FleetSettingsError(f"tolerations[{i}] has unknown field {unknown[0]!r} (known: {', '.join(sorted(known))})")
        operator = item.get("operator", "Equal")
        if operator not in TOLERATION_OPERATORS:
            raise FleetSettingsError(f"tolerations[{i}].operator must be Exists or Equal, not {operator!r}")
        if operator == "Exists" and item.get("value"):
            raise FleetSettingsError(f"tolerations[{i}] with operator Exists takes no value")
        if "effect" in item and item["effect"] not in TOLERATION_EFFECTS:
            raise FleetSettingsError(f"tolerations[{i}].effect must be one of {', '.join(TOLERATION_EFFECTS)}")
        if "key" in item and not (isinstance(item["key"], str) and LABEL_KEY.match(item["key"])):
            raise FleetSettingsError(f"tolerations[{i}].key {item['key']!r} is not a valid key")
        if "value" in item and not isinstance(item["value"], str):
            raise FleetSettingsError(f"tolerations[{i}].value must be a string")
        seconds = item.get("tolerationSeconds")
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
            raise FleetSettingsError(f"tolerations[{i}].tolerationSeconds must be an integer")
    return value
