"""Parsing and compiling a submission: request fields -> a job spec, or a refusal.

The refusals quoted by spec/bring-your-own-trainer.md come from
tuneplane.contracts.errors, so `tp validate`, `tp submit` and the server say the same.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from urllib.parse import urlparse

from tuneplane.contracts import errors, limits
from tuneplane.contracts.package import PackageError, PackageInfo, experiment_dir, inspect_package

from apps.accounts.errors import DomainError, TooLarge
from apps.governance import services as governance
from apps.governance.models import GpuProfile
from apps.recipes.models import Recipe

from . import admission

EXPERIMENT_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
OPERATIONS = ("train", "eval", "export")
SPEC_API_VERSION = "tuneplane/job/v1"


@dataclass
class SubmissionRequest:
    experiment: str
    operation: str
    recipe: str
    profile: str
    image: str
    observability_url: str
    hyperparams: dict[str, object]
    recipe_lock: dict[str, object] = field(default_factory=dict)
    model: str = ""
    train_data: str = ""
    environment: str = ""  # owner/name@version (apps.environments)


def _text(raw: dict, name: str, *, required: bool = False, max_len: int = 1024) -> str:
    value = raw.get(name)
    if value is None or value == "":
        if required:
            raise DomainError(f"{name} is required", field=name)
        return ""
    if not isinstance(value, str):
        raise DomainError(f"{name} must be a string, not {type(value).__name__}", field=name)
    if len(value) > max_len:
        raise DomainError(f"{name} is {len(value)} characters; the limit is {max_len}", field=name)
    return value.strip()


def parse_request(raw_text: str | bytes | None) -> SubmissionRequest:
    if not raw_text:
        raise DomainError("request is required: a JSON object describing the submission", field="request")
    try:
        raw = json.loads(raw_text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DomainError(f"request is not valid JSON: {exc}", field="request") from None
    if not isinstance(raw, dict):
        raise DomainError("request must be a JSON object", field="request")

    experiment = _text(raw, "experiment", required=True, max_len=63)
    if not EXPERIMENT_NAME.match(experiment):
        raise DomainError(
            "experiment must be lowercase letters, digits and '-', starting with a letter or "
            "digit, at most 63 characters",
            field="experiment",
        )
    operation = _text(raw, "operation") or "train"
    if operation not in OPERATIONS:
        raise DomainError(f"operation must be one of {', '.join(OPERATIONS)}", field="operation")

    hyperparams = raw.get("hyperparams") or {}
    if not isinstance(hyperparams, dict):
        raise DomainError("hyperparams must be an object of key=value pairs", field="hyperparams")
    for key, value in hyperparams.items():
        if not isinstance(value, (str, int, float, bool)) or value is None:
            raise DomainError(f"hyperparams.{key} must be a string, number or boolean", field="hyperparams")
    if len(json.dumps(hyperparams)) > limits.HPARAMS_MAX_BYTES:
        raise DomainError(f"hyperparams exceed {limits.HPARAMS_MAX_BYTES} bytes", field="hyperparams")

    lock = raw.get("recipe_lock") or {}
    if not isinstance(lock, dict):
        raise DomainError("recipe_lock must be the object in recipe.lock.json", field="recipe_lock")
    recipe = _text(raw, "recipe", max_len=128) or str(lock.get("name") or "")
    if not recipe:
        raise DomainError("recipe is required (or a recipe_lock naming it)", field="recipe")

    return SubmissionRequest(
        experiment=experiment,
        operation=operation,
        recipe=recipe,
        profile=_text(raw, "profile", max_len=64),
        image=_text(raw, "image", max_len=512),
        observability_url=_text(raw, "observability_url", max_len=2048),
        hyperparams=hyperparams,
        recipe_lock=lock,
        model=_text(raw, "model", max_len=512),
        train_data=_text(raw, "train_data", max_len=2048),
        environment=_text(raw, "environment", max_len=300),
    )


@dataclass
class CompiledJob:
    recipe: Recipe
    profile: GpuProfile
    package: PackageInfo
    spec: dict
    warnings: list[str]


def _check_image(image: str) -> list[str]:
    if not image:
        raise DomainError(
            "image is required: custom has no catalogue pin (runtime.default_version is user-managed)",
            field="image",
        )
    # The allowlist is governed in the admin (seeded from TUNEPLANE_ALLOWED_IMAGE_REGISTRIES).
    return governance.check_image(image)


def compile_job(req: SubmissionRequest, package_bytes: bytes | None, user=None) -> CompiledJob:
    """Compile and admit a submission; raises DomainError with what to change."""
    recipe = Recipe.objects.filter(name=req.recipe).first()
    if recipe is None:
        raise DomainError(f"recipe {req.recipe!r} is not in the catalogue", field="recipe")
    warnings: list[str] = []

    if not recipe.supports(req.operation):
        if recipe.framework == "custom":
            raise DomainError(errors.CUSTOM_NO_EXPORT_OR_EVAL.format(operation=req.operation), field="operation")
        raise DomainError(f"{recipe.name} does not support {req.operation}", field="operation")

    if recipe.observability == "external" and not req.observability_url:
        raise DomainError(errors.CUSTOM_OBSERVABILITY_URL_REQUIRED, field="observability_url")
    if recipe.observability == "platform" and req.observability_url:
        raise DomainError(
            errors.PLATFORM_OBSERVABILITY_URL_REFUSED.format(recipe=recipe.name), field="observability_url"
        )
    if req.observability_url:
        parsed = urlparse(req.observability_url)
        if parsed.scheme not in {"http", "https"} or not parsed.netloc:
            raise DomainError("observability_url must be an http(s) URL", field="observability_url")
    hyperparams = admission.check_hyperparams(recipe, req.hyperparams)

    if package_bytes is None:
        raise DomainError("package is required: the experiment's committed files", field="package")
    if len(package_bytes) > limits.PACKAGE_MAX_BYTES:
        raise TooLarge(
            f"package is {len(package_bytes)} bytes; the limit is {limits.PACKAGE_MAX_BYTES}", field="package"
        )
    try:
        info = inspect_package(package_bytes, req.experiment, recipe.entrypoint)
    except PackageError as exc:
        raise DomainError(str(exc), field="package") from None

    lock_digest = req.recipe_lock.get("digest")
    if lock_digest and lock_digest != recipe.digest:
        warnings.append(
            f"recipe.lock.json pins {recipe.name} {req.recipe_lock.get('version')} ({lock_digest}); "
            f"the catalogue publishes {recipe.version} ({recipe.digest})"
        )
    bindings, binding_warnings = admission.check_bindings(recipe, req.model, req.train_data)
    warnings += binding_warnings

    runtime = admission.resolve_runtime(recipe, req.image)
    warnings += runtime.warnings
    profile = admission.check_profile(req.profile)  # exists, fleet enabled, dispatchable, fits

    spec = {
        "apiVersion": SPEC_API_VERSION,
        "experiment": req.experiment,
        "operation": req.operation,
        "recipe": {"name": recipe.name, "version": recipe.version, "digest": recipe.digest},
        "framework": {
            "name": recipe.framework,
            "observability": recipe.observability,
            "observability_url": req.observability_url or None,
            "entrypoint": f"{experiment_dir(req.experiment)}/{recipe.entrypoint}",
        },
        "runtime": runtime.as_spec(),
        "resources": admission.resources_spec(profile),
        "hyperparams": hyperparams,
        "bindings": bindings,
        "launch": admission.launch_spec(recipe, hyperparams, bindings),
        "package": {"sha256": info.sha256, "size": info.size},
    }
    if req.environment:
        # The environment block (version, implied split, address, harness digest) is
        # compiled by its app; the gates below check it against governance.
        from apps.environments.admission import admit_environment

        spec["environment"] = admit_environment(user, req.environment, req.operation)
    admission.run_spec_gates(req, spec, profile, user)  # quota, environment split/digest, sandbox
    return CompiledJob(recipe=recipe, profile=profile, package=info, spec=spec, warnings=warnings)
