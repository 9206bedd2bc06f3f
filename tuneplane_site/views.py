from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response


@extend_schema(responses=inline_serializer("Me", {"username": serializers.CharField(), "is_staff": serializers.BooleanField()}))
@api_view(["GET"])
def me(request: Request) -> Response:
    return Response({"username": request.user.get_username(), "is_staff": request.user.is_staff})
