"""`python -m tuneplane.runner` end to end against the ingest stub.

Each test builds a job package with tarfile, starts the runner as a subprocess with the
environment an executor gives it (short intervals), and checks what reached the stub.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from ingest_stub import IngestStub
from tuneplane.contracts import env, errors, limits

EXPERIMENT = "demo"
ENTRYPOINT = f"experiments/{EXPERIMENT}/train.sh"


def build_package(files: dict[str, str], symlinks: dict[str, str] | None = None) -> bytes:
    """A gzip'd tar rooted at the repository, like `git archive` of the experiment."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
        for name, target in (symlinks or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    return buffer.getvalue()


@dataclass
class RunnerProcess:
    proc: subprocess.Popen[bytes]
    out_dir: Path
    work_root: Path
    stdout: Path
    stderr: Path

    def wait(self, timeout: float = 30.0) -> int:
        return self.proc.wait(timeout)

    def diagnostics(self) -> str:
        return self.stderr.read_text(errors="replace")


@pytest.fixture
def launched() -> Iterator[list[RunnerProcess]]:
    runners: list[RunnerProcess] = []
    yield runners
    for runner in runners:  # a failed assertion must not leave a runner behind
        if runner.proc.poll() is None:
            runner.proc.kill()
            runner.proc.wait()


@pytest.fixture
def start_runner(stub: IngestStub, tmp_path: Path, launched: list[RunnerProcess]):
    def start(sha256: str | None = None, **overrides: str) -> RunnerProcess:
        out_dir = tmp_path / "out" / "run-1"
        work_root = tmp_path / "work"
        environ = {k: v for k, v in os.environ.items() if not k.startswith("TUNEPLANE_")}
        environ.update(
            {
                env.JOB_ENDPOINT: stub.endpoint,
                env.JOB_RUN_ID: stub.run_id,
                env.JOB_TOKEN: stub.token,
                env.JOB_ENABLED: "1",
                env.OUT_DIR: str(out_dir),
                env.FRAMEWORK: "custom",
                env.RECIPE: "custom",
                env.CLUSTER_NUM_NODES: "1",
                env.CLUSTER_GPUS_PER_NODE: "0",
                env.EXTERNAL_OBSERVABILITY_URL: "https://wandb.example/proj",
                env.RUNNER_WORK_ROOT: str(work_root),
                env.RUNNER_ENTRYPOINT: ENTRYPOINT,
                env.RUNNER_EXPERIMENT: EXPERIMENT,
                env.RUNNER_PACKAGE_SHA256: sha256 or stub.package_sha256,
                env.RUNNER_RETRY_SECONDS: "20",
                "TUNEPLANE_RUNNER_LOG_INTERVAL": "0.05",
                "TUNEPLANE_RUNNER_HEARTBEAT_SECONDS": "0.2",
                "TUNEPLANE_RUNNER_BACKOFF_MAX_SECONDS": "0.3",
                "TUNEPLANE_RUNNER_KILL_GRACE_SECONDS": "1",
                "TUNEPLANE_RUNNER_DRAIN_SECONDS": "1",
                "TUNEPLANE_RUNNER_REQUEST_TIMEOUT_SECONDS": "2",
            }
        )
        environ.update(overrides)
        stdout, stderr = tmp_path / "runner.stdout", tmp_path / "runner.stderr"
        with open(stdout, "wb") as out, open(stderr, "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tuneplane.runner"],
                env=environ,
                stdout=out,
                stderr=err,
                cwd=tmp_path,
            )
        runner = RunnerProcess(proc, out_dir, work_root, stdout, stderr)
        launched.append(runner)
        return runner

    return start


def assert_exactly_once_in_order(stub: IngestStub) -> None:
    seqs = sorted(stub.lines)
    assert seqs == list(range(1, len(seqs) + 1))  # no gap
    assert stub.line_conflicts == []  # a re-sent seq always carried the same line


def process_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie is dead
    except FileNotFoundError:
        return True


CONTRACT_SCRIPT = r"""#!/usr/bin/env bash
set -euo pipefail
echo "work=${TUNEPLANE_WORK_DIR}"
echo "exp=${TUNEPLANE_EXP_DIR}"
echo "out=${TUNEPLANE_OUT_DIR}"
echo "cwd=$(pwd)"
echo "framework=${TUNEPLANE_FRAMEWORK} recipe=${TUNEPLANE_RECIPE}"
echo "nodes=${TUNEPLANE_CLUSTER_NUM_NODES} gpus=${TUNEPLANE_CLUSTER_GPUS_PER_NODE}"
echo "observability=${TUNEPLANE_EXTERNAL_OBSERVABILITY_URL} enabled=${TUNEPLANE_JOB_ENABLED}"
echo "runner_vars=$(env | grep -c '^TUNEPLANE_RUNNER_' || true)"
test -d "${TUNEPLANE_OUT_DIR}" && echo "out_exists=yes"
cat "${TUNEPLANE_EXP_DIR}/data.txt"
for i in $(seq 1 50); do echo "out $i"; echo "err $i" >&2; done
head -c 40000 /dev/zero | tr '\0' 'x'; echo
printf 'bad \xff byte\r\n'
printf 'no newline at the end'
exit 3
"""


def test_it_runs_train_sh_with_the_contract_and_forwards_every_line_once(
    stub: IngestStub, start_runner
) -> None:
    stub.package = build_package(
        {ENTRYPOINT: CONTRACT_SCRIPT, f"experiments/{EXPERIMENT}/data.txt": "data line\n"}
    )
    runner = start_runner()

    assert runner.wait() == 3

    work = runner.work_root.resolve()
    long_line = "x" * 40000
    assert stub.texts("stdout") == [
        f"work={work}",
        f"exp={work}/experiments/{EXPERIMENT}",
        f"out={runner.out_dir}",
        f"cwd={work}",
        "framework=custom recipe=custom",
        "nodes=1 gpus=0",
        "observability=https://wandb.example/proj enabled=1",
        "runner_vars=0",
        "out_exists=yes",
        "data line",
        *[f"out {i}" for i in range(1, 51)],
        long_line[:16384],
        long_line[16384:32768],
        long_line[32768:],
        "bad \ufffd byte",
        "no newline at the end",
    ]
    assert stub.texts("stderr") == [f"err {i}" for i in range(1, 51)]
    assert all(len(text) <= limits.LOG_LINE_MAX_CHARS for text in stub.texts())
    assert_exactly_once_in_order(stub)
    assert [event["event"] for event in stub.lifecycle] == ["started", "exited"]
    assert isinstance(stub.lifecycle[0]["pid"], int) and stub.lifecycle[0]["pid"] > 0
    assert stub.lifecycle[1]["exit_code"] == 3
    # The started event precedes every log request.
    order = [r.route for r in stub.requests if r.status == 200 and r.route in ("lifecycle", "logs")]
    assert order[0] == "lifecycle" and order[-1] == "lifecycle"
    # Output is echoed verbatim for kubectl logs, without a prefix.
    assert b"out 50\n" in runner.stdout.read_bytes()
    assert b"err 50\n" in runner.stderr.read_bytes()


def test_no_line_is_lost_or_duplicated_while_the_control_plane_fails_and_restarts(
    stub: IngestStub, start_runner
) -> None:
    script = (
        'for i in $(seq 1 400); do echo "line $i"; if (( i % 20 == 0 )); then sleep 0.1; fi; done\n'
    )
    stub.package = build_package({ENTRYPOINT: script})
    runner = start_runner()

    assert stub.wait_for(lambda: len(stub.lines) >= 20)
    stub.hang_up_after_store(2)  # stored, but the runner never hears: it must re-send
    assert stub.wait_for(lambda: stub._hang_up_after_store == 0)
    stub.fail_next(5, 503)
    assert stub.wait_for(lambda: stub.pending_failures() == 0)
    stored_before_outage = len(stub.lines)
    stub.stop()
    time.sleep(0.8)
    stub.restart()

    assert runner.wait() == 0
    assert stored_before_outage < 400  # the outage happened while train.sh was writing
    assert stub.texts() == [f"line {i}" for i in range(1, 401)]
    assert_exactly_once_in_order(stub)
    assert stub.resent_seqs, "the runner should have re-sent the unacknowledged batches"
    assert any(r.status == 503 for r in stub.calls("logs"))
    assert [event["event"] for event in stub.lifecycle] == ["started", "exited"]


def test_cancellation_stops_the_whole_process_tree(stub: IngestStub, start_runner) -> None:
    script = 'sleep 300 & echo "child $!"\nsleep 300 & echo "child $!"\necho ready\nwait\n'
    stub.package = build_package({ENTRYPOINT: script})
    runner = start_runner()
    assert stub.wait_for(lambda: "ready" in [line["text"] for line in stub.lines.values()])

    stub.cancel_requested = True  # answered on the next log request or heartbeat
    started = time.monotonic()

    assert runner.wait(timeout=15) == 128 + signal.SIGTERM
    assert time.monotonic() - started < 5
    assert stub.lifecycle[-1] == {"event": "exited", "exit_code": 128 + signal.SIGTERM}
    children = [int(text.split()[1]) for text in stub.texts() if text.startswith("child ")]
    assert len(children) == 2
    assert any(r.body == {"lines": []} for r in stub.calls("logs"))  # idle heartbeats carried it
    assert stub.wait_for(lambda: all(process_gone(pid) for pid in children), timeout=5)


def test_a_job_that_ignores_sigterm_is_killed_after_the_grace_period(
    stub: IngestStub, start_runner
) -> None:
    script = "trap '' TERM\nsleep 300 & echo \"child $!\"\necho ready\nwait\n"
    stub.package = build_package({ENTRYPOINT: script})
    runner = start_runner()
    assert stub.wait_for(lambda: "ready" in [line["text"] for line in stub.lines.values()])

    stub.cancel_requested = True

    assert runner.wait(timeout=15) == 128 + signal.SIGKILL
    assert stub.lifecycle[-1] == {"event": "exited", "exit_code": 128 + signal.SIGKILL}
    child = int(stub.texts()[0].split()[1])
    assert stub.wait_for(lambda: process_gone(child), timeout=5)
    assert "SIGKILL" in runner.diagnostics()


def test_sigterm_to_the_runner_is_forwarded_and_the_exit_reported(
    stub: IngestStub, start_runner
) -> None:
    script = 'sleep 300 & echo "child $!"\necho ready\nwait\n'
    stub.package = build_package({ENTRYPOINT: script})
    runner = start_runner()
    assert stub.wait_for(lambda: "ready" in [line["text"] for line in stub.lines.values()])

    runner.proc.send_signal(signal.SIGTERM)

    assert runner.wait(timeout=15) == 128 + signal.SIGTERM
    assert stub.lifecycle[-1] == {"event": "exited", "exit_code": 128 + signal.SIGTERM}
    assert process_gone(int(stub.texts()[0].split()[1]))


def test_lifecycle_started_is_retried_until_it_gets_through(stub: IngestStub, start_runner) -> None:
    stub.package = build_package({ENTRYPOINT: "echo hello\n"})
    stub.fail_next(3, 503, route="lifecycle")

    runner = start_runner()

    assert runner.wait() == 0
    assert [r.status for r in stub.calls("lifecycle")] == [503, 503, 503, 200, 200]
    assert [event["event"] for event in stub.lifecycle] == ["started", "exited"]
    assert stub.texts() == ["hello"]


def test_a_job_whose_start_cannot_be_reported_is_stopped(stub: IngestStub, start_runner) -> None:
    stub.package = build_package({ENTRYPOINT: 'echo $$ > "${TUNEPLANE_OUT_DIR}/pid"\nsleep 300\n'})
    stub.route_status["lifecycle"] = 503

    runner = start_runner(**{env.RUNNER_RETRY_SECONDS: "1.5"})

    assert runner.wait(timeout=20) != 0
    pid = int((runner.out_dir / "pid").read_text())
    assert stub.wait_for(lambda: process_gone(pid), timeout=5)
    assert stub.lifecycle == []
    assert "could not report the start" in runner.diagnostics()


def test_a_package_with_the_wrong_sha256_is_refused_and_explained(
    stub: IngestStub, start_runner
) -> None:
    stub.package = build_package({ENTRYPOINT: "echo should never run\n"})

    runner = start_runner(sha256="0" * 64)

    assert runner.wait() == 2
    assert stub.lifecycle == [{"event": "exited", "exit_code": 2}]
    texts = stub.texts("stderr")
    assert any("sha256 mismatch" in text and "0" * 64 in text for text in texts)
    assert "should never run" not in stub.texts()
    assert_exactly_once_in_order(stub)
    assert not (runner.work_root / ENTRYPOINT).exists()


def test_an_entrypoint_symlinked_out_of_the_experiment_is_refused(
    stub: IngestStub, start_runner
) -> None:
    stub.package = build_package(
        {f"experiments/{EXPERIMENT}/config.yaml": "a: 1\n"}, symlinks={ENTRYPOINT: "../../etc"}
    )

    runner = start_runner()

    assert runner.wait() == 2
    assert stub.lifecycle == [{"event": "exited", "exit_code": 2}]
    assert any(errors.CUSTOM_ENTRYPOINT_INVALID in text for text in stub.texts("stderr"))
    assert stub.lines[1]["seq"] == 1


def test_an_entrypoint_outside_the_experiment_is_refused(stub: IngestStub, start_runner) -> None:
    stub.package = build_package(
        {ENTRYPOINT: "echo hi\n", "experiments/other/train.sh": "echo other\n"}
    )

    runner = start_runner(**{env.RUNNER_ENTRYPOINT: "experiments/other/train.sh"})

    assert runner.wait() == 2
    assert any(errors.CUSTOM_ENTRYPOINT_INVALID in text for text in stub.texts("stderr"))
    assert stub.lifecycle == [{"event": "exited", "exit_code": 2}]
