"""The runner's pure parts: line splitting, batching, entrypoint paths, the child env."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuneplane.contracts import env, errors, limits
from tuneplane.runner.config import ConfigError, entrypoint_in_experiment
from tuneplane.runner.job import child_environment
from tuneplane.runner.logs import LogBuffer, _StreamSplitter, split_text
from tuneplane.runner.unpack import Workspace


@pytest.mark.parametrize("char", ["x", "é", "中", "🙂"])
def test_long_lines_are_split_within_the_limit_and_never_lose_a_character(char: str) -> None:
    line = char * 20_000

    pieces = split_text(line)

    assert "".join(pieces) == line
    assert len(pieces) > 1
    assert all(len(p.encode()) <= limits.LOG_LINE_MAX_CHARS for p in pieces)


def test_a_short_line_is_one_piece() -> None:
    assert split_text("hello") == ["hello"]
    assert split_text("") == [""]


def test_a_character_split_across_reads_is_decoded_whole() -> None:
    buffer = LogBuffer()
    splitter = _StreamSplitter("stdout", buffer)
    encoded = "naïve café\n".encode()

    for byte in encoded:  # the worst case: one byte per read
        splitter.feed(bytes([byte]))
    splitter.feed(b"tail", final=False)
    splitter.feed(b"", final=True)

    assert [line.text for line in buffer.peek(10, limits.LOG_BATCH_MAX_BYTES)[0]] == [
        "naïve café",
        "tail",
    ]


def test_batches_respect_the_line_and_byte_limits() -> None:
    buffer = LogBuffer()
    for _ in range(300):
        buffer.add("stdout", "y" * 16_000)

    batch, more = buffer.peek(limits.LOG_BATCH_MAX_LINES, limits.LOG_BATCH_MAX_BYTES)

    assert more is True
    assert sum(line.size for line in batch) <= limits.LOG_BATCH_MAX_BYTES
    assert [line.seq for line in batch] == list(range(1, len(batch) + 1))
    buffer.ack(batch[-1].seq)
    rest, more = buffer.peek(limits.LOG_BATCH_MAX_LINES, limits.LOG_BATCH_MAX_BYTES)
    assert rest[0].seq == batch[-1].seq + 1


@pytest.mark.parametrize(
    ("entrypoint", "relative"),
    [("experiments/demo/train.sh", "train.sh"), ("train.sh", "train.sh")],
)
def test_the_entrypoint_is_taken_relative_to_its_experiment(entrypoint: str, relative: str) -> None:
    assert entrypoint_in_experiment(entrypoint, "demo") == relative


@pytest.mark.parametrize(
    "entrypoint",
    ["experiments/other/train.sh", "experiments/demo/../other/train.sh", "/etc/passwd", "../x"],
)
def test_an_entrypoint_outside_its_experiment_is_refused(entrypoint: str) -> None:
    with pytest.raises(ConfigError, match=errors.CUSTOM_ENTRYPOINT_INVALID):
        entrypoint_in_experiment(entrypoint, "demo")


def test_the_child_gets_the_contract_without_the_runner_variables(tmp_path: Path) -> None:
    workspace = Workspace(
        root=tmp_path, exp_dir=tmp_path / "experiments/demo", entrypoint=tmp_path / "x"
    )
    base = {
        env.FRAMEWORK: "custom",
        env.JOB_TOKEN: "tpi_x",
        env.RUNNER_PACKAGE_SHA256: "abc",
        "TUNEPLANE_RUNNER_LOG_INTERVAL": "0.1",
        "PYTHONUNBUFFERED": "0",
    }

    child = child_environment(base, workspace, tmp_path / "out")

    assert not [name for name in child if name.startswith("TUNEPLANE_RUNNER_")]
    assert child[env.FRAMEWORK] == "custom" and child[env.JOB_TOKEN] == "tpi_x"
    assert child[env.WORK_DIR] == str(tmp_path)
    assert child[env.EXP_DIR] == str(tmp_path / "experiments/demo")
    assert child[env.OUT_DIR] == str(tmp_path / "out")
    assert child["PYTHONUNBUFFERED"] == "0"  # the user's choice wins
