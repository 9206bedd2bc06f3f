"""Console pages: the Environments list and a version's page. Thin: access and rules go
through apps.environments.services. Nothing here reads a version's files."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from tuneplane.contracts import environment as C

from apps.accounts.errors import DomainError

from . import services
from .models import EnvironmentVersion


def _version_or_404(
    request: HttpRequest, owner: str, name: str, version: str
) -> EnvironmentVersion:
    try:
        return services.access_version(request.user, C.Reference(owner, name, version))
    except DomainError as exc:
        raise Http404(exc.message) from None


@login_required
def environment_list(request: HttpRequest) -> HttpResponse:
    envs = list(services.visible_environments(request.user))
    versions: dict[int, list[EnvironmentVersion]] = {env.pk: [] for env in envs}
    for version in EnvironmentVersion.objects.filter(environment__in=envs).select_related(
        "environment__owner"
    ):
        versions[version.environment_id].append(version)
    rows = [
        {"env": env, "versions": versions[env.pk], "latest": (versions[env.pk] or [None])[0]}
        for env in envs
    ]
    return render(request, "environments/environment_list.html", {"rows": rows})


@login_required
def environment_detail(request: HttpRequest, owner: str, name: str) -> HttpResponse:
    try:
        env = services.access_environment(request.user, owner, name)
    except DomainError as exc:
        raise Http404(exc.message) from None
    latest = env.versions.first()
    if latest is None:
        raise Http404(f"{env.ref} has no version")
    return redirect(latest.get_absolute_url())


@login_required
def version_detail(request: HttpRequest, owner: str, name: str, version: str) -> HttpResponse:
    row = _version_or_404(request, owner, name, version)
    env = row.environment
    manifest = C.parse_manifest(row.manifest)
    runners = list(row.runners.select_related("registered_by", "drained_by"))
    return render(
        request,
        "environments/version_detail.html",
        {
            "version": row,
            "env": env,
            "manifest": manifest,
            "tools": [
                {
                    "name": t.name,
                    "endpoint": t.endpoint,
                    "schema_json": json.dumps(t.schema, indent=2, sort_keys=True),
                }
                for t in manifest.tools
            ],
            "splits": [(split, row.task_counts.get(split, 0)) for split in C.SPLITS]
            if row.task_counts
            else [],
            "files": list(row.files.all()),
            "runners": [{"runner": r, "state": services.runner_state(r)} for r in runners],
            "can_manage": services.can_manage(request.user, env),
            "runs": list(services.jobs_referencing(request.user, row)[:200]),
            "other_versions": list(
                env.versions.exclude(pk=row.pk).values_list("version", flat=True)
            ),
        },
    )


@login_required
@require_POST
def drain_runner(
    request: HttpRequest, owner: str, name: str, version: str, runner_id: int
) -> HttpResponse:
    row = _version_or_404(request, owner, name, version)
    try:
        runner = services.access_runner(request.user, row, runner_id)
        services.drain_runner(request.user, runner)
        messages.success(
            request, f"Runner {runner.url} drained: it stays listed and no new job resolves to it."
        )
    except DomainError as exc:
        if exc.status_code == 404:
            raise Http404(exc.message) from None
        messages.error(request, exc.message)
    return redirect(row.get_absolute_url())
