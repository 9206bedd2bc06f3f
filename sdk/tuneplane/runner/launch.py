"""What the runner starts, and what the recipe's observability adds to the child.

- custom/custom: `bash <absolute path of train.sh>`, nothing else (spec: "custom/custom
  runs exactly one file"); `--set` values never reach argv.
- catalogue frameworks (launcher `torchrun`): `torchrun --nnodes N --nproc-per-node G
  <train.py> <checked flags>`; across nodes the rendezvous comes from the PET_RDZV_*
  variables the executor sets (torchrun reads PET_<FLAG> as the flag's default).

Observability (spec, "Why --observability-url is required"): for a `platform` recipe the
runner prepends the SDK capsule, a directory that holds only the `tuneplane` package, to
PYTHONPATH, so `from tuneplane.report import log` works with no wheel in the image; for
an `external` recipe PYTHONPATH is left exactly as the image set it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from ..contracts import env
from .config import ConfigError

LAUNCHER_BASH = "bash"
LAUNCHER_TORCHRUN = "torchrun"
PLATFORM = "platform"
_SITE_DIRS = {"site-packages", "dist-packages"}


def _int(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(name, "").strip()
    try:
        return int(raw) if raw else default
    except ValueError:
        raise ConfigError(f"{name} must be an integer, not {raw!r}") from None


def node_rank(environ: Mapping[str, str]) -> int:
    """This node's index in a multi-node job (0 on a single node)."""
    return _int(environ, env.CLUSTER_NODE_RANK, _int(environ, "JOB_COMPLETION_INDEX", 0))


def launch_argv(environ: Mapping[str, str], entrypoint: Path) -> list[str]:
    launcher = environ.get(env.RUNNER_LAUNCHER, "").strip() or LAUNCHER_BASH
    raw_args = environ.get(env.RUNNER_ARGS, "").strip() or "[]"
    try:
        args = json.loads(raw_args)
    except ValueError:
        raise ConfigError(f"{env.RUNNER_ARGS} is not a JSON list") from None
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError(f"{env.RUNNER_ARGS} must be a JSON list of strings")
    if launcher == LAUNCHER_BASH:
        return ["bash", str(entrypoint), *args]
    if launcher != LAUNCHER_TORCHRUN:
        raise ConfigError(f"{env.RUNNER_LAUNCHER} must be bash or torchrun, not {launcher!r}")
    nodes = _int(environ, env.CLUSTER_NUM_NODES, 1)
    # A CPU profile still runs one worker process.
    per_node = max(1, _int(environ, env.CLUSTER_GPUS_PER_NODE, 1))
    torchrun = [shutil.which("torchrun", path=environ.get("PATH")) or ""]
    if not torchrun[0]:
        torchrun = [sys.executable, "-m", "torch.distributed.run"]
    argv = [*torchrun, f"--nnodes={nodes}", f"--nproc-per-node={per_node}"]
    if nodes == 1 and not environ.get("PET_RDZV_ENDPOINT"):
        argv.append("--standalone")
    return [*argv, str(entrypoint), *args]


def capsule_root() -> Path:
    """A directory whose only importable package is this `tuneplane`.

    The kubernetes executor copies the SDK into /opt/tuneplane/capsule and names it in
    TUNEPLANE_RUNNER_CAPSULE. Elsewhere the runner's own package is used, but never a
    whole site-packages: prepending that would shadow the image's own libraries, so the
    package is copied into a private directory instead.
    """
    import tuneplane

    root = Path(tuneplane.__file__).resolve().parent.parent
    if root.name not in _SITE_DIRS:
        return root
    private = Path(tempfile.mkdtemp(prefix="tuneplane-capsule-"))
    shutil.copytree(root / "tuneplane", private / "tuneplane", ignore=shutil.ignore_patterns("__pycache__"))
    return private


def apply_observability(child: MutableMapping[str, str], environ: Mapping[str, str]) -> None:
    if environ.get(env.RUNNER_OBSERVABILITY, "").strip() != PLATFORM:
        return  # external: PYTHONPATH is the image's business
    capsule = environ.get(env.RUNNER_CAPSULE, "").strip() or str(capsule_root())
    current = child.get("PYTHONPATH", "")
    child["PYTHONPATH"] = capsule + (os.pathsep + current if current else "")
