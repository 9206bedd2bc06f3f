from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from ..models import Recipe
from .serializers import RecipeSerializer


@extend_schema(responses=RecipeSerializer(many=True))
@api_view(["GET"])
def recipe_list(request: Request) -> Response:
    return Response([r.as_dict() for r in Recipe.objects.all()])


@extend_schema(responses=RecipeSerializer)
@api_view(["GET"])
def recipe_detail(request: Request, namespace: str, name: str) -> Response:
    recipe = get_object_or_404(Recipe, name=f"{namespace}/{name}")
    return Response(recipe.as_dict())
