"""Governance rules: the audited writes, the image-registry allowlist, and the checks
admission asks of governance (registry, profile and fleet fit, quota, sandbox).

Writes go through `save_governed` / `delete_governed`, which record a GovernanceAuditLog
row in the same transaction as the change, so the history can never disagree with the
data (a change that rolls back leaves no entry; an entry always has its change).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, models, transaction
from django.db.models import Q
from tuneplane.contracts import errors
from tuneplane.contracts.images import is_digest_pinned, parse_allowlist, registry_host

from apps.accounts.errors import DomainError

from .choices import AuditAction, FleetKind
from .fleets import validate_fleet_settings
from .models import (
    AllowedImageRegistry,
    Fleet,
    GovernanceAuditLog,
    GpuProfile,
    GpuQuota,
    RegistrySeed,
    SandboxProvider,
)

PROFILES_FIXTURE = Path(settings.BASE_DIR) / "fixtures" / "profiles.json"
SEED_REASON = "seeded from TUNEPLANE_ALLOWED_IMAGE_REGISTRIES"


# Audit ---------------------------------------------------------------------------------


def snapshot(obj: models.Model) -> dict[str, Any]:
    """The governed fields of `obj` as JSON values (foreign keys by their name)."""
    data: dict[str, Any] = {}
    for field in obj._meta.concrete_fields:
        if field.primary_key or field.name in {"created_at", "updated_at"}:
            continue
        if isinstance(field, models.ForeignKey):
            related = getattr(obj, field.name, None)
            data[field.name] = str(getattr(related, "name", related)) if related is not None else None
        else:
            data[field.name] = json.loads(json.dumps(field.value_from_object(obj), default=str))
    return data


def _audit(actor: AbstractBaseUser | None, action: str, obj: models.Model, old: dict | None, new: dict | None,
           *, object_id: str | None = None, reason: str = "") -> GovernanceAuditLog:
    if old is not None and new is not None:
        # Keep only what changed, so the admin list reads as "from X to Y".
        changed = {k for k in set(old) | set(new) if old.get(k) != new.get(k)}
        old = {k: old.get(k) for k in sorted(changed)}
        new = {k: new.get(k) for k in sorted(changed)}
    return GovernanceAuditLog.objects.create(
        actor=actor if actor is not None and actor.pk else None,
        actor_name=actor.get_username() if actor is not None and actor.pk else "",
        action=action,
        model=obj._meta.model_name,
        object_id=object_id or str(obj.pk),
        object_repr=str(obj)[:200],
        old_value=old,
        new_value=new,
        reason=reason,
    )


def save_governed(actor: AbstractBaseUser | None, obj: models.Model, *, reason: str = "") -> models.Model:
    """Create or update a governance object and record who changed what."""
    with transaction.atomic():
        old = None
        if obj.pk is not None:
            previous = type(obj).objects.select_for_update().filter(pk=obj.pk).first()
            old = snapshot(previous) if previous is not None else None
        obj.save()
        new = snapshot(obj)
        if old is None:
            _audit(actor, AuditAction.CREATE, obj, None, new, reason=reason)
        elif old != new:
            _audit(actor, AuditAction.UPDATE, obj, old, new, reason=reason)
    return obj


def delete_governed(actor: AbstractBaseUser | None, obj: models.Model, *, reason: str = "") -> None:
    with transaction.atomic():
        object_id, old = str(obj.pk), snapshot(obj)
        _audit(actor, AuditAction.DELETE, obj, old, None, object_id=object_id, reason=reason)
        obj.delete()


# Image registries ----------------------------------------------------------------------


def normalise_registry_host(raw: str) -> str:
    host = (raw or "").strip().lower()
    if not host or "/" in host or "://" in host or " " in host or "@" in host:
        from django.core.exceptions import ValidationError

        raise ValidationError({"host": "a registry hostname such as registry.example.com or localhost:5000 "
                                       "(no scheme, no path)"})
    return host


def seed_registries_from_settings() -> int:
    """Add each host named in TUNEPLANE_ALLOWED_IMAGE_REGISTRIES once, ever.

    Called after migrate and before each admission, so a deployment that names a new
    host in its environment gets it without a migration; a host the admin removed stays
    removed because its seed is remembered.
    """
    hosts = parse_allowlist(settings.TUNEPLANE_ALLOWED_IMAGE_REGISTRIES or "")
    if not hosts:
        return 0
    seen = set(RegistrySeed.objects.filter(host__in=hosts).values_list("host", flat=True))
    added = 0
    for host in hosts:
        if host in seen:
            continue
        try:
            with transaction.atomic():
                RegistrySeed.objects.create(host=host)
                registry, created = AllowedImageRegistry.objects.get_or_create(host=host)
                if created:
                    _audit(None, AuditAction.SEED, registry, None, snapshot(registry), reason=SEED_REASON)
                    added += 1
        except IntegrityError:
            pass  # another process seeded it at the same moment
    return added


def allowed_registries() -> list[str]:
    seed_registries_from_settings()
    return list(AllowedImageRegistry.objects.filter(enabled=True).order_by("host").values_list("host", flat=True))


def check_image(image: str) -> list[str]:
    """Admission gate: the registry host of `image` must be allowed. Returns warnings
    (a tag that is not pinned by digest); raises DomainError with what to change."""
    allowed = allowed_registries()
    if not allowed:
        raise DomainError(errors.IMAGE_REGISTRIES_EMPTY, field="image")
    host = registry_host(image)
    if host not in allowed:
        raise DomainError(
            errors.IMAGE_REGISTRY_NOT_ALLOWED.format(host=host, allowed=", ".join(allowed)), field="image"
        )
    if not is_digest_pinned(image):
        return [f"image {image} is a tag, not pinned by digest: pin @sha256:… in production"]
    return []


# Profiles and fleets -------------------------------------------------------------------


def executor_kinds(executor: str) -> set[str]:
    """Fleet kinds a deployment's executor can dispatch to."""
    return {FleetKind.KUBERNETES} if executor == "kubernetes" else {FleetKind.NODE}


def check_profile(name: str, executor: str | None = None) -> GpuProfile:
    """Admission gate: the profile exists, and its fleet is enabled, dispatchable by this
    deployment's executor and big enough for it."""
    if not name:
        raise DomainError("profile is required (for example --profile cpu or --profile h200:8)", field="profile")
    profile = GpuProfile.objects.select_related("fleet").filter(name=name, enabled=True).first()
    if profile is None:
        names = ", ".join(GpuProfile.objects.filter(enabled=True).values_list("name", flat=True))
        raise DomainError(f"profile {name!r} does not exist; available: {names}", field="profile")
    fleet = profile.fleet
    executor = executor or settings.TUNEPLANE_EXECUTOR
    if not fleet.enabled:
        raise DomainError(
            f"fleet {fleet.name!r} of profile {profile.name} is drained and admits no new job; "
            "choose a profile on another fleet or ask an administrator to enable it",
            field="profile",
        )
    if fleet.kind not in executor_kinds(executor):
        usable = ", ".join(
            GpuProfile.objects.filter(enabled=True, fleet__enabled=True, fleet__kind__in=executor_kinds(executor))
            .values_list("name", flat=True)
        ) or "none"
        raise DomainError(
            f"profile {profile.name} runs on the {fleet.kind} fleet {fleet.name!r}, and this deployment's "
            f"executor is {executor}; choose a profile it can dispatch: {usable}",
            field="profile",
        )
    capacity = validate_fleet_settings(fleet.kind, fleet.settings)
    if profile.gpus_per_node > capacity["gpus_per_node"] or profile.num_nodes > capacity["max_nodes"]:
        raise DomainError(
            f"profile {profile.name} needs {profile.num_nodes} node(s) x {profile.gpus_per_node} GPU(s), and fleet "
            f"{fleet.name!r} has at most {capacity['max_nodes']} node(s) x {capacity['gpus_per_node']} GPU(s); "
            "choose a smaller profile or ask an administrator to fix the profile's fleet",
            field="profile",
        )
    return profile


# Quota ---------------------------------------------------------------------------------


def namespace_of(user: AbstractBaseUser) -> str:
    return user.get_username()


def _quota_rows(namespace: str, gpu_type: str) -> list[GpuQuota]:
    """The rows that bind a job of `gpu_type` in `namespace`: the namespace's own rows if
    it has any, else the `*` defaults; per type and all-types rows both apply."""
    types = Q(gpu_type="") | Q(gpu_type=gpu_type)
    has_own = GpuQuota.objects.filter(namespace=namespace).exists()
    return list(GpuQuota.objects.filter(types, namespace=namespace if has_own else GpuQuota.DEFAULT_NAMESPACE))


def gpus_in_use(namespace: str, gpu_type: str | None = None) -> int:
    """GPUs held by the namespace's unfinished jobs (as admitted: the allocation)."""
    from apps.jobs.choices import TERMINAL_STATES
    from apps.jobs.models import Job

    qs = Job.objects.filter(owner__username=namespace).exclude(state__in=TERMINAL_STATES)
    if gpu_type:
        qs = qs.filter(spec__resources__gpu_type=gpu_type)
    total = 0
    for resources in qs.values_list("spec__resources", flat=True):
        if resources:
            total += int(resources.get("gpus_per_node", 0)) * int(resources.get("num_nodes", 1))
    return total


def check_quota(user: AbstractBaseUser, profile: GpuProfile, *, lock: bool = False) -> None:
    """Admission gate: the namespace stays within its GPU quotas with this job.

    With `lock=True` (inside the submitting transaction) the quota rows are locked, so
    two concurrent submissions cannot both take the last GPUs.
    """
    wanted = profile.total_gpus
    if wanted == 0:
        return
    namespace = namespace_of(user)
    rows = _quota_rows(namespace, profile.gpu_type)
    if lock and rows:
        rows = list(GpuQuota.objects.select_for_update().filter(pk__in=[r.pk for r in rows]).order_by("pk"))
    for row in rows:
        used = gpus_in_use(namespace, row.gpu_type or None)
        if used + wanted > row.max_gpus:
            kind = f"{row.gpu_type} GPUs" if row.gpu_type else "GPUs"
            raise DomainError(
                f"GPU quota exceeded: namespace {namespace!r} may hold {row.max_gpus} {kind} at once, "
                f"{used} are held by its unfinished jobs and profile {profile.name} asks for {wanted}; "
                "wait for a job to finish, cancel one, choose a smaller profile, or ask an administrator "
                "to raise the quota",
                field="profile",
            )


# Sandbox -------------------------------------------------------------------------------

SANDBOX_REQUIRED_NONE = (
    "the environment requires a sandbox (sandbox.required: true) and this deployment has no sandbox "
    "provider configured; ask an administrator to add one. The job does not fall back to running "
    "model-generated code in the training container"
)


def check_sandbox(required: bool, provider_name: str = "") -> SandboxProvider | None:
    """Admission gate: a job whose environment requires a sandbox needs an enabled
    provider (the named one, if the request names one)."""
    if provider_name:
        provider = SandboxProvider.objects.filter(name=provider_name, enabled=True).first()
        if provider is None:
            names = ", ".join(SandboxProvider.objects.filter(enabled=True).values_list("name", flat=True)) or "none"
            raise DomainError(
                f"sandbox provider {provider_name!r} does not exist or is disabled; available: {names}",
                field="sandbox_provider",
            )
        return provider
    if not required:
        return None
    provider = SandboxProvider.objects.filter(enabled=True).first()
    if provider is None:
        raise DomainError(SANDBOX_REQUIRED_NONE, field="environment")
    return provider


# Reference data ------------------------------------------------------------------------


def load_default_profiles() -> int:
    """Create the fixture's fleets and profiles that do not exist yet; never overwrite
    an admin's edits."""
    data = json.loads(PROFILES_FIXTURE.read_text())
    created = 0
    for entry in data.get("fleets", []):
        entry = dict(entry)
        entry["settings"] = validate_fleet_settings(entry["kind"], entry.get("settings", {}))
        fleet, was_created = Fleet.objects.get_or_create(name=entry["name"], defaults=entry)
        if was_created:
            _audit(None, AuditAction.SEED, fleet, None, snapshot(fleet), reason="fixtures/profiles.json")
        created += was_created
    for entry in data.get("profiles", []):
        entry = dict(entry)
        fleet = Fleet.objects.get(name=entry.pop("fleet"))
        profile, was_created = GpuProfile.objects.get_or_create(
            name=entry["name"], defaults={**entry, "fleet": fleet}
        )
        if was_created:
            _audit(None, AuditAction.SEED, profile, None, snapshot(profile), reason="fixtures/profiles.json")
        created += was_created
    return created
