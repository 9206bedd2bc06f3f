"""One execution attempt: unpack, start train.sh, forward its output, report its exit.

Lifecycle calls are strict (DESIGN.md: "lifecycle calls from the runner are strict and
retried"): `started` and `exited` are retried until they succeed or the retry window
(TUNEPLANE_RUNNER_RETRY_SECONDS) closes. A job that cannot tell the control plane it
started is stopped rather than left running unseen.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from .._http import IngestClient, IngestError
from ..contracts import env, ingest
from .child import Child
from .config import (
    DEFAULT_RETRY_SECONDS,
    RUNNER_ENV_PREFIX,
    ConfigError,
    RunnerConfig,
    diag,
    lenient_retry_seconds,
    load_binding,
    load_config,
)
from .environment import EnvironmentSetupError, prepare_environment
from .follower import run_follower
from .gpuwatch import start_gpu_sampler
from .launch import apply_observability, launch_argv, node_rank
from .logs import LogBuffer, LogShipper, OutputReader
from .unpack import SetupError, Workspace, prepare

EXIT_SETUP_FAILED = 2  # reported as the job's exit code; the reason is in the job's log
EXIT_CONTROL_PLANE_UNREACHABLE = 3  # `started` never got through: nobody can be told
EXIT_EXEC_FAILED = 127  # bash itself could not be started


class LifecycleError(Exception):
    pass


def post_strict(
    client: IngestClient,
    payload: Mapping[str, Any],
    deadline: float,
    backoff_max: float,
) -> Any:
    """POST `lifecycle`, retrying until it succeeds or `deadline` (monotonic) passes.

    Only a definite verdict (a 4xx other than 408/425/429) ends the retries early: the
    same request cannot succeed later. Everything else, a restarting control plane
    included, is retried with backoff.
    """
    delay = 0.2
    attempt = 0
    while True:
        attempt += 1
        remaining = deadline - time.monotonic()
        try:
            return client.post_json(
                ingest.ROUTE_LIFECYCLE, payload, timeout=max(1.0, min(client.timeout, remaining))
            )
        except IngestError as exc:
            if not exc.transient:
                raise LifecycleError(str(exc)) from None
            if time.monotonic() + delay >= deadline:
                raise LifecycleError(f"{exc} (gave up after {attempt} attempts)") from None
            if attempt == 1 or attempt % 10 == 0:
                diag(f"lifecycle {payload.get('event')} failed ({exc}); retrying")
            time.sleep(delay)
            delay = min(delay * 2, backoff_max)


def child_environment(
    base: Mapping[str, str], workspace: Workspace, out_dir: Path
) -> dict[str, str]:
    """The job contract for train.sh: what the executor set, minus the runner's own
    variables, plus the three directories only the runner knows."""
    child = {key: value for key, value in base.items() if not key.startswith(RUNNER_ENV_PREFIX)}
    child[env.WORK_DIR] = str(workspace.root)
    child[env.EXP_DIR] = str(workspace.exp_dir)
    child[env.OUT_DIR] = str(out_dir)
    # Python trainers block-buffer a piped stdout; unbuffered output reaches the job's log
    # as it happens instead of in 8 KiB lumps. A value the user set wins.
    child.setdefault("PYTHONUNBUFFERED", "1")
    return child


def report_setup_failure(
    client: IngestClient,
    config: RunnerConfig | None,
    reason: str,
    code: int,
    retry_seconds: float = DEFAULT_RETRY_SECONDS,
) -> int:
    """Put the reason in the job's log (seq 1..) and report the exit: the user reads why
    on the job page instead of finding an empty log."""
    retry_seconds = config.retry_seconds if config else retry_seconds
    backoff_max = config.backoff_max if config else 5.0
    buffer = LogBuffer()
    lines = (
        f"tuneplane runner: the job could not start: {reason}",
        f"tuneplane runner: nothing from the package was run; reporting exit code {code}",
    )
    for line in lines:
        print(line, file=sys.stderr, flush=True)  # echoed like train.sh's own output
        buffer.add("stderr", line)
    buffer.close()
    shipper = LogShipper(
        client,
        buffer,
        interval=config.log_interval if config else 0.3,
        heartbeat=config.heartbeat_seconds if config else 5.0,
        backoff_max=backoff_max,
        on_cancel=lambda: None,
    )
    shipper.start()
    deadline = time.monotonic() + retry_seconds
    if not shipper.finish(deadline):
        diag("could not deliver the failure reason to the job's log")
    try:
        post_strict(
            client,
            {"event": ingest.LIFECYCLE_EXITED, "exit_code": code},
            time.monotonic() + retry_seconds,
            backoff_max,
        )
    except LifecycleError as exc:
        diag(f"could not report the exit: {exc}")
    return code


class _Signals:
    """SIGTERM/SIGINT to the runner (pod deletion, Ctrl-C) are forwarded to train.sh's
    group; the runner itself stays up to ship the last lines and report the exit."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.child: Child | None = None
        self.received: int | None = None

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._handle)
        signal.signal(signal.SIGINT, self._handle)

    def attach(self, child: Child) -> None:
        self.child = child
        if self.received is not None:  # a signal arrived while train.sh was starting
            child.terminate(self.grace, f"the runner received {signal.Signals(self.received).name}")

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.received = signum
        if self.child is not None:
            self.child.terminate(self.grace, f"the runner received {signal.Signals(signum).name}")


def run(environ: Mapping[str, str]) -> int:
    try:
        binding = load_binding(environ)
    except ConfigError as exc:
        diag(str(exc))
        return EXIT_SETUP_FAILED
    try:
        config = load_config(environ)
    except ConfigError as exc:
        client = IngestClient(binding.endpoint, binding.run_id, binding.token, timeout=30.0)
        return report_setup_failure(
            client, None, str(exc), EXIT_SETUP_FAILED, retry_seconds=lenient_retry_seconds(environ)
        )

    client = IngestClient(
        binding.endpoint, binding.run_id, binding.token, timeout=config.request_timeout
    )
    signals = _Signals(config.kill_grace)
    signals.install()
    if node_rank(environ) > 0:
        # Nodes 1..N-1 of a multi-node job run the same launch but report nothing:
        # the attempt has one log sequence and one lifecycle, node 0's (follower.py).
        return run_follower(client, config, environ, signals)

    try:
        workspace = prepare(client, config)
        config.out_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    except SetupError as exc:
        return report_setup_failure(client, config, str(exc), EXIT_SETUP_FAILED)
    except OSError as exc:
        return report_setup_failure(
            client,
            config,
            f"could not create {env.OUT_DIR} {config.out_dir}: {exc}",
            EXIT_SETUP_FAILED,
        )

    # The referenced environment, if any: fetched (its split only) and started or
    # materialised before train.sh runs (runner/environment.py).
    try:
        prepared_env = prepare_environment(
            client, environ, config.work_root, retry_seconds=config.retry_seconds, backoff_max=config.backoff_max
        )
    except EnvironmentSetupError as exc:
        return report_setup_failure(client, config, str(exc), EXIT_SETUP_FAILED)

    if signals.received is not None:
        # Stopped while the package was being fetched: do not start what we would kill.
        name = signal.Signals(signals.received).name
        return report_setup_failure(
            client,
            config,
            f"the runner received {name} before train.sh started",
            128 + signals.received,
        )
    child_env = child_environment(environ, workspace, config.out_dir)
    try:
        apply_observability(child_env, environ)  # platform recipes: the SDK capsule on PYTHONPATH
        argv = launch_argv(environ, workspace.entrypoint)  # bash train.sh, or torchrun train.py
    except (ConfigError, OSError) as exc:
        return report_setup_failure(client, config, str(exc), EXIT_SETUP_FAILED)
    if prepared_env is not None:
        prepared_env.apply(child_env)
        for note in prepared_env.notes:
            diag(note)
    try:
        child = Child(argv, cwd=workspace.root, env=child_env)
    except OSError as exc:
        return report_setup_failure(
            client, config, f"could not start bash: {exc}", EXIT_EXEC_FAILED
        )
    diag(f"started bash {workspace.entrypoint} (pid {child.pid}) in {workspace.root}")

    buffer = LogBuffer()
    assert child.proc.stdout is not None and child.proc.stderr is not None
    reader = OutputReader(
        buffer,
        [
            ("stdout", child.proc.stdout, sys.stdout.fileno()),
            ("stderr", child.proc.stderr, sys.stderr.fileno()),
        ],
    )
    # Reading starts at once so train.sh never blocks on a full pipe while `started` is
    # being retried; its lines wait in the buffer, numbered, until they can be sent.
    reader.start()
    signals.attach(child)

    try:
        answer = post_strict(
            client,
            {"event": ingest.LIFECYCLE_STARTED, "pid": child.pid},
            time.monotonic() + config.retry_seconds,
            config.backoff_max,
        )
    except LifecycleError as exc:
        diag(f"could not report the start to the control plane: {exc}; stopping the job")
        child.terminate(config.kill_grace, "lifecycle started failed")
        child.wait()
        reader.abandon()
        return EXIT_CONTROL_PLANE_UNREACHABLE
    if isinstance(answer, dict) and answer.get("state") == "cancelled":
        child.terminate(config.kill_grace, "the job was cancelled before it started")

    shipper = LogShipper(
        client,
        buffer,
        interval=config.log_interval,
        heartbeat=config.heartbeat_seconds,
        backoff_max=config.backoff_max,
        on_cancel=lambda: child.terminate(
            config.kill_grace, "the control plane requested cancellation"
        ),
    )
    shipper.start()
    gpu_sampler = start_gpu_sampler(client, environ, 0)  # the GPU watchdog's input

    code = child.wait()
    if gpu_sampler is not None:
        gpu_sampler.stop()
    diag(f"train.sh exited with code {code}")
    if prepared_env is not None:
        prepared_env.stop()
    # Background processes train.sh left behind may hold its pipes open. Give them a
    # moment to finish writing, then end the group: the job is over.
    reader.join(config.drain_seconds)
    if child.group_alive():
        diag("processes of the job outlived train.sh; killing its process group")
        child.kill_group()
    reader.join(2.0)
    if reader.is_alive():
        reader.abandon()
        reader.join(2.0)

    window_end = time.monotonic() + config.retry_seconds
    if not shipper.finish(window_end):
        diag(f"could not deliver {len(buffer)} log lines within {config.retry_seconds:.0f}s")
    try:
        post_strict(
            client,
            {"event": ingest.LIFECYCLE_EXITED, "exit_code": code},
            # A window of its own: a control plane that was down for the whole flush
            # still gets the full retry period to learn how the job ended.
            time.monotonic() + config.retry_seconds,
            config.backoff_max,
        )
    except LifecycleError as exc:
        diag(f"could not report the exit to the control plane: {exc}")
    return code


def main() -> int:
    try:
        return run(os.environ)
    except KeyboardInterrupt:
        return 130
