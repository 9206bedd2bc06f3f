"""Is an OpenEnv service answering at a URL?

The control plane only asks; it never carries an episode (spec: "never starts it and
never proxies it"). `GET /health` must say `{"status": "healthy"}` (openenv-core's
server); registering also asks `GET /schema` for the action and observation schemas,
so that a web server that merely answers 200 is not taken for an environment.
Redirects are not followed: a probe must not be turned into a request elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import requests

PROBE_TIMEOUT_SECONDS = 3.0


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    detail: str  # "healthy", or why not


def _get_json(url: str, timeout: float) -> tuple[object | None, str]:
    try:
        response = requests.get(
            url, timeout=timeout, allow_redirects=False, headers={"Accept": "application/json"}
        )
    except requests.Timeout:
        return None, f"GET {url} timed out after {timeout:.0f}s"
    except requests.RequestException as exc:
        reason = type(exc).__name__
        if "refused" in str(exc).lower():
            reason = "connection refused"
        return None, f"GET {url} failed: {reason}"
    if response.status_code != 200:
        return None, f"GET {url} answered HTTP {response.status_code}"
    try:
        return response.json(), ""
    except ValueError:
        return None, f"GET {url} did not answer JSON"


def probe(
    url: str, *, verify_openenv: bool = False, timeout: float = PROBE_TIMEOUT_SECONDS
) -> ProbeResult:
    base = url.rstrip("/")
    health, error = _get_json(f"{base}/health", timeout)
    if error:
        return ProbeResult(False, error)
    if not isinstance(health, dict) or health.get("status") != "healthy":
        return ProbeResult(False, f'GET {base}/health did not say {{"status": "healthy"}}')
    if verify_openenv:
        schema, error = _get_json(f"{base}/schema", timeout)
        if error:
            return ProbeResult(False, f"not an OpenEnv server: {error}")
        if not isinstance(schema, dict) or not {"action", "observation"} <= set(schema):
            return ProbeResult(
                False,
                f"not an OpenEnv server: GET {base}/schema has no action and observation schemas",
            )
    return ProbeResult(True, "healthy")
