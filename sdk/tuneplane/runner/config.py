"""The runner's configuration, read from the environment the executor prepared.

The ingest binding and `TUNEPLANE_OUT_DIR` are the job contract's own variables; the
`TUNEPLANE_RUNNER_*` ones (contracts/env.py) are for the runner only and never reach the
child. The tuning knobs below share that prefix so they are stripped the same way; the
defaults are the production values and the tests shrink them.
"""

from __future__ import annotations

import math
import os
import posixpath
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..contracts import env, errors, package

RUNNER_ENV_PREFIX = "TUNEPLANE_RUNNER_"

# Tuning knobs (seconds). Not part of the contract; executors normally leave them unset.
LOG_INTERVAL = "TUNEPLANE_RUNNER_LOG_INTERVAL"  # pause between log batches
HEARTBEAT_SECONDS = "TUNEPLANE_RUNNER_HEARTBEAT_SECONDS"  # empty batch when idle this long
BACKOFF_MAX_SECONDS = "TUNEPLANE_RUNNER_BACKOFF_MAX_SECONDS"  # cap of the retry backoff
KILL_GRACE_SECONDS = "TUNEPLANE_RUNNER_KILL_GRACE_SECONDS"  # SIGTERM -> SIGKILL
DRAIN_SECONDS = "TUNEPLANE_RUNNER_DRAIN_SECONDS"  # after train.sh exits, wait for its pipes
REQUEST_TIMEOUT_SECONDS = "TUNEPLANE_RUNNER_REQUEST_TIMEOUT_SECONDS"

DEFAULT_RETRY_SECONDS = 600.0

_DEFAULTS = {
    env.RUNNER_RETRY_SECONDS: DEFAULT_RETRY_SECONDS,
    LOG_INTERVAL: 0.3,
    HEARTBEAT_SECONDS: 5.0,
    BACKOFF_MAX_SECONDS: 5.0,
    KILL_GRACE_SECONDS: 10.0,
    DRAIN_SECONDS: 5.0,
    REQUEST_TIMEOUT_SECONDS: 30.0,
}


def diag(message: str) -> None:
    """A runner diagnostic on the runner's stderr (kubectl logs), not in the job's log."""
    try:
        print(f"[tuneplane-runner] {message}", file=sys.stderr, flush=True)
    except Exception:
        pass  # a closed stderr must not take the runner down


class ConfigError(ValueError):
    """A missing or malformed variable; the message names it."""


@dataclass(frozen=True)
class IngestBinding:
    endpoint: str
    run_id: str
    token: str


@dataclass(frozen=True)
class RunnerConfig:
    binding: IngestBinding
    out_dir: Path
    work_root: Path | None
    experiment: str
    entrypoint: str  # as the executor gave it, package-relative (experiments/NAME/train.sh)
    package_sha256: str
    retry_seconds: float
    log_interval: float
    heartbeat_seconds: float
    backoff_max: float
    kill_grace: float
    drain_seconds: float
    request_timeout: float


def load_binding(environ: Mapping[str, str]) -> IngestBinding:
    values = {
        name: environ.get(name, "").strip()
        for name in (env.JOB_ENDPOINT, env.JOB_RUN_ID, env.JOB_TOKEN)
    }
    missing = [name for name, value in values.items() if not value]
    if missing:
        raise ConfigError(
            f"missing {', '.join(missing)}: the runner cannot reach the control plane"
        )
    return IngestBinding(values[env.JOB_ENDPOINT], values[env.JOB_RUN_ID], values[env.JOB_TOKEN])


def _seconds(environ: Mapping[str, str], name: str) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return _DEFAULTS[name]
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number of seconds, not {raw!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{name} must be a non-negative number of seconds, not {raw!r}")
    return value


def lenient_retry_seconds(environ: Mapping[str, str]) -> float:
    """The retry window even when other variables are broken: reporting why still needs it."""
    try:
        return _seconds(environ, env.RUNNER_RETRY_SECONDS)
    except ConfigError:
        return DEFAULT_RETRY_SECONDS


def load_config(environ: Mapping[str, str]) -> RunnerConfig:
    binding = load_binding(environ)
    required = (
        env.OUT_DIR,
        env.RUNNER_ENTRYPOINT,
        env.RUNNER_EXPERIMENT,
        env.RUNNER_PACKAGE_SHA256,
    )
    missing = [name for name in required if not environ.get(name, "").strip()]
    if missing:
        raise ConfigError(f"the executor did not set {', '.join(missing)}")
    work_root = environ.get(env.RUNNER_WORK_ROOT, "").strip()
    return RunnerConfig(
        binding=binding,
        # Absolute, because train.sh runs from the package root, not from our cwd.
        out_dir=Path(os.path.abspath(environ[env.OUT_DIR].strip())),
        work_root=Path(os.path.abspath(work_root)) if work_root else None,
        experiment=environ[env.RUNNER_EXPERIMENT].strip(),
        entrypoint=environ[env.RUNNER_ENTRYPOINT].strip(),
        package_sha256=environ[env.RUNNER_PACKAGE_SHA256].strip().lower().removeprefix("sha256:"),
        retry_seconds=_seconds(environ, env.RUNNER_RETRY_SECONDS),
        log_interval=_seconds(environ, LOG_INTERVAL),
        heartbeat_seconds=_seconds(environ, HEARTBEAT_SECONDS),
        backoff_max=max(0.05, _seconds(environ, BACKOFF_MAX_SECONDS)),
        kill_grace=_seconds(environ, KILL_GRACE_SECONDS),
        drain_seconds=_seconds(environ, DRAIN_SECONDS),
        request_timeout=max(0.5, _seconds(environ, REQUEST_TIMEOUT_SECONDS)),
    )


def entrypoint_in_experiment(entrypoint: str, experiment: str) -> str:
    """The entrypoint relative to experiments/<experiment>/; raises ConfigError otherwise.

    The executor passes the package-relative path (experiments/NAME/train.sh). A path
    that names another experiment, or climbs out of this one, is refused with the spec's
    text rather than quietly mapped onto train.sh.
    """
    if not experiment or "/" in experiment or "\\" in experiment or experiment in (".", ".."):
        raise ConfigError(f"invalid experiment name {experiment!r}")
    if entrypoint.startswith("/") or "\\" in entrypoint:
        raise ConfigError(errors.CUSTOM_ENTRYPOINT_INVALID)
    normalised = posixpath.normpath(entrypoint)
    if "/" not in normalised:
        relative = normalised  # a bare file name: already relative to the experiment
    else:
        root = package.experiment_dir(experiment) + "/"
        if not normalised.startswith(root):
            raise ConfigError(errors.CUSTOM_ENTRYPOINT_INVALID)
        relative = normalised[len(root) :]
    if not relative or relative in (".", "..") or relative.startswith("../"):
        raise ConfigError(errors.CUSTOM_ENTRYPOINT_INVALID)
    return relative
