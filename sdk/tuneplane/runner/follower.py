"""Nodes 1..N-1 of a multi-node job.

Every pod of an Indexed Job runs the runner, but the attempt has one log sequence and
one lifecycle: if every node reported, their seq numbers would collide and the first
node to finish would end the job while the others still train. So only node 0 reports;
the others fetch and check the same package, run the same launch, echo its output to
their own stdout (kubectl logs) and exit with its code, which the executor's state sync
reads from the pod.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from .._http import IngestClient
from .child import Child
from .config import RunnerConfig, diag
from .gpuwatch import start_gpu_sampler
from .unpack import SetupError, prepare

EXIT_SETUP_FAILED = 2


def _copy(pipe: IO[bytes], out: IO[bytes]) -> None:
    for chunk in iter(lambda: pipe.read1(65536), b""):
        try:
            out.write(chunk)
            out.flush()
        except OSError:
            pass


def run_follower(client: IngestClient, config: RunnerConfig, environ: Mapping[str, str], signals) -> int:
    from .job import child_environment
    from .launch import apply_observability, launch_argv, node_rank

    rank = node_rank(environ)
    try:
        workspace = prepare(client, config)
        config.out_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        child_env = child_environment(environ, workspace, config.out_dir)
        apply_observability(child_env, environ)
        argv = launch_argv(environ, Path(workspace.entrypoint))
    except (SetupError, OSError, ValueError) as exc:
        diag(f"node {rank}: the job could not start: {exc}")
        return EXIT_SETUP_FAILED
    child = Child(argv, cwd=workspace.root, env=child_env)
    signals.attach(child)
    diag(f"node {rank}: started {' '.join(argv[:3])} (pid {child.pid}); node 0 reports to the control plane")
    assert child.proc.stdout is not None and child.proc.stderr is not None
    copiers = [
        threading.Thread(target=_copy, args=(child.proc.stdout, sys.stdout.buffer), daemon=True),
        threading.Thread(target=_copy, args=(child.proc.stderr, sys.stderr.buffer), daemon=True),
    ]
    for thread in copiers:
        thread.start()
    sampler = start_gpu_sampler(client, environ, rank)  # every node is watched, not only node 0
    code = child.wait()
    if sampler is not None:
        sampler.stop()
    for thread in copiers:
        thread.join(config.drain_seconds)
    if child.group_alive():
        child.kill_group()
    diag(f"node {rank}: exited with code {code}")
    return code
