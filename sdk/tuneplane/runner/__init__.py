"""`python -m tuneplane.runner`: the wrapper that runs train.sh inside a job.

It downloads and checks the job package, sets the environment contract
(TUNEPLANE_WORK_DIR, TUNEPLANE_EXP_DIR, TUNEPLANE_OUT_DIR), runs `bash train.sh` in its
own process group, forwards every line of its output to the control plane exactly once,
stops it when the control plane asks, and reports `started` and `exited`. Its exit code
is train.sh's (128 + N for a death by signal N).
"""

from __future__ import annotations

from .job import main, run

__all__ = ["main", "run"]
