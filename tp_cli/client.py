"""The one HTTP client of `tp`: Bearer auth, timeouts, and errors mapped to TpError.

Every error the API returns is `{"detail": ..., "field": ...}` (docs/api.md, "Errors");
the detail is written for users, so it is shown verbatim.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import requests

from tp_cli import __version__
from tp_cli.config import Credentials
from tp_cli.errors import NetworkError, ServerError, TpError

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 60.0
# A package may be up to 256 MiB and the server checks it before answering.
UPLOAD_READ_TIMEOUT = 300.0
# The server sends a keep-alive every 15 s, so 60 s of silence means a dead stream.
STREAM_READ_TIMEOUT = 60.0

_ERRNO_RE = re.compile(r"\[Errno -?\d+\] ([^'\"()]+)")


def path_part(value: str) -> str:
    """Quote a user-given id for a URL path, so `a/../b` cannot reach another route."""
    return quote(value, safe="")


def _network_reason(exc: requests.RequestException) -> str:
    if isinstance(exc, requests.Timeout):
        return "timed out"
    # requests' messages nest urllib3's; the OS reason ("Connection refused") is the useful bit.
    match = _ERRNO_RE.search(str(exc))
    if match:
        return match.group(1).strip().lower()
    return type(exc).__name__


class ApiClient:
    def __init__(self, creds: Credentials, session: requests.Session | None = None) -> None:
        self.server = creds.server.rstrip("/")
        self._session = session or requests.Session()
        self._session.headers.update(
            {
                "Authorization": f"Bearer {creds.token}",
                "User-Agent": f"tp/{__version__}",
                "Accept": "application/json",
            }
        )

    def url(self, path: str) -> str:
        return f"{self.server}/{path.lstrip('/')}"

    def _send(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        try:
            return self._session.request(method, self.url(path), **kwargs)
        except requests.RequestException as exc:
            raise NetworkError(
                f"could not reach the TunePlane server at {self.server}: {_network_reason(exc)}"
            ) from None

    def _check(self, resp: requests.Response) -> None:
        if resp.status_code < 400:
            return
        detail = None
        try:
            body = resp.json()
        except ValueError:
            body = None
        if isinstance(body, Mapping) and isinstance(body.get("detail"), str):
            detail = body["detail"]
        if detail is None:
            # Not our API's shape: a proxy page or a crash; say who answered what.
            detail = f"the server at {self.server} answered HTTP {resp.status_code} {resp.reason or ''}".rstrip()
        error_cls = ServerError if resp.status_code >= 500 else TpError
        raise error_cls(detail, status=resp.status_code)

    def _json(self, resp: requests.Response) -> Any:
        self._check(resp)
        try:
            return resp.json()
        except ValueError:
            raise TpError(
                f"the server at {self.server} answered HTTP {resp.status_code} without JSON; "
                "is --server the TunePlane URL?"
            ) from None

    def get(self, path: str, params: Mapping[str, str | int] | None = None) -> Any:
        resp = self._send("GET", path, params=params, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
        return self._json(resp)

    def post(self, path: str) -> Any:
        resp = self._send("POST", path, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
        return self._json(resp)

    def post_package(self, path: str, request_json: str, package: bytes, filename: str) -> Any:
        """POST the multipart body of validate/submit: `request` (JSON text) and `package`."""
        resp = self._send(
            "POST",
            path,
            data={"request": request_json},
            files={"package": (filename, package, "application/gzip")},
            timeout=(CONNECT_TIMEOUT, UPLOAD_READ_TIMEOUT),
        )
        return self._json(resp)

    @contextmanager
    def stream(self, path: str, headers: Mapping[str, str]) -> Iterator[requests.Response]:
        """Open a server-sent-events stream; raises like the other calls when refused."""
        resp = self._send(
            "GET",
            path,
            headers={"Accept": "text/event-stream", "Cache-Control": "no-cache", **headers},
            stream=True,
            timeout=(CONNECT_TIMEOUT, STREAM_READ_TIMEOUT),
        )
        with resp:
            self._check(resp)
            yield resp
