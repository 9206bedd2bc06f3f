"""Agent environments: manifest.json (v1), tasks.jsonl and plugin.yaml, parsed once.

spec/agent-environments.md: "The same parsing code runs in the CLI and in the control
plane, from one module — so a manifest that pushes is a manifest that runs." `tp env
push` parses the directory with these functions before uploading, the server parses the
upload again with the same functions before storing anything, and the runner reads the
stored manifest with them inside the job. No Django import, standard library only.

Every refusal is a `ContractError` whose message names the file, the field (and for
tasks.jsonl the line) and what to write instead; tests assert these texts verbatim.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .environment_schema import SchemaShapeError, check_json_schema, json_kind

# --- names and constants -------------------------------------------------------------

MANIFEST_FILE = "manifest.json"
TASKS_FILE = "tasks.jsonl"
PLUGIN_FILE = "plugin.yaml"

SCHEMA_V1 = "tuneplane/environment/v1"
PLUGIN_SCHEMA_V1 = "tuneplane/plugin/v1"

PROTOCOL_OPENENV = "openenv"
PROTOCOL_NEMO_GYM = "nemo-gym"
PROTOCOLS = (PROTOCOL_NEMO_GYM, PROTOCOL_OPENENV)

DEPLOYMENT_LOCAL = "local"
DEPLOYMENT_REMOTE = "remote"
DEPLOYMENT_CONTAINER = "container"
DEPLOYMENTS = (DEPLOYMENT_LOCAL, DEPLOYMENT_REMOTE, DEPLOYMENT_CONTAINER)

VERIFIER_KINDS = ("rubric", "plugin", "endpoint")

# NeMo Gym's metrics-grouping categories, as the spec lists them.
CATEGORIES = (
    "math",
    "coding",
    "agent",
    "knowledge",
    "instruction_following",
    "long_context",
    "safety",
    "games",
    "translation",
    "e2e",
    "rlhf",
    "other",
)
DEFAULT_CATEGORY = "other"

SPLIT_TRAIN = "train"
SPLIT_EVAL = "eval"
SPLITS = (SPLIT_TRAIN, SPLIT_EVAL)

DEFAULT_IMAGE_PORT = 8900
PLUGIN_CAPABILITY_ENVIRONMENT = "environment"

# The job's variables (spec: "The job's variables say where the environment is").
ENV_JOB_ENVIRONMENT = "TUNEPLANE_JOB_ENVIRONMENT"  # owner/name@version
ENV_JOB_ENVIRONMENT_DIR = "TUNEPLANE_JOB_ENVIRONMENT_DIR"  # the materialised version
ENV_JOB_ENVIRONMENT_SPLIT = "TUNEPLANE_JOB_ENVIRONMENT_SPLIT"  # train | eval
ENV_JOB_ENVIRONMENT_URL = "TUNEPLANE_JOB_ENVIRONMENT_URL"  # where it answers (OpenEnv)
# For the runner only (stripped from train.sh's environment like every TUNEPLANE_RUNNER_*):
# the admitted environment block of the job spec, as JSON.
ENV_RUNNER_ENVIRONMENT = "TUNEPLANE_RUNNER_ENVIRONMENT"

# The ingest route that hands the runtime its environment (the implied split only).
ROUTE_ENVIRONMENT = "environment"

# Limits. A bundle is a taskset plus a little code, not a data lake.
BUNDLE_MAX_BYTES = 64 * 1024 * 1024
BUNDLE_MAX_FILES = 2_000
MANIFEST_MAX_BYTES = 256 * 1024
PLUGIN_FILE_MAX_BYTES = 64 * 1024
TASK_LINE_MAX_BYTES = 1024 * 1024
TOOLS_MAX = 64
PATH_MAX_CHARS = 255

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
OWNER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,149}$")
VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
ENTRYPOINT_RE = re.compile(
    r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
)
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
TOOL_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")

NAME_RULE = (
    "lowercase letters, digits, '.', '_' and '-', starting with a letter or digit, "
    "at most 63 characters"
)
VERSION_RULE = (
    "letters, digits, '.', '_', '+' and '-', starting with a letter or digit, at most 64 characters"
)

# --- errors ----------------------------------------------------------------------------

# Quoted by tests and the README; keep the wording stable.
SCHEMA_REQUIRED = f'manifest.json: schema is required; write "schema": "{SCHEMA_V1}"'
SCHEMA_REFUSED = (
    'manifest.json: schema {value} is no longer accepted; write "schema": "' + SCHEMA_V1 + '"'
)
COMPOUND_PROTOCOL_REFUSED = (
    "manifest.json: protocol {value!r} is a former compound name; write "
    '"protocol": "{protocol}", "deployment": "{deployment}"'
)
NEMO_GYM_LOCAL_ONLY = (
    'manifest.json: protocol nemo-gym supports only "deployment": "local", not {value!r}'
)
HARNESS_REQUIRED = (
    "manifest.json: harness is required for nemo-gym: "
    '{"plugin": "<owner>/<name>", "version": "...", "entrypoint": "module:ClassName"}'
)
ENDPOINT_AND_FLEET = (
    "manifest.json: endpoint and fleet are alternatives; give one of them, not both"
)
TASKS_REQUIRED = (
    "tasks.jsonl is required for deployment: local (one JSON object a line: "
    '{"prompt": ..., "reference": ..., "split": "train"|"eval"})'
)


class ContractError(ValueError):
    """A refusal the user can act on. `field` names the input at fault (dotted)."""

    def __init__(self, message: str, field: str | None = None, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.too_large = too_large  # over a size limit (HTTP 413), not malformed


# --- references ----------------------------------------------------------------------


@dataclass(frozen=True)
class Reference:
    owner: str | None  # None: the caller's own namespace
    name: str
    version: str | None  # None: the latest version

    def __str__(self) -> str:
        text = f"{self.owner}/{self.name}" if self.owner else self.name
        return f"{text}@{self.version}" if self.version else text


def check_name(value: object, what: str = "name") -> str:
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise ContractError(f"{what} must be {NAME_RULE}, not {value!r}", field=what)
    return value


def check_version(value: object, what: str = "version") -> str:
    if not isinstance(value, str) or not VERSION_RE.match(value):
        raise ContractError(f"{what} must be {VERSION_RULE}, not {value!r}", field=what)
    return value


def parse_reference(
    text: object, *, require_version: bool = False, what: str = "environment"
) -> Reference:
    """`owner/name@version`, `owner/name`, `name@version` or `name`."""
    if not isinstance(text, str) or not text.strip():
        raise ContractError(f"{what} must be written owner/name@version", field=what)
    raw = text.strip()
    # Usernames may contain "@" (Django allows it); names and versions may not, so the
    # version is what follows the last "@", when no "/" follows it.
    base, at, version = raw.rpartition("@")
    if not at or "/" in version:
        base, at, version = raw, "", ""
    owner, slash, name = base.rpartition("/")
    if slash and (not owner or "/" in owner or not OWNER_RE.match(owner)):
        raise ContractError(f"{what} {raw!r} must be written owner/name@version", field=what)
    if not NAME_RE.match(name):
        raise ContractError(f"{what} {raw!r}: the name must be {NAME_RULE}", field=what)
    if at and not VERSION_RE.match(version):
        raise ContractError(f"{what} {raw!r}: the version must be {VERSION_RULE}", field=what)
    if require_version and not at:
        raise ContractError(f"{what} {raw!r} needs a version: owner/name@version", field=what)
    return Reference(owner or None, name, version if at else None)


# --- manifest --------------------------------------------------------------------------


@dataclass(frozen=True)
class Tool:
    name: str
    endpoint: str
    schema: dict[str, Any]


@dataclass(frozen=True)
class Harness:
    plugin: str  # owner/name
    version: str
    entrypoint: str  # module:ClassName
    digest: str  # "" or sha256:<64 hex>

    @property
    def module(self) -> str:
        return self.entrypoint.split(":", 1)[0]

    @property
    def class_name(self) -> str:
        return self.entrypoint.split(":", 1)[1]


@dataclass(frozen=True)
class Manifest:
    protocol: str
    deployment: str
    verifier_kind: str
    verifier_ref: str
    tools: tuple[Tool, ...]
    harness: Harness | None
    sandbox_required: bool
    category: str
    image: str
    image_port: int
    endpoint: str
    fleet: str
    description: str
    data: dict[str, Any] = field(repr=False)  # the manifest with defaults filled in

    @property
    def needs_tasks(self) -> bool:
        return self.deployment == DEPLOYMENT_LOCAL

    def summary(self) -> dict[str, Any]:
        """What `tp env show`, the API and the console print."""
        return {
            "protocol": self.protocol,
            "deployment": self.deployment,
            "verifier": {"kind": self.verifier_kind, "ref": self.verifier_ref},
            "tools": [
                {"name": t.name, "endpoint": t.endpoint, "schema": t.schema} for t in self.tools
            ],
            "sandbox_required": self.sandbox_required,
            "category": self.category,
            "harness": None
            if self.harness is None
            else {
                "plugin": self.harness.plugin,
                "version": self.harness.version,
                "entrypoint": self.harness.entrypoint,
                "digest": self.harness.digest,
            },
            "image": self.image or None,
            "image_port": self.image_port if self.deployment == DEPLOYMENT_CONTAINER else None,
            "endpoint": self.endpoint or None,
            "fleet": self.fleet or None,
            "description": self.description,
        }


_KNOWN_KEYS = {
    "schema",
    "protocol",
    "deployment",
    "verifier",
    "tools",
    "harness",
    "sandbox",
    "category",
    "image",
    "image_port",
    "endpoint",
    "fleet",
    "description",
    "name",
    "version",
}


def _str(
    data: Mapping[str, Any], key: str, where: str, *, required: bool = False, max_len: int = 2048
) -> str:
    value = data.get(key)
    if value is None or value == "":
        if required:
            raise ContractError(f"manifest.json: {where} is required", field=where)
        return ""
    if not isinstance(value, str):
        raise ContractError(
            f"manifest.json: {where} must be a string, not {json_kind(value)}", field=where
        )
    if len(value) > max_len:
        raise ContractError(
            f"manifest.json: {where} is {len(value)} characters; the limit is {max_len}",
            field=where,
        )
    return value.strip()


def _compound(protocol: str) -> tuple[str, str] | None:
    """('openenv', 'local') for a former compound name such as 'openenv-local'."""
    lowered = protocol.lower().replace("_", "-")
    for known in ("nemo-gym", "nemogym", "openenv"):
        for deployment in DEPLOYMENTS:
            for sep in ("-", "+", "/", ":"):
                if lowered == f"{known}{sep}{deployment}":
                    return ("nemo-gym" if known.startswith("nemo") else known, deployment)
    if lowered in {"nemo-gym-local", "nemogym"}:
        return ("nemo-gym", "local")
    return None


def _url(value: str, where: str) -> str:
    if not re.match(r"^https?://[^\s/]+(/\S*)?$", value):
        raise ContractError(
            f"manifest.json: {where} must be an http(s) URL, not {value!r}", field=where
        )
    return value.rstrip("/")


def parse_manifest(raw: bytes | str | Mapping[str, Any]) -> Manifest:
    """Parse and validate manifest.json; raises ContractError."""
    if isinstance(raw, (bytes, str)):
        if len(raw) > MANIFEST_MAX_BYTES:
            raise ContractError(
                f"manifest.json is {len(raw)} bytes; the limit is {MANIFEST_MAX_BYTES}",
                field="manifest",
            )
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ContractError(
                f"manifest.json is not valid JSON: {exc}", field="manifest"
            ) from None
    else:
        data = dict(raw)
    if not isinstance(data, dict):
        raise ContractError("manifest.json must be a JSON object", field="manifest")

    schema = data.get("schema")
    if schema is None or schema == "":
        raise ContractError(SCHEMA_REQUIRED, field="schema")
    if schema != SCHEMA_V1:
        raise ContractError(SCHEMA_REFUSED.format(value=json.dumps(schema)), field="schema")

    protocol = _str(data, "protocol", "protocol", required=True, max_len=64)
    deployment = _str(data, "deployment", "deployment", max_len=64)
    compound = _compound(protocol)
    if compound is not None:
        raise ContractError(
            COMPOUND_PROTOCOL_REFUSED.format(
                value=protocol, protocol=compound[0], deployment=compound[1]
            ),
            field="protocol",
        )
    if protocol not in PROTOCOLS:
        raise ContractError(
            f"manifest.json: protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}",
            field="protocol",
        )
    if not deployment:
        raise ContractError(
            f"manifest.json: deployment is required: one of {', '.join(DEPLOYMENTS)}",
            field="deployment",
        )
    if deployment not in DEPLOYMENTS:
        raise ContractError(
            f"manifest.json: deployment must be one of {', '.join(DEPLOYMENTS)}, not {deployment!r}",
            field="deployment",
        )
    if protocol == PROTOCOL_NEMO_GYM and deployment != DEPLOYMENT_LOCAL:
        raise ContractError(NEMO_GYM_LOCAL_ONLY.format(value=deployment), field="deployment")

    verifier = data.get("verifier")
    if verifier is None:
        raise ContractError(
            'manifest.json: verifier is required: {"kind": "rubric|plugin|endpoint", "ref": "..."}',
            field="verifier",
        )
    if not isinstance(verifier, dict):
        raise ContractError(
            f"manifest.json: verifier must be an object, not {json_kind(verifier)}",
            field="verifier",
        )
    kind = _str(verifier, "kind", "verifier.kind", required=True, max_len=32)
    if kind not in VERIFIER_KINDS:
        raise ContractError(
            f"manifest.json: verifier.kind must be one of {', '.join(VERIFIER_KINDS)}, not {kind!r}",
            field="verifier.kind",
        )
    ref = _str(verifier, "ref", "verifier.ref", required=True, max_len=512)

    tools = _parse_tools(data.get("tools"))
    harness = _parse_harness(data.get("harness"))
    if protocol == PROTOCOL_NEMO_GYM and harness is None:
        raise ContractError(HARNESS_REQUIRED, field="harness")

    sandbox = data.get("sandbox", {})
    if sandbox is None:
        sandbox = {}
    if not isinstance(sandbox, dict):
        raise ContractError(
            f'manifest.json: sandbox must be an object like {{"required": false}}, not {json_kind(sandbox)}',
            field="sandbox",
        )
    required = sandbox.get("required", False)
    if not isinstance(required, bool):
        raise ContractError(
            f"manifest.json: sandbox.required must be true or false, not {json_kind(required)}",
            field="sandbox.required",
        )

    category = _str(data, "category", "category", max_len=64)
    if protocol == PROTOCOL_NEMO_GYM:
        if not category:
            raise ContractError(
                f"manifest.json: category is required for nemo-gym: one of {', '.join(CATEGORIES)}",
                field="category",
            )
        if category not in CATEGORIES:
            raise ContractError(
                f"manifest.json: category must be one of {', '.join(CATEGORIES)}, not {category!r}",
                field="category",
            )
    category = category or DEFAULT_CATEGORY

    image = _str(data, "image", "image", max_len=512)
    image_port_raw = data.get("image_port")
    if deployment == DEPLOYMENT_CONTAINER:
        if not image:
            raise ContractError(
                "manifest.json: image is required for deployment: container (the OCI image to run beside the job)",
                field="image",
            )
        if protocol != PROTOCOL_OPENENV:
            raise ContractError(
                "manifest.json: deployment: container is for openenv images", field="deployment"
            )
        if image_port_raw is None:
            image_port = DEFAULT_IMAGE_PORT
        elif (
            isinstance(image_port_raw, bool)
            or not isinstance(image_port_raw, int)
            or not 1 <= image_port_raw <= 65535
        ):
            raise ContractError(
                f"manifest.json: image_port must be a port number 1-65535, not {image_port_raw!r}",
                field="image_port",
            )
        else:
            image_port = image_port_raw
    else:
        if image:
            raise ContractError(
                "manifest.json: image is only valid with deployment: container", field="image"
            )
        if image_port_raw is not None:
            raise ContractError(
                "manifest.json: image_port is only valid with deployment: container",
                field="image_port",
            )
        image_port = DEFAULT_IMAGE_PORT

    endpoint = _str(data, "endpoint", "endpoint", max_len=2048)
    fleet = _str(data, "fleet", "fleet", max_len=128)
    if deployment != DEPLOYMENT_REMOTE:
        for key, value in (("endpoint", endpoint), ("fleet", fleet)):
            if value:
                raise ContractError(
                    f"manifest.json: {key} is only valid with deployment: remote", field=key
                )
    if endpoint and fleet:
        raise ContractError(ENDPOINT_AND_FLEET, field="endpoint")
    if endpoint:
        endpoint = _url(endpoint, "endpoint")

    description = _str(data, "description", "description", max_len=4096)

    normalised = dict(data)
    normalised["sandbox"] = {**sandbox, "required": required}
    normalised["category"] = category
    if deployment == DEPLOYMENT_CONTAINER:
        normalised["image_port"] = image_port
    return Manifest(
        protocol=protocol,
        deployment=deployment,
        verifier_kind=kind,
        verifier_ref=ref,
        tools=tools,
        harness=harness,
        sandbox_required=required,
        category=category,
        image=image,
        image_port=image_port,
        endpoint=endpoint,
        fleet=fleet,
        description=description,
        data=normalised,
    )


def _parse_tools(raw: object) -> tuple[Tool, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ContractError(
            f"manifest.json: tools must be an array, not {json_kind(raw)}", field="tools"
        )
    if len(raw) > TOOLS_MAX:
        raise ContractError(
            f"manifest.json: tools has {len(raw)} entries; the limit is {TOOLS_MAX}", field="tools"
        )
    tools: list[Tool] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        where = f"tools[{index}]"
        if not isinstance(item, dict):
            raise ContractError(
                f"manifest.json: {where} must be an object, not {json_kind(item)}", field=where
            )
        name = _str(item, "name", f"{where}.name", required=True, max_len=64)
        if not TOOL_NAME_RE.match(name):
            raise ContractError(
                f"manifest.json: {where}.name {name!r} must be letters, digits, '_', '.' and '-'",
                field=f"{where}.name",
            )
        if name in seen:
            raise ContractError(
                f"manifest.json: {where}.name {name!r} is declared twice", field=f"{where}.name"
            )
        seen.add(name)
        endpoint = _str(item, "endpoint", f"{where}.endpoint", required=True, max_len=2048)
        if not (endpoint.startswith("/") or re.match(r"^https?://", endpoint)):
            raise ContractError(
                f"manifest.json: {where}.endpoint must be a path (/tools/x) or an http(s) URL, not {endpoint!r}",
                field=f"{where}.endpoint",
            )
        if "schema" not in item:
            raise ContractError(
                f"manifest.json: {where}.schema is required: a JSON Schema for the arguments",
                field=f"{where}.schema",
            )
        schema = item["schema"]
        if not isinstance(schema, dict):
            raise ContractError(
                f"manifest.json: {where}.schema must be a JSON Schema object, not {json_kind(schema)}",
                field=f"{where}.schema",
            )
        try:
            check_json_schema(schema)
        except SchemaShapeError as exc:
            location = f"{where}.schema.{exc.path}" if exc.path else f"{where}.schema"
            raise ContractError(
                f"manifest.json: {location} is not a valid JSON Schema: {exc.reason}",
                field=f"{where}.schema",
            ) from None
        tools.append(Tool(name=name, endpoint=endpoint, schema=schema))
    return tuple(tools)


def _parse_harness(raw: object) -> Harness | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ContractError(
            f"manifest.json: harness must be an object, not {json_kind(raw)}", field="harness"
        )
    plugin = _str(raw, "plugin", "harness.plugin", required=True, max_len=256)
    try:
        ref = parse_reference(plugin, what="harness.plugin")
    except ContractError as exc:
        raise ContractError(f"manifest.json: {exc.message}", field="harness.plugin") from None
    if ref.owner is None or ref.version is not None:
        raise ContractError(
            f"manifest.json: harness.plugin must be <owner>/<name>, not {plugin!r}",
            field="harness.plugin",
        )
    version = _str(raw, "version", "harness.version", required=True, max_len=64)
    if not VERSION_RE.match(version):
        raise ContractError(
            f"manifest.json: harness.version must be {VERSION_RULE}", field="harness.version"
        )
    entrypoint = _str(raw, "entrypoint", "harness.entrypoint", required=True, max_len=256)
    if not ENTRYPOINT_RE.match(entrypoint):
        raise ContractError(
            f"manifest.json: harness.entrypoint must be module:ClassName, not {entrypoint!r}",
            field="harness.entrypoint",
        )
    digest = _str(raw, "digest", "harness.digest", max_len=80)
    if digest and not DIGEST_RE.match(digest):
        raise ContractError(
            f"manifest.json: harness.digest must be empty or sha256:<64 hex digits>, not {digest!r}",
            field="harness.digest",
        )
    return Harness(plugin=plugin, version=version, entrypoint=entrypoint, digest=digest)


# --- tasks.jsonl -----------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    line: int
    prompt: str
    reference: str
    split: str
    data: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class TasksSummary:
    counts: dict[str, int]  # split -> number of tasks

    @property
    def splits(self) -> list[str]:
        return [split for split in SPLITS if self.counts.get(split)]


def _task_error(line: int, message: str, fieldname: str | None = None) -> ContractError:
    where = f"tasks.jsonl line {line}"
    text = f"{where}: field {fieldname!r} {message}" if fieldname else f"{where}: {message}"
    return ContractError(text, field=TASKS_FILE)


def iter_tasks(data: bytes) -> Iterator[Task]:
    """Parse tasks.jsonl line by line; raises ContractError naming the line and field.

    Blank lines are skipped (a trailing newline is not a task). `reference` may be a
    string or a number in the file and is kept as text: "57.8" and 57.8 mean the same.
    """
    for number, raw_line in enumerate(data.split(b"\n"), start=1):
        if not raw_line.strip():
            continue
        if len(raw_line) > TASK_LINE_MAX_BYTES:
            raise _task_error(
                number, f"is {len(raw_line)} bytes; the limit is {TASK_LINE_MAX_BYTES}"
            )
        try:
            row = json.loads(raw_line)
        except (ValueError, UnicodeDecodeError) as exc:
            raise _task_error(number, f"is not valid JSON ({exc})") from None
        if not isinstance(row, dict):
            raise _task_error(number, f"must be a JSON object, not {json_kind(row)}")
        prompt = row.get("prompt")
        if prompt is None:
            raise _task_error(number, "is required", "prompt")
        if not isinstance(prompt, str):
            raise _task_error(number, f"must be a string, not {json_kind(prompt)}", "prompt")
        if not prompt.strip():
            raise _task_error(number, "must not be empty", "prompt")
        if "reference" not in row:
            raise _task_error(number, "is required", "reference")
        reference = row["reference"]
        if isinstance(reference, bool) or not isinstance(reference, (str, int, float)):
            raise _task_error(
                number, f"must be a string or a number, not {json_kind(reference)}", "reference"
            )
        split = row.get("split", SPLIT_TRAIN)
        if split not in SPLITS:
            raise _task_error(
                number, f"must be 'train' or 'eval', not {json.dumps(split)}", "split"
            )
        yield Task(line=number, prompt=prompt, reference=str(reference), split=split, data=row)


def parse_tasks(data: bytes) -> TasksSummary:
    counts = {split: 0 for split in SPLITS}
    for task in iter_tasks(data):
        counts[task.split] += 1
    if not any(counts.values()):
        raise ContractError("tasks.jsonl has no tasks", field=TASKS_FILE)
    return TasksSummary(counts=counts)


def split_tasks(data: bytes, split: str) -> bytes:
    """The lines of one split, as they were written (only they may reach a job)."""
    kept: list[bytes] = []
    lines = [line for line in data.split(b"\n") if line.strip()]
    for raw_line, task in zip(lines, iter_tasks(data), strict=True):
        if task.split == split:
            kept.append(raw_line.rstrip(b"\r"))
    return b"".join(line + b"\n" for line in kept)


def split_for_operation(operation: str) -> str:
    """Which half of the taskset an operation sees. Set by the platform, never the job."""
    if operation == "train":
        return SPLIT_TRAIN
    if operation == "eval":
        return SPLIT_EVAL
    raise ContractError(
        f"operation {operation!r} does not run an environment; drop --env", field="environment"
    )


# --- a whole bundle --------------------------------------------------------------------


@dataclass(frozen=True)
class BundleCheck:
    manifest: Manifest
    tasks: TasksSummary | None


def check_bundle_files(files: Mapping[str, bytes]) -> BundleCheck:
    """Validate the files of an environment bundle (path -> content)."""
    if MANIFEST_FILE not in files:
        raise ContractError(
            "manifest.json is missing from the environment directory", field="manifest"
        )
    manifest = parse_manifest(files[MANIFEST_FILE])
    tasks: TasksSummary | None = None
    if TASKS_FILE in files:
        tasks = parse_tasks(files[TASKS_FILE])
    elif manifest.needs_tasks:
        raise ContractError(TASKS_REQUIRED, field=TASKS_FILE)
    return BundleCheck(manifest=manifest, tasks=tasks)


def bundle_digest(files: Iterable[tuple[str, str]]) -> str:
    """The digest of a bundle from its (path, sha256-hex) pairs, independent of archive
    bytes (tar timestamps, compression): what `harness.digest` pins."""
    h = hashlib.sha256()
    for path, sha in sorted(files):
        h.update(f"{path}\0{sha}\n".encode())
    return f"sha256:{h.hexdigest()}"


# --- plugin.yaml -----------------------------------------------------------------------


@dataclass(frozen=True)
class Plugin:
    name: str
    version: str
    capability: str
    entrypoint: str


def parse_plugin(text: bytes | str) -> Plugin:
    """Parse plugin.yaml. YAML needs PyYAML, which the SDK wheel does not carry (it goes
    into training images and stays standard-library only): plugin.yaml is only ever read
    by `tp plugin push` and by the server, and both come with PyYAML (tuneplane-server's
    dependencies). A hand-written YAML subset would read some files differently from
    every other YAML tool, so it is imported here, lazily, instead."""
    if len(text) > PLUGIN_FILE_MAX_BYTES:
        raise ContractError(
            f"plugin.yaml is {len(text)} bytes; the limit is {PLUGIN_FILE_MAX_BYTES}",
            field="plugin",
        )
    try:
        import yaml
    except ImportError:  # pragma: no cover - only in a bare SDK install
        raise ContractError(
            "reading plugin.yaml needs PyYAML (pip install pyyaml)", field="plugin"
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ContractError(f"plugin.yaml is not valid YAML: {exc}", field="plugin") from None
    return check_plugin(data)


def check_plugin(data: object) -> Plugin:
    if not isinstance(data, dict):
        raise ContractError(
            "plugin.yaml must be a mapping of schema, name, version, capability, entrypoint",
            field="plugin",
        )
    schema = data.get("schema")
    if schema != PLUGIN_SCHEMA_V1:
        raise ContractError(
            f"plugin.yaml: schema must be {PLUGIN_SCHEMA_V1}, not {schema!r}", field="schema"
        )
    name = data.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ContractError(f"plugin.yaml: name must be {NAME_RULE}, not {name!r}", field="name")
    version = data.get("version")
    if isinstance(version, (int, float)) and not isinstance(version, bool):
        version = str(version)  # `version: 1.0` is a float to YAML
    if not isinstance(version, str) or not VERSION_RE.match(version):
        raise ContractError(
            f"plugin.yaml: version must be {VERSION_RULE}, not {version!r}", field="version"
        )
    capability = data.get("capability")
    if capability != PLUGIN_CAPABILITY_ENVIRONMENT:
        raise ContractError(
            f"plugin.yaml: capability must be {PLUGIN_CAPABILITY_ENVIRONMENT}, not {capability!r}",
            field="capability",
        )
    entrypoint = data.get("entrypoint")
    if not isinstance(entrypoint, str) or not ENTRYPOINT_RE.match(entrypoint):
        raise ContractError(
            f"plugin.yaml: entrypoint must be module:ClassName, not {entrypoint!r}",
            field="entrypoint",
        )
    return Plugin(name=name, version=version, capability=capability, entrypoint=entrypoint)
