from django.urls import path

from . import views

urlpatterns = [
    path("jobs", views.jobs, name="job-list"),
    path("jobs/validate", views.validate_job, name="job-validate"),
    path("jobs/<slug:job_id>", views.job_detail, name="job-detail"),
    path("jobs/<slug:job_id>/cancel", views.job_cancel, name="job-cancel"),
]
