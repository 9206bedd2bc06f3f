"""Console pages for environments (mounted at /environments/)."""

from __future__ import annotations

from django.urls import path

from . import views

app_name = "environments"

urlpatterns = [
    path("", views.environment_list, name="list"),
    path("<str:owner>/<str:name>/", views.environment_detail, name="detail"),
    path("<str:owner>/<str:name>/<str:version>/", views.version_detail, name="version-detail"),
    path(
        "<str:owner>/<str:name>/<str:version>/runners/<int:runner_id>/drain",
        views.drain_runner,
        name="runner-drain",
    ),
]
