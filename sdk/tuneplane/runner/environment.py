"""The job's environment, materialised inside the job by the runner.

A job that references an environment gets its admitted `environment` block from the
executor (TUNEPLANE_RUNNER_ENVIRONMENT, never visible to train.sh). Before train.sh
starts, the runner fetches the version through the attempt's ingest route, which serves
only the split the operation implies, and prepares the deployment (spec: "Deployments at
run time"):

- openenv + local: starts the environment server from the taskset, on 127.0.0.1 inside
  the job, and hands the trainer its address;
- nemo-gym + local: writes the version as the files NeMo Gym expects plus a shim of at
  most two lines importing the harness entrypoint (the harness code is on PYTHONPATH);
- openenv + remote / container: nothing to start; the admitted address is handed over.

train.sh then sees TUNEPLANE_JOB_ENVIRONMENT_DIR, TUNEPLANE_JOB_ENVIRONMENT_SPLIT and,
for OpenEnv, TUNEPLANE_JOB_ENVIRONMENT_URL.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._http import IngestClient, IngestError
from ..contracts import environment as C
from ..contracts.environment_bundle import extract_archive
from .config import diag

ENVIRONMENT_SUBDIR = "environment"
HARNESS_SUBDIR = "harness"
SERVER_START_SECONDS = 60.0
SHIM_MAX_LINES = 2


class EnvironmentSetupError(Exception):
    """The environment could not be prepared; the job does not start (message -> its log)."""


@dataclass
class PreparedEnvironment:
    variables: dict[str, str]
    directory: Path
    server: subprocess.Popen[bytes] | None = None
    notes: list[str] = field(default_factory=list)

    def apply(self, child_env: dict[str, str]) -> None:
        """Add the variables to train.sh's environment; PYTHONPATH is prepended to."""
        for key, value in self.variables.items():
            if key == "PYTHONPATH" and child_env.get("PYTHONPATH"):
                value = value + os.pathsep + child_env["PYTHONPATH"]
            child_env[key] = value

    def stop(self) -> None:
        """End the environment server, if this job started one."""
        proc, self.server = self.server, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _block(environ: Mapping[str, str]) -> dict[str, Any] | None:
    raw = environ.get(C.ENV_RUNNER_ENVIRONMENT, "").strip()
    if not raw:
        return None
    try:
        block = json.loads(raw)
    except ValueError:
        raise EnvironmentSetupError(f"{C.ENV_RUNNER_ENVIRONMENT} is not valid JSON") from None
    if not isinstance(block, dict) or block.get("split") not in C.SPLITS or not block.get("ref"):
        raise EnvironmentSetupError(
            f"{C.ENV_RUNNER_ENVIRONMENT} does not describe an admitted environment"
        )
    return block


def _download(client: IngestClient, deadline: float, backoff_max: float) -> bytes:
    delay = 0.2
    while True:
        try:
            data, _headers = client.get_bytes(C.ROUTE_ENVIRONMENT, C.BUNDLE_MAX_BYTES * 2)
            return data
        except IngestError as exc:
            if not exc.transient or time.monotonic() + delay >= deadline:
                raise EnvironmentSetupError(
                    f"could not fetch the job's environment: {exc}"
                ) from None
            diag(f"environment download failed ({exc}); retrying in {delay:.1f}s")
            time.sleep(delay)
            delay = min(delay * 2, backoff_max)


def prepare_environment(
    client: IngestClient,
    environ: Mapping[str, str],
    base_dir: Path | None,
    *,
    retry_seconds: float = 600.0,
    backoff_max: float = 5.0,
) -> PreparedEnvironment | None:
    """Fetch and prepare the job's environment; None when the job references none."""
    block = _block(environ)
    if block is None:
        return None
    root = Path(
        tempfile.mkdtemp(prefix="tuneplane-env-", dir=str(base_dir) if base_dir else None)
    ).resolve()
    data = _download(client, time.monotonic() + retry_seconds, backoff_max)
    try:
        extract_archive(data, root)
    except C.ContractError as exc:
        raise EnvironmentSetupError(f"the environment archive is unsafe: {exc.message}") from None
    env_dir = root / ENVIRONMENT_SUBDIR
    manifest_path = env_dir / C.MANIFEST_FILE
    if not manifest_path.is_file():
        raise EnvironmentSetupError("the environment archive has no manifest.json")
    try:
        manifest = C.parse_manifest(manifest_path.read_bytes())
    except C.ContractError as exc:
        raise EnvironmentSetupError(exc.message) from None
    split = block["split"]
    _check_split(env_dir, split)

    prepared = PreparedEnvironment(
        variables={
            C.ENV_JOB_ENVIRONMENT: str(block["ref"]),
            C.ENV_JOB_ENVIRONMENT_DIR: str(env_dir),
            C.ENV_JOB_ENVIRONMENT_SPLIT: split,
        },
        directory=env_dir,
    )
    # Whatever path run() leaves by, the server does not outlive the runner.
    atexit.register(prepared.stop)
    if manifest.protocol == C.PROTOCOL_OPENENV and manifest.deployment == C.DEPLOYMENT_LOCAL:
        url, prepared.server = start_openenv_server(env_dir, base=root)
        prepared.variables[C.ENV_JOB_ENVIRONMENT_URL] = url
        prepared.notes.append(f"started the OpenEnv server for {block['ref']} ({split}) at {url}")
    elif manifest.protocol == C.PROTOCOL_NEMO_GYM:
        harness_dir = root / HARNESS_SUBDIR
        shim = write_nemo_gym_files(env_dir, block, manifest, split)
        prepared.variables["PYTHONPATH"] = str(harness_dir)
        prepared.notes.append(f"materialised {block['ref']} ({split}) for NeMo Gym; shim {shim}")
    else:
        address = block.get("address")
        if not address:
            raise EnvironmentSetupError(f"{block['ref']} has no resolved address")
        prepared.variables[C.ENV_JOB_ENVIRONMENT_URL] = str(address)
        prepared.notes.append(f"{block['ref']} answers at {address}")
    return prepared


def _check_split(env_dir: Path, split: str) -> None:
    """Defence in depth: the control plane cut tasks.jsonl to the split; a row of the
    other split here means something is wrong, and the job must not train on it."""
    tasks = env_dir / C.TASKS_FILE
    if not tasks.is_file():
        return
    try:
        for task in C.iter_tasks(tasks.read_bytes()):
            if task.split != split:
                raise EnvironmentSetupError(
                    f"tasks.jsonl line {task.line} belongs to the {task.split} split; this job may read only {split}"
                )
    except C.ContractError as exc:
        raise EnvironmentSetupError(exc.message) from None


# openenv + local ----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
            return answer.status == 200 and json.loads(answer.read()).get("status") == "healthy"
    except (OSError, urllib.error.URLError, ValueError):
        return False


def start_openenv_server(
    env_dir: Path, base: Path, timeout: float = SERVER_START_SECONDS
) -> tuple[str, subprocess.Popen[bytes]]:
    """Start `tuneplane.runner.environment_server` on 127.0.0.1 and wait until it is
    healthy. It stays in the runner's process group, so cancelling the job ends it."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = base / "environment-server.log"
    log = open(log_path, "ab")  # noqa: SIM115 - handed to the child, closed with it
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tuneplane.runner.environment_server",
            "--dir",
            str(env_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={k: v for k, v in os.environ.items() if not k.startswith("TUNEPLANE_")},
    )
    log.close()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-1500:].strip()
            raise EnvironmentSetupError(
                f"the OpenEnv environment server exited with code {proc.returncode}: {tail}"
            )
        if _healthy(url):
            return url, proc
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    raise EnvironmentSetupError(
        f"the OpenEnv environment server did not answer at {url} within {timeout:.0f}s"
    )


# nemo-gym + local ---------------------------------------------------------------------


def shim_source(block: Mapping[str, Any]) -> str:
    """The whole shim: a provenance comment and one import of the harness entrypoint."""
    harness = block.get("harness") or {}
    entrypoint = str(harness.get("entrypoint", ""))
    module, _, class_name = entrypoint.partition(":")
    if not C.ENTRYPOINT_RE.match(entrypoint):
        raise EnvironmentSetupError(f"harness entrypoint {entrypoint!r} is not module:ClassName")
    lines = [
        f"# TunePlane: {block['ref']} with harness {harness.get('plugin')}@{harness.get('version')} "
        f"({harness.get('digest')})",
        f"from {module} import {class_name}  # noqa: F401",
    ]
    assert len(lines) <= SHIM_MAX_LINES
    return "\n".join(lines) + "\n"


def write_nemo_gym_files(
    env_dir: Path, block: Mapping[str, Any], manifest: C.Manifest, split: str
) -> Path:
    """resources_servers/<name>/{app.py, configs/<name>.yaml, data/<split>.jsonl}: the
    layout NeMo Gym loads a resources server from. The config is written as JSON, which
    is YAML too (the SDK has no YAML library)."""
    name = str(block["ref"]).split("/", 1)[-1].split("@", 1)[0].replace("-", "_").replace(".", "_")
    server_dir = env_dir / "resources_servers" / name
    (server_dir / "configs").mkdir(parents=True, exist_ok=True)
    (server_dir / "data").mkdir(parents=True, exist_ok=True)
    shim = server_dir / "app.py"
    shim.write_text(shim_source(block))
    data_path = server_dir / "data" / f"{split}.jsonl"
    tasks = env_dir / C.TASKS_FILE
    with data_path.open("w", encoding="utf-8") as out:
        if tasks.is_file():
            for task in C.iter_tasks(tasks.read_bytes()):
                row = {k: v for k, v in task.data.items() if k not in ("prompt", "split")}
                row["responses_create_params"] = {
                    "input": [{"role": "user", "content": task.prompt}]
                }
                row["reference"] = task.reference
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
    config = {
        name: {
            "resources_servers": {
                name: {
                    "entrypoint": "app.py",
                    "domain": manifest.category,
                    "verifier": {"kind": manifest.verifier_kind, "ref": manifest.verifier_ref},
                }
            },
            "datasets": [
                {
                    "name": split,
                    "type": "train" if split == C.SPLIT_TRAIN else "validation",
                    "jsonl_fpath": str(data_path.relative_to(env_dir)),
                }
            ],
        }
    }
    (server_dir / "configs" / f"{name}.yaml").write_text(json.dumps(config, indent=2) + "\n")
    return shim
