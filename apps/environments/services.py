"""The environment rules: who sees what, push, plugins, runners.

Views, the admin, the CLI's API calls and Celery tasks call these functions; they hold
no rules of their own (STYLE.md, "Writes go through services"). Refusals are DomainError
with the user-facing text; each one is raised before anything is stored.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from tuneplane.contracts import environment as C
from tuneplane.contracts.environment_bundle import read_archive, sha256_hex

from apps.accounts.errors import Conflict, DomainError

from . import probes
from .models import (
    Environment,
    EnvironmentFile,
    EnvironmentVersion,
    HarnessPlugin,
    HarnessPluginFile,
    HarnessPluginVersion,
    Runner,
)

log = logging.getLogger(__name__)

Forbidden = 403
NotFound = 404


def _refuse(exc: C.ContractError) -> DomainError:
    return DomainError(exc.message, field=exc.field, status_code=413 if exc.too_large else 400)


# Access -------------------------------------------------------------------------------


def visible_environments(user: AbstractBaseUser) -> QuerySet[Environment]:
    """Environments a user may see: their own and public ones; staff see all."""
    qs = Environment.objects.select_related("owner")
    return qs if user.is_staff else qs.filter(Q(owner=user) | Q(public=True))


def _resolve_owner(user: AbstractBaseUser, owner: str | None) -> str:
    return owner or user.get_username()


def access_environment(user: AbstractBaseUser, owner: str | None, name: str) -> Environment:
    """The one answer to "can this user see this environment?". Another user's private
    environment is reported exactly like a missing one, so names cannot be probed."""
    owner = _resolve_owner(user, owner)
    env = visible_environments(user).filter(owner__username=owner, name=name).first()
    if env is None:
        raise DomainError(
            f"environment {owner}/{name} does not exist or is not visible to you",
            field="environment",
            status_code=NotFound,
        )
    return env


def access_version(
    user: AbstractBaseUser, ref: C.Reference | str, *, what: str = "environment"
) -> EnvironmentVersion:
    if isinstance(ref, str):
        try:
            ref = C.parse_reference(ref, what=what)
        except C.ContractError as exc:
            raise _refuse(exc) from None
    env = access_environment(user, ref.owner, ref.name)
    versions = env.versions.select_related("environment__owner")
    version = versions.filter(version=ref.version).first() if ref.version else versions.first()
    if version is None:
        text = f"{env.ref}@{ref.version}" if ref.version else f"{env.ref} has no version and"
        raise DomainError(
            f"environment {text} does not exist or is not visible to you",
            field="environment",
            status_code=NotFound,
        )
    return version


def can_manage(user: AbstractBaseUser, env: Environment) -> bool:
    return user.is_staff or env.owner_id == user.pk


def jobs_referencing(user: AbstractBaseUser, version: EnvironmentVersion):
    """Runs that referenced this version and that this user may see (newest first)."""
    from apps.jobs.services import visible_jobs

    return visible_jobs(user).filter(spec__environment__version_id=version.pk)


# Storage ------------------------------------------------------------------------------


def _blob_name(sha: str) -> str:
    return f"environments/blobs/{sha[:2]}/{sha}"


def _store_blobs(files: dict[str, bytes]) -> dict[str, tuple[str, str]]:
    """Upload every file, content-addressed; returns path -> (sha256, storage name).

    Called before the database transaction (slow, and an orphan blob is harmless: it is
    content-addressed and reused by the next push of the same bytes)."""
    stored: dict[str, tuple[str, str]] = {}
    for path, data in files.items():
        sha = sha256_hex(data)
        name = _blob_name(sha)
        if not default_storage.exists(name):
            name = default_storage.save(name, ContentFile(data))
        stored[path] = (sha, name)
    return stored


def read_file(storage_name: str) -> bytes:
    with default_storage.open(storage_name, "rb") as handle:
        return handle.read()


# Push ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PushRequest:
    owner: str | None
    name: str
    version: str
    public: bool


def parse_push_request(raw_text: str | bytes | None) -> PushRequest:
    if not raw_text:
        raise DomainError(
            'request is required: {"name": ..., "version": ..., "public": false}', field="request"
        )
    try:
        raw = json.loads(raw_text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DomainError(f"request is not valid JSON: {exc}", field="request") from None
    if not isinstance(raw, dict):
        raise DomainError("request must be a JSON object", field="request")
    name_text = raw.get("name")
    version = raw.get("version")
    public = raw.get("public", False)
    if not isinstance(public, bool):
        raise DomainError("public must be true or false", field="public")
    try:
        ref = C.parse_reference(name_text, what="name")
        if ref.version is not None:
            raise C.ContractError("name must not carry a version; pass --version", field="name")
        C.check_version(version)
    except C.ContractError as exc:
        raise _refuse(exc) from None
    return PushRequest(owner=ref.owner, name=ref.name, version=version, public=public)


def _check_namespace(user: AbstractBaseUser, owner: str | None, name: str) -> None:
    if owner is not None and owner != user.get_username():
        raise DomainError(
            f"you can push only into your own namespace ({user.get_username()}/{name}), not {owner!r}",
            field="name",
            status_code=Forbidden,
        )


def _version_exists_error(ref: str) -> Conflict:
    return Conflict(
        f"{ref} already exists; versions are immutable: push a new version", field="version"
    )


def push_environment(
    user: AbstractBaseUser, request_text: str | bytes | None, archive: bytes | None
) -> EnvironmentVersion:
    req = parse_push_request(request_text)
    _check_namespace(user, req.owner, req.name)
    if archive is None:
        raise DomainError(
            "bundle is required: a gzip'd tar of the environment directory", field="bundle"
        )
    try:
        files = read_archive(archive)
        checked = C.check_bundle_files(files)
    except C.ContractError as exc:
        raise _refuse(exc) from None
    return _create_version(user, req.name, req.version, req.public, files, checked)


def _create_version(
    user: AbstractBaseUser,
    name: str,
    version: str,
    public: bool,
    files: dict[str, bytes],
    checked: C.BundleCheck,
) -> EnvironmentVersion:
    ref = f"{user.get_username()}/{name}@{version}"
    if EnvironmentVersion.objects.filter(
        environment__owner=user, environment__name=name, version=version
    ).exists():
        raise _version_exists_error(ref)
    stored = _store_blobs(files)
    manifest = checked.manifest
    try:
        with transaction.atomic():
            # `public` only applies when the environment is first created (spec).
            env, _created = Environment.objects.get_or_create(
                owner=user, name=name, defaults={"public": public}
            )
            row = EnvironmentVersion.objects.create(
                environment=env,
                version=version,
                manifest=manifest.data,
                protocol=manifest.protocol,
                deployment=manifest.deployment,
                verifier_kind=manifest.verifier_kind,
                verifier_ref=manifest.verifier_ref,
                sandbox_required=manifest.sandbox_required,
                description=manifest.description,
                task_counts=checked.tasks.counts if checked.tasks else {},
                digest=C.bundle_digest((path, sha) for path, (sha, _name) in stored.items()),
                size=sum(len(data) for data in files.values()),
                pushed_by=user,
            )
            EnvironmentFile.objects.bulk_create(
                EnvironmentFile(
                    version=row, path=path, size=len(files[path]), sha256=sha, storage_name=blob
                )
                for path, (sha, blob) in sorted(stored.items())
            )
    except IntegrityError:  # the same version pushed concurrently: the first one won
        raise _version_exists_error(ref) from None
    return row


# Harness plugins ----------------------------------------------------------------------


def push_plugin(user: AbstractBaseUser, archive: bytes | None) -> HarnessPluginVersion:
    if archive is None:
        raise DomainError(
            "bundle is required: a gzip'd tar of the plugin directory", field="bundle"
        )
    try:
        files = read_archive(archive)
        if C.PLUGIN_FILE not in files:
            raise C.ContractError(
                "plugin.yaml is missing from the plugin directory", field="plugin"
            )
        plugin = C.parse_plugin(files[C.PLUGIN_FILE])
    except C.ContractError as exc:
        raise _refuse(exc) from None
    module = plugin.entrypoint.split(":", 1)[0].replace(".", "/")
    if f"{module}.py" not in files and f"{module}/__init__.py" not in files:
        raise DomainError(
            f"plugin.yaml: entrypoint {plugin.entrypoint} names module {module.replace('/', '.')!r}, "
            f"which is not in the directory ({module}.py)",
            field="entrypoint",
        )
    ref = f"{user.get_username()}/{plugin.name}@{plugin.version}"
    if HarnessPluginVersion.objects.filter(
        plugin__owner=user, plugin__name=plugin.name, version=plugin.version
    ).exists():
        raise _version_exists_error(ref)
    stored = _store_blobs(files)
    try:
        with transaction.atomic():
            row_plugin, _ = HarnessPlugin.objects.get_or_create(owner=user, name=plugin.name)
            row = HarnessPluginVersion.objects.create(
                plugin=row_plugin,
                version=plugin.version,
                capability=plugin.capability,
                entrypoint=plugin.entrypoint,
                digest=C.bundle_digest((path, sha) for path, (sha, _n) in stored.items()),
                size=sum(len(data) for data in files.values()),
                pushed_by=user,
            )
            HarnessPluginFile.objects.bulk_create(
                HarnessPluginFile(
                    version=row, path=path, size=len(files[path]), sha256=sha, storage_name=blob
                )
                for path, (sha, blob) in sorted(stored.items())
            )
    except IntegrityError:
        raise _version_exists_error(ref) from None
    return row


def find_plugin_version(plugin_ref: str, version: str) -> HarnessPluginVersion | None:
    owner, _, name = plugin_ref.partition("/")
    return (
        HarnessPluginVersion.objects.select_related("plugin__owner")
        .filter(plugin__owner__username=owner, plugin__name=name, version=version)
        .first()
    )


# Runners ------------------------------------------------------------------------------


def runner_stale_after() -> timedelta:
    return timedelta(seconds=getattr(settings, "TUNEPLANE_ENV_RUNNER_STALE_SECONDS", 90))


def runner_state(runner: Runner) -> str:
    from .choices import RunnerState

    if runner.drained:
        return RunnerState.DRAINED
    return RunnerState.ANSWERING if is_answering(runner) else RunnerState.NOT_ANSWERING


def is_answering(runner: Runner) -> bool:
    """The last probe was healthy and recent enough to still mean something."""
    if not runner.answering or runner.last_answered_at is None:
        return False
    return runner.last_answered_at >= timezone.now() - runner_stale_after()


def _check_url(url: object) -> str:
    if not isinstance(url, str) or not url.strip():
        raise DomainError(
            "url is required: where the environment answers (http://host:port)", field="url"
        )
    url = url.strip().rstrip("/")
    try:
        C._url(url, "url")
    except C.ContractError:
        raise DomainError(f"url must be an http(s) URL, not {url!r}", field="url") from None
    return url


def _verify_answering(url: str) -> None:
    result = probes.probe(url, verify_openenv=True)
    if not result.ok:
        raise DomainError(f"no OpenEnv service is answering at {url}: {result.detail}", field="url")


def register_remote(
    user: AbstractBaseUser,
    *,
    url: object,
    name: object,
    version: object,
    description: object = "",
    rubric: object = None,
    fleet: object = None,
    public: object = False,
) -> tuple[EnvironmentVersion, Runner]:
    """`tp env runner register URL --name N --version V`: verify that an OpenEnv service
    answers at URL, then publish `<you>/N@V` as an openenv + remote version and record
    URL as its first runner. By default the environment scores its own turns (OpenEnv's
    Observation carries the reward): verifier `endpoint`; `--rubric` moves the judgement
    to the platform judge. Without `--fleet` the address is sealed into the version."""
    url = _check_url(url)
    try:
        ref = C.parse_reference(name, what="name")
        if ref.version is not None:
            raise C.ContractError("name must not carry a version; pass --version", field="name")
        C.check_version(version)
        rubric_ref = C.parse_reference(rubric, what="rubric") if rubric else None
    except C.ContractError as exc:
        raise _refuse(exc) from None
    _check_namespace(user, ref.owner, ref.name)
    if not isinstance(public, bool):
        raise DomainError("public must be true or false", field="public")
    if description is not None and not isinstance(description, str):
        raise DomainError("description must be a string", field="description")
    if fleet is not None and not isinstance(fleet, str):
        raise DomainError("fleet must be a string", field="fleet")
    manifest: dict[str, object] = {
        "schema": C.SCHEMA_V1,
        "protocol": C.PROTOCOL_OPENENV,
        "deployment": C.DEPLOYMENT_REMOTE,
        "verifier": {"kind": "rubric", "ref": str(rubric_ref)}
        if rubric_ref
        else {"kind": "endpoint", "ref": url},
        "sandbox": {"required": False},
        "description": description or "",
    }
    if fleet:
        manifest["fleet"] = fleet
    else:
        manifest["endpoint"] = url
    files = {C.MANIFEST_FILE: json.dumps(manifest, indent=2).encode()}
    try:
        checked = C.check_bundle_files(files)
    except C.ContractError as exc:
        raise _refuse(exc) from None
    full_ref = f"{user.get_username()}/{ref.name}@{version}"
    if EnvironmentVersion.objects.filter(
        environment__owner=user, environment__name=ref.name, version=version
    ).exists():
        raise _version_exists_error(full_ref)
    _verify_answering(url)  # before anything is stored
    row = _create_version(user, ref.name, str(version), public, files, checked)
    now = timezone.now()
    runner = Runner.objects.create(
        version=row,
        url=url,
        fleet=fleet or "",
        registered_by=user,
        label="",
        last_checked_at=now,
        last_answered_at=now,
        answering=True,
    )
    return row, runner


def serve_runner(
    user: AbstractBaseUser, version: EnvironmentVersion, url: object, label: object = ""
) -> Runner:
    """`tp env runner serve ENV --at URL`: register (or re-register) this machine."""
    url = _check_url(url)
    if not isinstance(label, str) or len(label) > 128:
        raise DomainError("name must be a string of at most 128 characters", field="name")
    if not can_manage(user, version.environment):
        raise DomainError(
            f"only {version.environment.owner.get_username()} can add runners to {version.ref}",
            field="environment",
            status_code=Forbidden,
        )
    if version.deployment != C.DEPLOYMENT_REMOTE:
        raise DomainError(
            f"{version.ref} is deployment: {version.deployment}; runners serve remote environments",
            field="environment",
        )
    sealed = version.manifest.get("endpoint")
    if sealed and sealed != url:
        raise DomainError(
            f"{version.ref} is sealed to answer at {sealed}; moving it means publishing a new version "
            "(register it without an endpoint, or with --fleet, to use runners)",
            field="url",
        )
    _verify_answering(url)
    now = timezone.now()
    fields = {
        "label": label,
        "fleet": version.manifest.get("fleet") or "",
        "last_heartbeat_at": now,
        "last_checked_at": now,
        "last_answered_at": now,
        "answering": True,
        "last_error": "",
        "drained_at": None,
        "drained_by": None,
    }
    with transaction.atomic():
        runner = Runner.objects.select_for_update().filter(version=version, url=url).first()
        if runner is None:
            try:
                with transaction.atomic():
                    return Runner.objects.create(
                        version=version, url=url, registered_by=user, **fields
                    )
            except IntegrityError:
                runner = Runner.objects.select_for_update().get(version=version, url=url)
        for key, value in fields.items():
            setattr(runner, key, value)
        runner.save(update_fields=list(fields))
    return runner


def access_runner(user: AbstractBaseUser, version: EnvironmentVersion, runner_id: object) -> Runner:
    try:
        pk = int(str(runner_id))
    except ValueError:
        pk = -1
    runner = version.runners.select_related("version__environment__owner").filter(pk=pk).first()
    if runner is None:
        raise DomainError(
            f"{version.ref} has no runner {runner_id}", field="runner", status_code=NotFound
        )
    return runner


def heartbeat(user: AbstractBaseUser, runner: Runner) -> Runner:
    """The serving machine says it is up; the control plane checks that it answers."""
    if not (can_manage(user, runner.version.environment) or runner.registered_by_id == user.pk):
        raise DomainError(
            "only the runner's owner can heartbeat it", field="runner", status_code=Forbidden
        )
    Runner.objects.filter(pk=runner.pk).update(last_heartbeat_at=timezone.now())
    return probe_runner(runner.pk)


def drain_runner(user: AbstractBaseUser, runner: Runner) -> Runner:
    """Take a runner out of service without forgetting it: it stays listed, marked
    drained, and no job resolves to it. Who and when are kept on the row."""
    if not (can_manage(user, runner.version.environment) or runner.registered_by_id == user.pk):
        raise DomainError(
            f"only {runner.version.environment.owner.get_username()} can drain runners of {runner.version.ref}",
            field="runner",
            status_code=Forbidden,
        )
    Runner.objects.filter(pk=runner.pk, drained_at__isnull=True).update(
        drained_at=timezone.now(), drained_by=user
    )
    runner.refresh_from_db()
    return runner


def probe_runner(runner_id: int) -> Runner:
    runner = Runner.objects.select_related("version__environment__owner").get(pk=runner_id)
    result = probes.probe(runner.url)
    now = timezone.now()
    updates: dict[str, object] = {
        "last_checked_at": now,
        "answering": result.ok,
        "last_error": "" if result.ok else result.detail[:500],
    }
    if result.ok:
        updates["last_answered_at"] = now
    Runner.objects.filter(pk=runner.pk).update(**updates)
    runner.refresh_from_db()
    return runner


def probe_all_runners() -> int:
    """Celery beat: refresh every runner that is in service."""
    ids = list(Runner.objects.filter(drained_at__isnull=True).values_list("pk", flat=True))
    for pk in ids:
        try:
            probe_runner(pk)
        except Exception:  # one bad runner must not stop the sweep
            log.exception("probing runner %s failed", pk)
    return len(ids)


def resolve_address(version: EnvironmentVersion) -> str:
    """Where a remote version answers for a new job: its sealed endpoint, else the
    runner (of its fleet, when it names one) that answered most recently."""
    sealed = version.manifest.get("endpoint")
    if sealed:
        return str(sealed)
    runners = version.runners.filter(
        drained_at__isnull=True,
        answering=True,
        last_answered_at__gte=timezone.now() - runner_stale_after(),
    )
    fleet = version.manifest.get("fleet")
    if fleet:
        runners = runners.filter(fleet=fleet)
    best = runners.order_by("-last_answered_at", "-id").first()
    if best is None:
        total = version.runners.count()
        where = f" of fleet {fleet}" if fleet else ""
        raise DomainError(
            f"environment {version.ref} has no answering runner{where} ({total} registered; "
            "see tp env runner ls)",
            field="environment",
        )
    return best.url
