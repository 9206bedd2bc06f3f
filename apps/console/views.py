from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from apps.jobs.services import access_job_by_public_id, visible_jobs


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    return render(request, "console/job_list.html", {"jobs": visible_jobs(request.user)[:200]})


@login_required
def job_detail(request: HttpRequest, job_id: str) -> HttpResponse:
    job = access_job_by_public_id(request.user, job_id)
    return render(request, "console/job_detail.html", {"job": job})
