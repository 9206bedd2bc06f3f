"""`manage.py k8s_manifests JOB`: the objects the kubernetes executor would create for the
job's next attempt, as YAML, with the ingest token redacted. Nothing is sent anywhere:
for reviewing a fleet's settings and a profile's scheduling fields before dispatch."""

from __future__ import annotations

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.governance.fleets import validate_fleet_settings
from apps.governance.models import Fleet
from apps.jobs.k8s.manifests import render_attempt
from apps.jobs.models import ExecutionAttempt, Job

REDACTED = "<ingest token, issued at dispatch>"


class Command(BaseCommand):
    help = "Print the Kubernetes objects the executor would create for a job's next attempt."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("job_id", help="the job's id, e.g. exp-3f9a1c")
        parser.add_argument("--validate", metavar="K8S_VERSION",
                            help="also validate each object strictly (needs kubernetes-validate)")

    def handle(self, *args, job_id: str, validate: str | None, **options) -> None:
        job = Job.objects.filter(public_id=job_id).first()
        if job is None:
            raise CommandError(f"no job {job_id!r}")
        fleet = Fleet.objects.filter(name=job.spec["resources"]["fleet"]).first()
        if fleet is None or fleet.kind != "kubernetes":
            raise CommandError(f"job {job_id} is not on a kubernetes fleet")
        number = (job.attempts.order_by("-number").values_list("number", flat=True).first() or 0) + 1
        # An unsaved attempt: the labels carry its would-be id only once it exists.
        attempt = ExecutionAttempt(job=job, number=number, executor="kubernetes", pk=0)
        objects = render_attempt(attempt, validate_fleet_settings(fleet.kind, fleet.settings), REDACTED)
        if validate:
            import kubernetes_validate

            for obj in objects:
                kubernetes_validate.validate(obj, validate, strict=True)
        self.stdout.write(yaml.safe_dump_all(objects, sort_keys=False))
