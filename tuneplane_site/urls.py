from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from apps.environments.api.urls import ingest_urlpatterns as environment_ingest
from apps.environments.api.urls import urlpatterns as environment_api
from apps.jobs.api.urls import urlpatterns as job_api
from apps.jobs.k8s.api import ingest_urlpatterns as kubernetes_ingest
from apps.jobs.k8s.api import user_urlpatterns as kubernetes_api
from apps.recipes.api.urls import urlpatterns as recipe_api
from apps.telemetry.api.urls import ingest_urlpatterns, user_urlpatterns
from tuneplane.contracts.ingest import INGEST_PREFIX

from .views import me

api_v1 = [path("me", me, name="me"), *recipe_api, *job_api, *user_urlpatterns, *environment_api, *kubernetes_api]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include((api_v1, "api"), namespace="api")),
    path(f"{INGEST_PREFIX}/", include(([*ingest_urlpatterns, *environment_ingest, *kubernetes_ingest], "ingest"), namespace="ingest")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("environments/", include("apps.environments.urls")),
    path("", include("apps.console.urls")),
]
