"""Admitting a job that references an environment (`--env owner/name@version`).

Every check here runs at submission, before the job exists, so a refusal costs nobody a
GPU allocation: the reference must resolve to a version the submitter may use, the split
the operation implies must be declared, a pinned harness digest must match the pushed
plugin ("verified at submission, never at rollout"), and a remote environment must have
somewhere to answer. The result is the `environment` block of the job spec, which the
executor and the runner read. The gates that join it to governance (a sandbox provider
for `sandbox.required`, a kubernetes fleet for `deployment: container`) run right after,
in apps.jobs.admission.check_environment, on this block.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from tuneplane.contracts import environment as C

from apps.accounts.errors import DomainError

from . import services
from .models import EnvironmentVersion

SPLIT_NOT_DECLARED = (
    "environment {ref} declares no {split} tasks; {operation} is refused rather than served "
    "the {other} split"
)
HARNESS_MISSING = (
    "environment {ref} names harness {plugin}@{version}, which has not been pushed (tp plugin push)"
)
HARNESS_DIGEST_MISMATCH = (
    "harness digest mismatch: environment {ref} pins {plugin}@{version} at {pinned}, "
    "but the pushed plugin is {actual}"
)


def _operation_words(operation: str) -> str:
    return {"train": "a training job", "eval": "an evaluation"}.get(operation, operation)


def admit_environment(
    user: AbstractBaseUser | None, ref_text: str, operation: str
) -> dict[str, Any]:
    """The spec's `environment` block for a job, or a DomainError saying what to change."""
    if user is None or not user.is_authenticated:
        raise DomainError(
            "an environment can only be referenced by a signed-in user", field="environment"
        )
    try:
        ref = C.parse_reference(ref_text, require_version=True)
        split = C.split_for_operation(operation)
    except C.ContractError as exc:
        raise DomainError(exc.message, field="environment") from None
    try:
        version = services.access_version(user, ref)
    except DomainError as exc:
        # A reference that does not resolve is bad input to the submission (400).
        raise DomainError(exc.message, field="environment") from None
    manifest = version.manifest
    ref_str = version.ref

    # Only a version with a taskset declares splits; a remote service or an image owns
    # its task data (spec: "Only deployment: local requires tasks.jsonl").
    if version.task_counts and not version.task_counts.get(split):
        other = C.SPLIT_TRAIN if split == C.SPLIT_EVAL else C.SPLIT_EVAL
        raise DomainError(
            SPLIT_NOT_DECLARED.format(
                ref=ref_str, split=split, operation=_operation_words(operation), other=other
            ),
            field="environment",
        )
    block: dict[str, Any] = {
        "ref": ref_str,
        "version_id": version.pk,
        "digest": version.digest,
        "protocol": version.protocol,
        "deployment": version.deployment,
        "split": split,
        "verifier": {"kind": version.verifier_kind, "ref": version.verifier_ref},
        # The declared splits (None without a taskset): the jobs app's gates re-check
        # the split against them, next to the sandbox and container-placement gates.
        "splits": version.splits if version.task_counts else None,
        "sandbox_required": version.sandbox_required,
        "category": manifest.get("category") or C.DEFAULT_CATEGORY,
        "address": None,
        "harness": None,
    }
    harness = manifest.get("harness")
    if harness:
        block["harness"] = _admit_harness(ref_str, harness)
    if version.deployment == C.DEPLOYMENT_REMOTE:
        block["address"] = services.resolve_address(version)
    elif version.deployment == C.DEPLOYMENT_CONTAINER:
        port = int(manifest.get("image_port") or C.DEFAULT_IMAGE_PORT)
        block["image"] = manifest["image"]
        block["image_port"] = port
        # The sidecar shares the pod's network namespace: it answers on loopback.
        block["address"] = f"http://127.0.0.1:{port}"
    return block


def _admit_harness(ref: str, harness: dict[str, Any]) -> dict[str, Any]:
    plugin, version, digest = harness["plugin"], harness["version"], harness.get("digest") or ""
    pushed = services.find_plugin_version(plugin, version)
    if pushed is None:
        raise DomainError(
            HARNESS_MISSING.format(ref=ref, plugin=plugin, version=version), field="environment"
        )
    if digest and digest != pushed.digest:
        raise DomainError(
            HARNESS_DIGEST_MISMATCH.format(
                ref=ref, plugin=plugin, version=version, pinned=digest, actual=pushed.digest
            ),
            field="environment",
        )
    return {
        "plugin": plugin,
        "version": version,
        "entrypoint": harness["entrypoint"],
        "digest": pushed.digest,
        "plugin_version_id": pushed.pk,
    }


def version_of(spec: dict[str, Any]) -> EnvironmentVersion | None:
    block = spec.get("environment") if isinstance(spec, dict) else None
    if not block:
        return None
    return (
        EnvironmentVersion.objects.select_related("environment__owner")
        .filter(pk=block.get("version_id"))
        .first()
    )
