"""One place where domain errors become HTTP answers: `{"detail", "field"}`."""

from __future__ import annotations

from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler


class DomainError(Exception):
    """A refusal a user can act on. `field` names the input at fault, when there is one."""

    status_code = status.HTTP_400_BAD_REQUEST

    def __init__(self, message: str, field: str | None = None, status_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        if status_code is not None:
            self.status_code = status_code


class Conflict(DomainError):
    status_code = status.HTTP_409_CONFLICT


class TooLarge(DomainError):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE


def api_exception_handler(exc, context):
    if isinstance(exc, DomainError):
        return Response({"detail": exc.message, "field": exc.field}, status=exc.status_code)
    response = exception_handler(exc, context)
    if response is None:
        return None
    data = response.data
    if isinstance(data, dict) and "detail" in data:
        response.data = {"detail": str(data["detail"]), "field": None}
    elif isinstance(data, dict):
        field, problems = next(iter(data.items()))
        message = problems[0] if isinstance(problems, list) and problems else problems
        response.data = {"detail": f"{field}: {message}", "field": field}
    else:
        response.data = {"detail": str(data), "field": None}
    return response
