"""Live logs over Server-Sent Events.

The stream runs in its own task so the consumer keeps reading `http.disconnect`
(integration-facts §6: the stock `handle` loop never notices a client leaving). It polls
the database from the client's cursor, which makes resume exact by construction: lines
are ordered by (attempt, seq) and the runner sends them in order, so `after cursor` has
no gap and no duplicate, across reconnects and across web-server restarts. Keep-alive
comments stop idle proxies from cutting the stream.
"""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import suppress
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.http import AsyncHttpConsumer
from django.conf import settings
from django.http import Http404

from apps.accounts.auth import bearer_secret
from apps.accounts.errors import DomainError
from apps.accounts.services import authenticate_api_token
from apps.jobs.services import access_job_by_public_id
from tuneplane.contracts import errors
from tuneplane.contracts.ingest import INGEST_TOKEN_PREFIX

from . import services

PAGE = 500


class LogStreamConsumer(AsyncHttpConsumer):
    stream_task: asyncio.Task | None = None

    async def http_request(self, message):
        if not message.get("more_body"):
            self.stream_task = asyncio.create_task(self.respond())

    async def http_disconnect(self, message):
        task = self.stream_task
        if task and not task.done():
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
        await super().http_disconnect(message)

    async def error(self, status: int, detail: str, field: str | None = None) -> None:
        body = json.dumps({"detail": detail, "field": field}).encode()
        await self.send_response(status, body, headers=[(b"Content-Type", b"application/json")])

    def header(self, name: bytes) -> str | None:
        raw = dict(self.scope["headers"]).get(name)
        return raw.decode("latin-1") if raw is not None else None

    @database_sync_to_async
    def authenticate(self):
        secret = bearer_secret(self.header(b"authorization"))
        if secret is not None:
            if secret.startswith(INGEST_TOKEN_PREFIX):
                return None, errors.INGEST_TOKEN_ON_REGULAR_API
            token = authenticate_api_token(secret)
            return (token.user, None) if token else (None, "invalid or revoked API token")
        user = self.scope.get("user")
        if user is not None and user.is_authenticated:
            return user, None
        return None, "authentication required"

    @database_sync_to_async
    def load_job(self, user, job_id: str):
        return access_job_by_public_id(user, job_id)

    @database_sync_to_async
    def next_page(self, job, after):
        complete = services.logs_complete(job)  # before reading: see logs_complete
        lines = services.log_page(job, after, PAGE)
        state = None
        if complete and len(lines) < PAGE:
            job.refresh_from_db(fields=["state", "exit_code"])
            state = {"state": job.state, "exit_code": job.exit_code}
        return lines, state

    def start_cursor(self) -> str | None:
        header = self.header(b"last-event-id")
        if header:
            return header
        query = parse_qs(self.scope.get("query_string", b"").decode())
        for name in ("lastEventId", "after"):
            if query.get(name):
                return query[name][0]
        return None

    async def respond(self) -> None:
        user, problem = await self.authenticate()
        if user is None:
            await self.error(401, problem)
            return
        try:
            job = await self.load_job(user, self.scope["url_route"]["kwargs"]["job_id"])
            after = services.Cursor.parse(self.start_cursor(), field="Last-Event-ID")
        except Http404 as exc:
            await self.error(404, str(exc))
            return
        except DomainError as exc:
            await self.error(400, exc.message, exc.field)
            return
        await self.send_headers(headers=[
            (b"Content-Type", b"text/event-stream"),
            (b"Cache-Control", b"no-cache"),
            (b"X-Accel-Buffering", b"no"),
        ])
        await self.send_body(b"retry: 2000\n\n", more_body=True)
        last_sent = time.monotonic()
        while True:
            lines, final = await self.next_page(job, after)
            if lines:
                chunk = []
                for line in lines:
                    data = services.line_dict(line)
                    chunk.append(f"id: {data['cursor']}\nevent: log\ndata: {json.dumps(data)}\n\n")
                await self.send_body("".join(chunk).encode(), more_body=True)
                after = services.Cursor(lines[-1].attempt_number, lines[-1].seq)
                last_sent = time.monotonic()
            if final is not None:
                await self.send_body(f"event: state\ndata: {json.dumps(final)}\n\n".encode(), more_body=True)
                await self.send_body(b"event: end\ndata: {}\n\n", more_body=False)
                return
            if len(lines) < PAGE:
                if time.monotonic() - last_sent >= settings.TUNEPLANE_SSE_KEEPALIVE_SECONDS:
                    await self.send_body(b": keepalive\n\n", more_body=True)
                    last_sent = time.monotonic()
                await asyncio.sleep(settings.TUNEPLANE_SSE_POLL_SECONDS)
