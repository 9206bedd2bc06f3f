"""Download, verify and unpack the job package before anything of the user's runs."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .._http import IngestClient, IngestError
from ..contracts import ingest, limits, package
from .config import ConfigError, RunnerConfig, diag, entrypoint_in_experiment


class SetupError(Exception):
    """The job cannot start; the message is posted to the job's log for the user."""


@dataclass(frozen=True)
class Workspace:
    root: Path  # TUNEPLANE_WORK_DIR: the unpacked package root, train.sh's cwd
    exp_dir: Path  # TUNEPLANE_EXP_DIR
    entrypoint: Path  # absolute path of train.sh


def download(client: IngestClient, deadline: float, backoff_max: float) -> bytes:
    """GET the package, retrying transient failures until `deadline` (monotonic)."""
    delay = 0.2
    while True:
        remaining = deadline - time.monotonic()
        try:
            data, _headers = client.get_bytes(
                ingest.ROUTE_PACKAGE,
                limits.PACKAGE_MAX_BYTES,
                timeout=max(1.0, min(client.timeout, remaining)),
            )
            return data
        except IngestError as exc:
            if not exc.transient or time.monotonic() + delay >= deadline:
                raise SetupError(f"could not download the job package: {exc}") from None
            diag(f"package download failed ({exc}); retrying in {delay:.1f}s")
            time.sleep(delay)
            delay = min(delay * 2, backoff_max)


def verify(data: bytes, expected_sha256: str) -> None:
    actual = package.sha256_bytes(data)
    if actual != expected_sha256:
        raise SetupError(
            f"job package sha256 mismatch: expected {expected_sha256}, downloaded {actual}; "
            "refusing to run a package that is not the one submitted"
        )


def _unpack_dir(work_root: Path | None) -> Path:
    """An empty directory to unpack into.

    A non-empty work root (an earlier attempt on the same host) is not reused: a link the
    previous train.sh left there could redirect this extraction out of the tree.
    """
    if work_root is None:
        return Path(tempfile.mkdtemp(prefix="tuneplane-work-"))
    work_root.mkdir(parents=True, exist_ok=True, mode=0o700)
    if any(os.scandir(work_root)):
        fresh = Path(tempfile.mkdtemp(prefix="attempt-", dir=work_root))
        diag(f"{work_root} is not empty; unpacking into {fresh}")
        return fresh
    return work_root


def prepare(client: IngestClient, config: RunnerConfig) -> Workspace:
    """Fetch, check and unpack; raises SetupError with a message for the job's log."""
    try:
        relative = entrypoint_in_experiment(config.entrypoint, config.experiment)
    except ConfigError as exc:
        raise SetupError(str(exc)) from None
    data = download(client, time.monotonic() + config.retry_seconds, config.backoff_max)
    verify(data, config.package_sha256)
    try:
        root = _unpack_dir(config.work_root).resolve()
        entry = package.safe_extract(data, root, config.experiment, relative)
    except package.PackageError as exc:
        raise SetupError(str(exc)) from None
    except OSError as exc:
        raise SetupError(f"could not unpack the job package: {exc}") from None
    return Workspace(
        root=root, exp_dir=root / package.experiment_dir(config.experiment), entrypoint=entry
    )
