from django.urls import path

from . import ingest, views

user_urlpatterns = [
    path("jobs/<slug:job_id>/logs", views.job_logs, name="job-logs"),
    path("jobs/<slug:job_id>/series", views.job_series, name="job-series"),
    path("jobs/<slug:job_id>/series/points", views.job_series_points, name="job-series-points"),
    path("jobs/<slug:job_id>/series.csv", views.job_series_csv, name="job-series-csv"),
    path("jobs/<slug:job_id>/events", views.job_events, name="job-events"),
    path("jobs/<slug:job_id>/observations", views.job_observations, name="job-observations"),
]

ingest_urlpatterns = [
    path("runs/<slug:run_id>/package", ingest.PackageView.as_view(), name="ingest-package"),
    path("runs/<slug:run_id>/lifecycle", ingest.LifecycleView.as_view(), name="ingest-lifecycle"),
    path("runs/<slug:run_id>/logs", ingest.LogsIngestView.as_view(), name="ingest-logs"),
    path("runs/<slug:run_id>/scalars", ingest.ScalarsIngestView.as_view(), name="ingest-scalars"),
    path("runs/<slug:run_id>/init", ingest.InitView.as_view(), name="ingest-init"),
    path("runs/<slug:run_id>/events", ingest.EventsIngestView.as_view(), name="ingest-events"),
    path("runs/<slug:run_id>/heartbeat", ingest.HeartbeatView.as_view(), name="ingest-heartbeat"),
]
