"""TunePlaneCallback: a duck-typed transformers callback, driven with fake args/state."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest
from ingest_stub import IngestStub
from tuneplane import report
from tuneplane.report import TunePlaneCallback

# Every on_* method of transformers.TrainerCallback (integration-facts.md, 5.24.0):
# transformers calls each one on every callback, so a missing one is an AttributeError.
HOOKS = (
    "on_init_end",
    "on_train_begin",
    "on_train_end",
    "on_epoch_begin",
    "on_epoch_end",
    "on_step_begin",
    "on_pre_optimizer_step",
    "on_optimizer_step",
    "on_substep_end",
    "on_step_end",
    "on_evaluate",
    "on_predict",
    "on_save",
    "on_log",
    "on_prediction_step",
    "on_push_begin",
)


class FakeArgs:
    def to_dict(self) -> dict[str, Any]:
        return {
            "learning_rate": 1e-5,
            "per_device_train_batch_size": 8,
            "bf16": True,
            "lr_scheduler_type": "linear",
            "report_to": ["none"],
            "fsdp_config": {"min_num_params": 0},
            "optim_args": None,
        }


@dataclass
class FakeState:
    global_step: int = 0
    is_world_process_zero: bool = True
    log_history: list[dict[str, Any]] = field(default_factory=list)


class FakeControl:
    should_training_stop = False


def keys_at(stub: IngestStub) -> dict[str, tuple[int, Any]]:
    with stub.lock:
        return {point["key"]: (point["step"], point["value"]) for point in stub.points}


def test_it_answers_every_trainer_hook_with_none(fast_report: None) -> None:
    callback = TunePlaneCallback()
    args, state, control = FakeArgs(), FakeState(), FakeControl()

    for hook in HOOKS:
        # The extra keyword arguments CallbackHandler.call_event passes to every hook.
        answer = getattr(callback, hook)(
            args,
            state,
            control,
            model=None,
            processing_class=None,
            optimizer=None,
            lr_scheduler=None,
            train_dataloader=None,
            eval_dataloader=None,
            logs={},
            metrics={},
        )
        assert answer is None, hook

    assert TunePlaneCallback.__mro__ == (TunePlaneCallback, object)  # duck-typed, no base class


def test_importing_report_pulls_in_neither_transformers_nor_ray() -> None:
    code = (
        "import sys, tuneplane.report\n"
        "print(sorted({'transformers', 'ray', 'torch', 'django'} & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.strip() == "[]"


def test_it_maps_train_begin_log_evaluate_and_train_end(bound: IngestStub) -> None:
    callback = TunePlaneCallback()
    args, control = FakeArgs(), FakeControl()

    callback.on_train_begin(args, FakeState(global_step=0), control)
    logs = {"loss": 0.5, "grad_norm": 1.5, "learning_rate": 1e-5, "epoch": 0.25, "eval_loss": 9.0}
    callback.on_log(args, FakeState(global_step=2), control, logs=logs)
    callback.on_evaluate(
        args,
        FakeState(global_step=3),
        control,
        metrics={"eval_loss": 0.4, "eval_runtime": 1.5, "epoch": 0.375},
    )
    callback.on_train_end(args, FakeState(global_step=3), control)  # finish(): delivered on return

    assert keys_at(bound) == {
        "loss": (2, 0.5),
        "grad_norm": (2, 1.5),
        "learning_rate": (2, 1e-5),
        "epoch": (2, 0.25),
        "validation/loss": (3, 0.4),
        "validation/runtime": (3, 1.5),
        "validation/epoch": (3, 0.375),
    }
    assert "eval_loss" in logs  # the trainer's dict (also in log_history) is left alone
    assert bound.inits == [
        {
            "hparams": {
                "learning_rate": 1e-5,
                "per_device_train_batch_size": 8,
                "bf16": True,
                "lr_scheduler_type": "linear",
            }
        }
    ]


def test_only_world_rank_zero_reports(bound: IngestStub) -> None:
    callback = TunePlaneCallback()
    state = FakeState(global_step=1, is_world_process_zero=False)

    callback.on_train_begin(FakeArgs(), state, FakeControl())
    callback.on_log(FakeArgs(), state, FakeControl(), logs={"loss": 1.0})
    callback.on_train_end(FakeArgs(), state, FakeControl())
    report.finish(timeout=2)

    assert report.stats()["queued"] == 0
    assert bound.requests == []


@pytest.mark.parametrize(
    ("variables", "reports"), [({"RANK": "1"}, False), ({"LOCAL_RANK": "0"}, True), ({}, True)]
)
def test_without_trainer_state_the_rank_comes_from_the_environment(
    bound: IngestStub, monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], reports: bool
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)

    class BareState:
        global_step = 5

    TunePlaneCallback().on_log(FakeArgs(), BareState(), FakeControl(), logs={"loss": 1.0})
    report.finish(timeout=5)

    assert (keys_at(bound) == {"loss": (5, 1.0)}) is reports


def test_a_broken_args_object_does_not_reach_the_trainer(bound: IngestStub) -> None:
    class BrokenArgs:
        def to_dict(self) -> dict[str, Any]:
            raise RuntimeError("broken")

    assert TunePlaneCallback().on_train_begin(BrokenArgs(), FakeState(), FakeControl()) is None
    assert (
        TunePlaneCallback().on_log(FakeArgs(), FakeState(), FakeControl(), logs="not a dict")
        is None
    )
