"""Admission gates that compile_job runs on every submission and every validate.

Nothing here trusts an earlier preview (spec: a previous `tp validate` never stands in
for the gates). Each refusal is a DomainError naming the field and saying what to change.
The governance data the gates read (allowlist, fleets, profiles, quotas, sandbox
providers) is owned by apps.governance; the rules that join it to a submission live here.

The environment gates read `spec["environment"]`, the section the environments app
compiles for a job that references an environment version::

    {"ref": "owner/name@version", "digest": "sha256:<64 hex>", "deployment": "local|remote|container",
     "split": "train|eval", "splits": ["train", "eval"], "sandbox_required": bool,
     "image": "...", "image_port": 8900}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tuneplane.contracts.images import is_digest_pinned
from tuneplane.contracts.parameters import ParameterError, to_argv, validate_parameters

from apps.accounts.errors import DomainError
from apps.governance import services as governance
from apps.governance.choices import FleetKind
from apps.governance.models import GpuProfile
from apps.recipes.models import Recipe

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from .submission import SubmissionRequest

CUSTOM_FRAMEWORK = "custom"
CUSTOM_IGNORES_BINDINGS = "--model and --train-data are ignored by custom/custom"
SHA256_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
SPLIT_FOR_OPERATION = {"train": "train", "eval": "eval", "export": "train"}
BINDING_FLAGS = {"model": "--model", "train_data": "--train-data"}


@dataclass
class Runtime:
    image: str
    pinned: bool
    source: str  # "user" (--image) or "catalogue" (the recipe's pin)
    warnings: list[str] = field(default_factory=list)

    def as_spec(self) -> dict[str, Any]:
        return {"image": self.image, "pinned": self.pinned, "source": self.source}


def resolve_runtime(recipe: Recipe, image: str) -> Runtime:
    """Registry allowlist and digest warning for a user's image; the catalogue's pin
    when a framework recipe is submitted without --image (spec: an empty allowlist
    refuses custom user images, while catalogue frameworks can still use the defaults)."""
    if not image and recipe.framework != CUSTOM_FRAMEWORK:
        pinned = str((recipe.runtime or {}).get("image", ""))
        return Runtime(image=pinned, pinned=is_digest_pinned(pinned), source="catalogue")
    if not image:
        raise DomainError(
            "image is required: custom has no catalogue pin (runtime.default_version is user-managed)",
            field="image",
        )
    warnings = governance.check_image(image)
    return Runtime(image=image, pinned=is_digest_pinned(image), source="user", warnings=warnings)


def check_hyperparams(recipe: Recipe, hyperparams: dict[str, Any]) -> dict[str, Any]:
    """The recipe's parameter schema, through the one validator tp also uses."""
    try:
        return validate_parameters(recipe.parameters, hyperparams, recipe=recipe.name)
    except ParameterError as exc:
        raise DomainError(str(exc), field="hyperparams") from None


def check_bindings(recipe: Recipe, model: str, train_data: str) -> tuple[dict[str, str], list[str]]:
    """--model and --train-data: bound by recipes that declare them (trl/sft), ignored
    with a warning by the others (custom/custom)."""
    given = {"model": model, "train_data": train_data}
    declared = recipe.bindings or {}
    bound: dict[str, str] = {}
    warnings: list[str] = []
    for name, value in given.items():
        if name in declared:
            if not value and declared[name].get("required"):
                raise DomainError(
                    f"{recipe.name} requires {BINDING_FLAGS[name]} ({declared[name].get('help', 'a value')})",
                    field=name,
                )
            if value:
                bound[name] = value
    ignored = [BINDING_FLAGS[n] for n, v in given.items() if v and n not in declared]
    if ignored:
        if recipe.framework == CUSTOM_FRAMEWORK:
            warnings.append(CUSTOM_IGNORES_BINDINGS)
        else:
            warnings.append(f"{' and '.join(ignored)} {'is' if len(ignored) == 1 else 'are'} ignored by {recipe.name}")
    return bound, warnings


def launch_spec(recipe: Recipe, hyperparams: dict[str, Any], bindings: dict[str, str]) -> dict[str, Any]:
    """What the runner executes. custom: `bash train.sh`, values never reach argv (spec:
    "--set values land in spec.hyperparams without reaching your argv"). Catalogue
    frameworks: the launcher with the checked values and the bindings as flags."""
    if recipe.framework == CUSTOM_FRAMEWORK:
        return {"launcher": recipe.launcher, "args": []}
    args = to_argv(recipe.parameters, hyperparams)
    for name, value in bindings.items():
        args += [(recipe.bindings.get(name) or {}).get("flag") or BINDING_FLAGS[name], value]
    return {"launcher": recipe.launcher, "args": args}


def check_profile(name: str) -> GpuProfile:
    return governance.check_profile(name)


def check_quota(user: AbstractBaseUser | None, profile: GpuProfile, *, lock: bool = False) -> None:
    if user is not None and user.is_authenticated:
        governance.check_quota(user, profile, lock=lock)


def resources_spec(profile: GpuProfile) -> dict[str, Any]:
    """The allocation, frozen at admission: a later admin edit of the profile does not
    change a job that is already queued."""
    return {
        "profile": profile.name,
        "gpu_type": profile.gpu_type,
        "num_nodes": profile.num_nodes,
        "gpus_per_node": profile.gpus_per_node,
        "fleet": profile.fleet.name,
        "fleet_kind": profile.fleet.kind,
        "node_selector": profile.node_selector or {},
        "tolerations": profile.tolerations or [],
    }


def check_environment(spec: dict[str, Any], profile: GpuProfile) -> None:
    """Environment split and digest, container placement, and the sandbox provider."""
    environment = spec.get("environment")
    if not environment:
        return
    ref = environment.get("ref", "the environment")
    operation = spec.get("operation", "train")
    expected = SPLIT_FOR_OPERATION.get(operation, "train")
    split = environment.get("split") or expected
    if split != expected:
        raise DomainError(
            f"a {operation} job reads the {expected} split of {ref}, not {split!r}: the split follows the "
            "operation; do not set it",
            field="environment",
        )
    splits = environment.get("splits")
    if splits is not None and split not in splits:
        raise DomainError(
            f"{ref} declares no {split} split (it has: {', '.join(splits) or 'none'}); an {operation} job is "
            f"refused rather than served other tasks: push a version with {split} tasks",
            field="environment",
        )
    digest = environment.get("digest")
    if not digest or not SHA256_DIGEST.match(str(digest)):
        raise DomainError(
            f"{ref} is not pinned by a sha256 digest (got {digest!r}); reference an immutable pushed version",
            field="environment",
        )
    if environment.get("deployment") == "container" and profile.fleet.kind != FleetKind.KUBERNETES:
        raise DomainError(
            f"{ref} is deployed as a container, which needs a kubernetes fleet; profile {profile.name} runs on "
            f"the {profile.fleet.kind} fleet {profile.fleet.name!r}: choose a profile on a kubernetes fleet",
            field="profile",
        )
    provider = governance.check_sandbox(bool(environment.get("sandbox_required")), environment.get("sandbox_provider", ""))
    if provider is not None:
        environment["sandbox_provider"] = provider.name


def run_spec_gates(req: SubmissionRequest, spec: dict[str, Any], profile: GpuProfile,
                   user: AbstractBaseUser | None) -> None:
    """The gates that need the compiled spec: quota (per namespace) and environment."""
    check_quota(user, profile)
    check_environment(spec, profile)
