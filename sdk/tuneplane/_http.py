"""A tiny JSON client for the ingest API, shared by `tuneplane.report` and the runner.

Standard library only: this module goes into training images, where `requests` may be
missing or pinned to something else. It makes one request per call (no pooling) and
turns every failure into `IngestError`, which says whether retrying can help.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import __version__
from .contracts import ingest

USER_AGENT = f"tuneplane-sdk/{__version__}"

# Statuses where the same request can succeed later: the control plane restarting behind
# a proxy (502/503/504), overload (429) or a slow request (408). Every other 4xx is a
# verdict on the request itself and repeating it cannot change the answer.
_TRANSIENT_4XX = frozenset({408, 425, 429})

# An error body is read only to quote its "detail"; never buffer a huge one.
_ERROR_BODY_MAX = 64 * 1024


class IngestError(Exception):
    """A failed ingest call. `status` is None when no HTTP answer arrived at all."""

    def __init__(self, message: str, *, status: int | None, transient: bool) -> None:
        super().__init__(message)
        self.status = status
        self.transient = transient


@dataclass(frozen=True)
class IngestClient:
    """Calls the routes under ``{endpoint}/runs/{run_id}/`` with the attempt's token."""

    endpoint: str
    run_id: str
    token: str
    timeout: float = 10.0

    def url(self, route: str) -> str:
        return ingest.run_url(self.endpoint, self.run_id, route)

    def post_json(
        self, route: str, payload: Mapping[str, Any], timeout: float | None = None
    ) -> Any:
        """POST a JSON body; returns the decoded JSON answer (None for an empty body)."""
        # allow_nan=False: JSON has no NaN; callers encode non-finite values themselves
        # (contracts.ingest.encode_value) and a slip must fail here, not on the server.
        body = json.dumps(payload, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
        raw, _headers = self._send("POST", route, body.encode("utf-8"), timeout, None)
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise IngestError(
                f"POST {route}: the answer is not JSON", status=200, transient=True
            ) from None

    def get_bytes(
        self, route: str, max_bytes: int, timeout: float | None = None
    ) -> tuple[bytes, Mapping[str, str]]:
        """GET a binary body of at most `max_bytes`; returns it with the answer's headers."""
        return self._send("GET", route, None, timeout, max_bytes)

    def _send(
        self,
        method: str,
        route: str,
        body: bytes | None,
        timeout: float | None,
        max_bytes: int | None,
    ) -> tuple[bytes, Mapping[str, str]]:
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
        }
        if body is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.url(route), data=body, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as answer:
                raw = answer.read() if max_bytes is None else _read_at_most(answer, max_bytes + 1)
                if max_bytes is not None and len(raw) > max_bytes:
                    raise IngestError(
                        f"{method} {route}: the answer exceeds {max_bytes} bytes",
                        status=answer.status,
                        transient=False,
                    )
                return raw, dict(answer.headers.items())
        except urllib.error.HTTPError as exc:
            status = exc.code
            detail = _error_detail(exc)
            transient = status >= 500 or status in _TRANSIENT_4XX
            raise IngestError(
                f"{method} {route}: HTTP {status}{': ' + detail if detail else ''}",
                status=status,
                transient=transient,
            ) from None
        except IngestError:
            raise
        except (ValueError, http.client.InvalidURL) as exc:
            # urllib's "unknown url type": a misconfigured endpoint never heals.
            raise IngestError(f"{method} {route}: {exc}", status=None, transient=False) from None
        except (TimeoutError, urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            # Refused, reset, DNS, timeout, a server that hung up mid-answer: the network or
            # a restarting control plane. All of these may heal.
            reason = getattr(exc, "reason", None) or exc
            raise IngestError(f"{method} {route}: {reason}", status=None, transient=True) from None


def _read_at_most(answer: Any, limit: int) -> bytes:
    """Read until EOF or `limit` bytes, whichever comes first (a short read is not EOF)."""
    parts: list[bytes] = []
    total = 0
    while total < limit:
        chunk = answer.read(min(1024 * 1024, limit - total))
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
    return b"".join(parts)


def _error_detail(exc: urllib.error.HTTPError) -> str:
    """The API's `detail` text (docs/api.md, "Errors"), or a short excerpt of the body."""
    try:
        raw = exc.read(_ERROR_BODY_MAX)
    except Exception:
        return ""
    try:
        decoded = json.loads(raw)
        detail = decoded.get("detail") if isinstance(decoded, dict) else None
        if isinstance(detail, str):
            return detail
    except ValueError:
        pass
    return raw[:200].decode("utf-8", errors="replace").strip()
