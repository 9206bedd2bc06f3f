"""tuneplane.report: flattening, the no-op outside a job, bounded delivery, never raising."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from ingest_stub import IngestStub
from tuneplane import report
from tuneplane.contracts import env, limits


class FakeScalar:
    """What numpy/torch reductions return: something with .item()."""

    def __init__(self, value: float) -> None:
        self.value = value

    def item(self) -> float:
        return self.value


class FakeArray:
    def __init__(self, values: list[float], dtype: str = "float32") -> None:
        self.values = values
        self.dtype = dtype
        self.size = len(values)

    def mean(self) -> FakeScalar:
        return FakeScalar(sum(self.values) / len(self.values))


class FakeIntTensor:
    """torch refuses mean() on integer tensors; a one-element tensor still has .item()."""

    dtype = "torch.int64"

    def numel(self) -> int:
        return 1

    def mean(self) -> float:
        raise RuntimeError("mean(): could not infer output dtype")

    def item(self) -> int:
        return 7


class Unreducible:
    def mean(self) -> float:
        raise RuntimeError("no")


class EvilKey:
    def __str__(self) -> str:
        raise RuntimeError("no string for you")


class EvilMapping(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("boom")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("boom")

    def __len__(self) -> int:
        return 1


def points_by_key(stub: IngestStub) -> dict[str, dict[str, Any]]:
    with stub.lock:
        return {point["key"]: point for point in stub.points}


# -- flattening ------------------------------------------------------------------------


def test_it_flattens_nested_dicts_with_slashes() -> None:
    pairs, dropped = report._flatten({"a": {"b": 1, "c": {"d": 2.5}}, "loss": 0.5})
    assert pairs == [("a/b", 1.0), ("a/c/d", 2.5), ("loss", 0.5)]
    assert dropped == 0


def test_it_reduces_sequences_and_arrays_to_their_mean() -> None:
    pairs, dropped = report._flatten(
        {
            "list": [1, 2, 3],
            "tuple": (2.0, 4.0),
            "array": FakeArray([1.0, 2.0, 6.0]),
            "int_tensor": FakeIntTensor(),
            "scalar": FakeScalar(0.25),
        }
    )
    assert dict(pairs) == {
        "list": 2.0,
        "tuple": 3.0,
        "array": 3.0,
        "int_tensor": 7.0,
        "scalar": 0.25,
    }
    assert dropped == 0


def test_it_drops_what_is_not_a_number() -> None:
    pairs, dropped = report._flatten(
        {
            "flag": True,
            "name": "0.5",
            "none": None,
            "empty": [],
            "mixed": [1, "a"],
            "nested_list": [[1, 2]],
            "bool_array": FakeArray([1.0], dtype="bool"),
            "empty_array": FakeArray([]),
            "unreducible": Unreducible(),
            "complex": 1j,
            "": 1.0,
            "k" * (limits.SCALAR_KEY_MAX_CHARS + 1): 1.0,
            "kept": 1,
        }
    )
    assert pairs == [("kept", 1.0)]
    assert dropped == 12


def test_it_keeps_non_finite_values() -> None:
    pairs, _ = report._flatten({"nan": float("nan"), "inf": float("inf")})
    assert math.isnan(dict(pairs)["nan"]) and dict(pairs)["inf"] == math.inf


def test_prefix_is_added_only_to_keys_without_a_namespace() -> None:
    pairs, _ = report._flatten({"loss": 1, "train/loss": 2, "a": {"b": 3}}, prefix="validation/")
    assert pairs == [("validation/loss", 1.0), ("train/loss", 2.0), ("a/b", 3.0)]


# -- delivery ----------------------------------------------------------------------------


def test_it_delivers_points_hparams_and_encodes_non_finite_values(bound: IngestStub) -> None:
    report.init(hparams={"lr": 1e-5, "nested": {"x": [1, 2]}, "bad": float("nan")})
    report.init(hparams={"lr": 1.0})  # idempotent: not posted again
    report.log({"train": {"loss": 0.5}, "acc": [0.5, 1.0]}, step=3, prefix="val")
    report.log({"x": float("inf")})  # second call: implicit step 1

    assert report.finish(timeout=5) is True
    points = points_by_key(bound)
    assert set(points) == {"train/loss", "val/acc", "x"}
    assert (points["train/loss"]["step"], points["train/loss"]["value"]) == (3, 0.5)
    assert (points["val/acc"]["step"], points["val/acc"]["value"]) == (3, 0.75)
    assert (points["x"]["step"], points["x"]["value"]) == (1, "Infinity")
    assert bound.inits == [{"hparams": {"lr": 1e-5, "nested": {"x": [1, 2]}, "bad": "NaN"}}]
    assert report.stats()["queued"] == 3
    assert report.stats()["sent"] == 3


def test_oversized_hparams_are_trimmed_to_the_route_limit(bound: IngestStub) -> None:
    report.init(hparams={f"k{i}": "v" * 4000 for i in range(40)})

    assert report.finish(timeout=5) is True
    (posted,) = bound.inits
    assert posted["hparams"]["_tuneplane_truncated"] is True
    assert "k0" in posted["hparams"]
    assert len(json.dumps(posted["hparams"])) <= limits.HPARAMS_MAX_BYTES


def test_steps_the_server_would_refuse_are_dropped_not_sent(bound: IngestStub) -> None:
    report.log({"a": 1.0}, step=2**63)
    report.log({"a": 1.0}, step=1.5)  # type: ignore[arg-type]
    report.log({"a": 2.0}, step=FakeScalar(4.0))  # type: ignore[arg-type]

    assert report.finish(timeout=5) is True
    assert [(p["step"], p["value"]) for p in bound.points] == [(4, 2.0)]
    assert report.stats()["dropped"] == 2


def test_it_is_a_no_op_without_a_token(
    stub: IngestStub, fast_report: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(env.JOB_ENDPOINT, stub.endpoint)
    monkeypatch.setenv(env.JOB_RUN_ID, stub.run_id)
    monkeypatch.setenv(env.JOB_ENABLED, "1")

    report.init(hparams={"lr": 1}, monitor_hardware=True)
    report.log({"loss": 1.0}, step=1)
    assert report.finish() is True

    assert all(value == 0 for value in report.stats().values())
    assert report._reporter is not None and report._reporter._sender is None
    assert stub.requests == []


def test_it_is_a_no_op_when_ingest_is_not_enabled(
    stub: IngestStub, fast_report: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(env.JOB_ENDPOINT, stub.endpoint)
    monkeypatch.setenv(env.JOB_RUN_ID, stub.run_id)
    monkeypatch.setenv(env.JOB_TOKEN, stub.token)
    monkeypatch.setenv(env.JOB_ENABLED, "0")

    report.log({"loss": 1.0}, step=1)
    report.finish()

    assert report.stats()["queued"] == 0
    assert stub.requests == []


def test_log_never_raises_on_garbage_or_with_the_server_down(
    bind_to: Callable[..., None], closed_port: int
) -> None:
    bind_to(f"http://127.0.0.1:{closed_port}/api/ingest/v1")
    recursive: dict[str, Any] = {}
    recursive["self"] = recursive

    report.init(hparams={EvilKey(): object()}, monitor_hardware=False)
    for metrics in (
        None,
        "loss",
        [1, 2],
        3.0,
        {EvilKey(): 1.0},
        {"a": Unreducible()},
        recursive,
        EvilMapping(),
        {"big": 10**400},
    ):
        report.log(metrics)  # type: ignore[arg-type]
    report.log({"a": 1.0}, step="seven")  # type: ignore[arg-type]
    report.log({"a": 1.0}, step=-1)
    report.log({"a": 1.0}, prefix=EvilKey())  # type: ignore[arg-type]
    report.log({"ok": 1.0}, step=2.0)  # type: ignore[arg-type]

    started = time.monotonic()
    for _ in range(1000):
        report.log({"loss": 0.1, "lr": 1e-5})
    assert time.monotonic() - started < 1.0  # never blocks on the dead server

    assert report.finish(timeout=3) is True
    stats = report.stats()
    assert stats["dropped"] >= 8
    assert stats["queued"] == 2001
    assert stats["failed_requests"] >= report.SEND_ATTEMPTS
    assert stats["lost"] == 2001 and stats["sent"] == 0


def test_a_full_queue_counts_lost_points(bound: IngestStub) -> None:
    reporter = report._get()
    reporter.queue_max = 10

    report.log({f"k{i}": float(i) for i in range(100)}, step=0)

    stats = report.stats()
    assert stats["queued"] <= 10
    assert stats["lost"] >= 90
    assert stats["queued"] + stats["lost"] == 100
    assert report.finish(timeout=5) is True
    assert len(bound.points) == report.stats()["queued"] == report.stats()["sent"]


def test_batches_never_exceed_the_point_limit(bound: IngestStub) -> None:
    for step in range(10):
        report.log({f"layer{i}/grad_norm": float(i) for i in range(1000)}, step=step)

    assert report.finish(timeout=10) is True
    assert len(bound.points) == 10_000
    assert max(bound.scalar_batch_sizes) <= limits.SCALAR_BATCH_MAX_POINTS
    assert len(bound.scalar_batch_sizes) >= 5
    assert report.stats()["sent"] == 10_000


def test_a_refused_batch_is_counted_and_not_retried(bound: IngestStub) -> None:
    bound.route_status["scalars"] = 400

    report.log({"a": 1.0, "b": 2.0, "c": 3.0}, step=1)

    assert report.finish(timeout=5) is True
    stats = report.stats()
    assert (stats["rejected"], stats["rejected_points"], stats["sent"]) == (1, 3, 0)
    assert len(bound.calls("scalars")) == 1


def test_transient_failures_are_retried(bound: IngestStub) -> None:
    bound.fail_next(2, 503, route="scalars")

    report.log({"a": 1.0, "b": 2.0}, step=1)

    assert report.finish(timeout=5) is True
    stats = report.stats()
    assert (stats["sent"], stats["failed_requests"], stats["lost"]) == (2, 2, 0)
    assert [call.status for call in bound.calls("scalars")] == [503, 503, 200]


def test_finish_is_bounded_when_the_server_does_not_answer(
    bind_to: Callable[..., None], silent_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(report, "REQUEST_TIMEOUT_SECONDS", 30.0)
    bind_to(f"http://127.0.0.1:{silent_port}/api/ingest/v1")
    report.log({"loss": 1.0}, step=1)

    started = time.monotonic()
    assert report.finish(timeout=0.5) is False
    assert time.monotonic() - started < 0.8


def test_finish_is_bounded_while_retries_back_off(
    bind_to: Callable[..., None], closed_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(report, "RETRY_BACKOFF_SECONDS", 5.0)
    bind_to(f"http://127.0.0.1:{closed_port}/api/ingest/v1")
    report.log({"loss": 1.0}, step=1)

    started = time.monotonic()
    assert report.finish(timeout=0.3) is False
    assert time.monotonic() - started < 0.6
    assert report.stats()["failed_requests"] >= 1


def test_a_forked_child_sends_its_own_points_only(
    bound: IngestStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A long interval keeps the parent's point queued at fork time: the child must not
    # send the copy it inherited.
    monkeypatch.setattr(report, "FLUSH_INTERVAL_SECONDS", 30.0)
    report.log({"parent": 1.0}, step=0)
    assert report.stats()["pending"] == 1

    pid = os.fork()
    if pid == 0:  # the child: report, flush, and say through the exit status how it went
        code = 1
        try:
            report.log({"child": 1.0}, step=0)
            delivered = report.finish(timeout=5)
            code = 0 if delivered and report.stats()["sent"] == 1 else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)

    assert os.waitstatus_to_exitcode(status) == 0
    assert report.finish(timeout=5) is True
    assert sorted(point["key"] for point in bound.points) == ["child", "parent"]


def test_hardware_sampling_reports_cpu_and_memory(
    bound: IngestStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(env.JOB_MONITOR_INTERVAL, "0.05")
    report._reset()

    report.init(monitor_hardware=True)

    assert bound.wait_for(
        lambda: {"system/cpu_percent", "system/memory_percent"} <= {p["key"] for p in bound.points},
        timeout=5,
    )
    memory = [p["value"] for p in bound.points if p["key"] == "system/memory_percent"]
    assert all(0 <= value <= 100 for value in memory)


def test_hardware_sampling_stays_off_on_other_ranks(
    bound: IngestStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANK", "3")
    report._reset()

    report.init(monitor_hardware=True)
    report.finish(timeout=5)

    assert report._get()._monitor is None
    assert len(bound.inits) == 1  # init itself still reports
