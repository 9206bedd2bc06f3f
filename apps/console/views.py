"""Console pages. Thin: permission checks go through apps.jobs.services, the data the
pages keep live (logs, charts, state) comes from the public API in the browser."""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from apps.jobs.choices import TERMINAL_STATES, JobState
from apps.jobs.services import access_job_by_public_id, visible_jobs

# The list shows the newest jobs only; `tp job list` / the API page through the rest.
JOB_LIST_LIMIT = 200


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    jobs = visible_jobs(request.user)
    state = request.GET.get("state", "")
    if state in JobState.values:
        jobs = jobs.filter(state=state)
    else:
        state = ""
    # One row past the limit tells us whether to say "newest N" without a COUNT query.
    rows = list(jobs[: JOB_LIST_LIMIT + 1])
    return render(
        request,
        "console/job_list.html",
        {
            "jobs": rows[:JOB_LIST_LIMIT],
            "truncated": len(rows) > JOB_LIST_LIMIT,
            "limit": JOB_LIST_LIMIT,
            "state": state,
            "states": JobState.values,
        },
    )


@login_required
def job_detail(request: HttpRequest, job_id: str) -> HttpResponse:
    job = access_job_by_public_id(request.user, job_id)
    api = reverse("api:job-detail", args=[job.public_id])
    # What the page's scripts need, handed over with json_script (no inline JS, and the
    # values are escaped for a <script> context by Django).
    page_config = {
        "jobId": job.public_id,
        "state": job.state,
        "terminalStates": sorted(TERMINAL_STATES),
        "urls": {
            "job": api,
            "logStream": f"{api}/logs/stream",
            "series": reverse("api:job-series", args=[job.public_id]),
            "seriesPoints": reverse("api:job-series-points", args=[job.public_id]),
        },
    }
    return render(
        request,
        "console/job_detail.html",
        {
            "job": job,
            "attempts": list(job.attempts.all()),
            "spec_json": json.dumps(job.spec, indent=2, sort_keys=True),
            # Sorted pairs, not the dict: a hyperparameter called "items" or "keys" would
            # shadow the dict method in a template lookup.
            "hyperparams": sorted((job.spec.get("hyperparams") or {}).items()),
            "reported_hparams_json": json.dumps(job.hparams, indent=2, sort_keys=True) if job.hparams else "",
            "page_config": page_config,
        },
    )
