from __future__ import annotations

from django.urls import path

from .. import ingest
from . import views

_V = "environments/<str:owner>/<str:name>/versions/<str:version>"

urlpatterns = [
    path("environments", views.environments, name="environment-list"),
    path("environments/remote", views.register_remote, name="environment-register-remote"),
    path(
        "environments/<str:owner>/<str:name>", views.environment_detail, name="environment-detail"
    ),
    path(_V, views.version_detail_view, name="environment-version-detail"),
    path(f"{_V}/runners", views.runners, name="environment-runners"),
    path(
        f"{_V}/runners/<int:runner_id>/heartbeat",
        views.runner_heartbeat,
        name="environment-runner-heartbeat",
    ),
    path(
        f"{_V}/runners/<int:runner_id>/drain", views.runner_drain, name="environment-runner-drain"
    ),
    path("plugins", views.plugins, name="plugin-list"),
    path(
        "plugins/<str:owner>/<str:name>/versions/<str:version>",
        views.plugin_version_detail,
        name="plugin-version-detail",
    ),
]

ingest_urlpatterns = [
    path(
        "runs/<slug:run_id>/environment",
        ingest.EnvironmentIngestView.as_view(),
        name="ingest-environment",
    ),
]
