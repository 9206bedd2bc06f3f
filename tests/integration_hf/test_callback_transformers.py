"""TunePlaneCallback inside a real transformers Trainer, reporting through the real ingest
path: pytest-django's live server (an HTTP server in a thread, on the test database),
the attempt's ingest token, the `init` and `scalars` routes, PostgreSQL.

A tiny randomly initialised GPT-2 (one layer, 32 wide, a 100-token vocabulary) trains
for 6 steps on the CPU, logging every 2 steps and evaluating every 3, which is what the
integration facts verified for transformers 5.24.0. Nothing is downloaded.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install -e '.[test]')")
transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (pip install -e '.[test]')"
)

from tuneplane import report
from tuneplane.report import TunePlaneCallback

from apps.telemetry.models import ScalarPoint, ScalarSeries, TransportHealth

pytestmark = pytest.mark.django_db(transaction=True)  # the live server commits for real

MAX_STEPS, LOGGING_STEPS, EVAL_STEPS = 6, 2, 3
VOCAB, SEQ = 100, 16


class RandomTokens(torch.utils.data.Dataset):
    """Fixed random token sequences; the labels are the inputs (causal LM loss)."""

    def __init__(self, size: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, VOCAB, (size, SEQ), generator=generator)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"input_ids": self.ids[index], "labels": self.ids[index]}


def steps_of(job: Any, key: str) -> list[int]:
    return list(
        ScalarPoint.objects.filter(series__job=job, series__key=key)
        .order_by("step")
        .values_list("step", flat=True)
    )


def test_a_tiny_transformers_run_lands_its_metrics_on_the_server(
    bound_to_live_server: Any, tmp_path: Any
) -> None:
    job = bound_to_live_server
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(
            n_layer=1,
            n_embd=32,
            n_head=2,
            vocab_size=VOCAB,
            n_positions=64,
            bos_token_id=0,
            eos_token_id=0,  # inside the 100-token vocabulary
        )
    )
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=MAX_STEPS,
        logging_steps=LOGGING_STEPS,
        eval_strategy="steps",
        eval_steps=EVAL_STEPS,
        per_device_train_batch_size=2,
        per_device_eval_batch_size=2,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
    )
    trainer = transformers.Trainer(
        model=model,
        args=args,
        train_dataset=RandomTokens(16, seed=1),
        eval_dataset=RandomTokens(4, seed=2),
        callbacks=[TunePlaneCallback()],
    )

    trainer.train()  # on_train_end calls finish(): the points are delivered on return
    assert report.finish(timeout=30) is True

    stats = report.stats()
    assert stats["sent"] == stats["queued"] > 0
    assert (stats["lost"], stats["rejected"]) == (0, 0)

    keys = set(ScalarSeries.objects.filter(job=job).values_list("key", flat=True))
    # on_log: the training loss every LOGGING_STEPS, and the end-of-training summary.
    assert {"loss", "grad_norm", "learning_rate", "epoch", "train_loss"} <= keys
    assert steps_of(job, "loss") == [2, 4, 6]
    assert steps_of(job, "grad_norm") == [2, 4, 6]
    assert steps_of(job, "train_loss") == [MAX_STEPS]
    # on_evaluate: eval_* reported once, as validation/*, at the evaluation steps.
    assert {"validation/loss", "validation/runtime", "validation/epoch"} <= keys
    assert steps_of(job, "validation/loss") == [3, 6]
    assert not any(key.startswith(("eval_", "validation/eval_")) for key in keys)

    loss = ScalarSeries.objects.get(job=job, key="loss")
    assert (loss.count, loss.first_step, loss.last_step, loss.invalid_count) == (3, 2, 6, 0)
    assert 0 < loss.min <= loss.max < 20  # a cross-entropy over 100 tokens starts near ln(100)
    last_logged = [h["loss"] for h in trainer.state.log_history if "loss" in h][-1]
    assert loss.last == pytest.approx(last_logged)

    # finish() sent a final heartbeat with the final counters.
    health = TransportHealth.objects.get(attempt__job=job)
    assert health.counters["sent"] == stats["sent"] and health.counters["lost"] == 0
    assert health.queue_occupancy == 0.0

    # on_train_begin: init posted the TrainingArguments' scalar hyperparameters.
    job.refresh_from_db()
    assert job.hparams["max_steps"] == MAX_STEPS
    assert job.hparams["logging_steps"] == LOGGING_STEPS
