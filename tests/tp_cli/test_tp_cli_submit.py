"""`tp validate`, `tp submit`, `tp export`, `tp eval`: what is sent and what is shown."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from tuneplane.contracts.errors import CUSTOM_NO_EXPORT_OR_EVAL, CUSTOM_OBSERVABILITY_URL_REQUIRED

from tp_cli.packaging import build_package

from .api_stub import CUSTOM_RECIPE, ApiStub
from .tp_testlib import add_experiment, commit_all, run_tp

IMAGE = "registry.example.com/my-trainer:v1"
OBS_URL = "https://wandb.example/my-proj"
SUBMIT = ("submit", "my-custom", "--profile", "h200:8", "--image", IMAGE)


def test_submit_sends_the_request_and_the_package(logged_in: ApiStub, repo: Path) -> None:
    add_experiment(repo)
    expected_package = build_package(repo, "my-custom").data

    result = run_tp(
        *SUBMIT,
        "--observability-url", OBS_URL,
        "--set", "lr=1e-5",
        "--set", "epochs=3",
        "--set", "note=a=b",
        "--model", "Qwen/Qwen3-0.6B",
        "--train-data", "s3://bucket/train.jsonl",
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    (call,) = logged_in.calls("POST", "/api/v1/jobs")
    parts = call.multipart()
    assert set(parts) == {"request", "package"}
    assert json.loads(parts["request"][1]) == {
        "experiment": "my-custom",
        "operation": "train",
        "recipe": "custom/custom",
        "profile": "h200:8",
        "image": IMAGE,
        "observability_url": OBS_URL,
        "hyperparams": {"lr": "1e-5", "epochs": "3", "note": "a=b"},
        "model": "Qwen/Qwen3-0.6B",
        "train_data": "s3://bucket/train.jsonl",
        "recipe_lock": {k: CUSTOM_RECIPE[k] for k in ("name", "version", "digest")},
    }
    package_headers, package = parts["package"]
    assert 'filename="my-custom.tar.gz"' in package_headers["content-disposition"]
    assert package == expected_package
    with tarfile.open(fileobj=io.BytesIO(package), mode="r:gz") as tar:
        assert "experiments/my-custom/train.sh" in tar.getnames()
    assert "Submitted job my-custom-3f9a1c: pending" in result.stdout
    assert "http://console.example/jobs/my-custom-3f9a1c" in result.stdout


def test_submit_leaves_out_options_that_were_not_given(logged_in: ApiStub, repo: Path) -> None:
    add_experiment(repo)

    assert run_tp(*SUBMIT, "--observability-url", OBS_URL).exit_code == 0

    request = logged_in.calls("POST", "/api/v1/jobs")[0].job_request()
    assert request["hyperparams"] == {}
    assert "model" not in request and "train_data" not in request


@pytest.mark.parametrize("bad", ["lr", "=1e-5"])
def test_a_set_without_key_and_value_is_a_usage_error(
    logged_in: ApiStub, repo: Path, bad: str
) -> None:
    add_experiment(repo)

    result = run_tp(*SUBMIT, "--observability-url", OBS_URL, "--set", bad)

    assert result.exit_code == 2
    assert "--set" in result.stderr
    assert f"expected KEY=VALUE, got {bad!r}" in result.stderr
    assert logged_in.requests == []


def test_submit_requires_profile_and_image(logged_in: ApiStub, repo: Path) -> None:
    add_experiment(repo)

    result = run_tp("submit", "my-custom", "--image", IMAGE)

    assert result.exit_code == 2
    assert "--profile" in result.stderr
    assert logged_in.requests == []


def test_submit_relays_the_server_refusal(logged_in: ApiStub, repo: Path) -> None:
    add_experiment(repo)

    result = run_tp(*SUBMIT)  # no --observability-url for an external recipe

    assert result.exit_code == 1
    assert result.stderr == f"Error: {CUSTOM_OBSERVABILITY_URL_REQUIRED}\n"
    assert result.stdout == ""
    assert len(logged_in.calls("POST", "/api/v1/jobs")) == 1


def test_a_server_crash_is_reported_with_its_status(logged_in: ApiStub, repo: Path) -> None:
    add_experiment(repo)

    def crash(stub: ApiStub, rec: object, h: object) -> None:
        h.send_response(502)  # type: ignore[attr-defined]
        h.send_header("Content-Length", "0")  # type: ignore[attr-defined]
        h.end_headers()  # type: ignore[attr-defined]

    logged_in.overrides[("POST", "/api/v1/jobs")] = crash

    result = run_tp(*SUBMIT, "--observability-url", OBS_URL)

    assert result.exit_code == 1
    assert result.stderr == f"Error: the server at {logged_in.url} answered HTTP 502 Bad Gateway\n"


def test_validate_prints_ok_warnings_and_the_spec(logged_in: ApiStub, repo: Path) -> None:
    add_experiment(repo)

    result = run_tp(
        "validate", "my-custom", "--image", IMAGE, "--observability-url", OBS_URL, "--set", "lr=0.1"
    )

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "ok"
    assert "warning: image is not pinned by digest" in result.stderr
    assert f"  framework.observability_url: {OBS_URL}" in result.stdout
    assert "  hyperparams.lr: 0.1" in result.stdout
    request = logged_in.calls("POST", "/api/v1/jobs/validate")[0].job_request()
    assert request["operation"] == "train"
    assert "profile" not in request


@pytest.mark.parametrize("operation", ["export", "eval"])
def test_export_and_eval_of_a_custom_experiment_are_refused_locally(
    logged_in: ApiStub, repo: Path, operation: str
) -> None:
    add_experiment(repo)

    result = run_tp(operation, "my-custom")

    assert result.exit_code == 1
    assert result.stderr == f"Error: {CUSTOM_NO_EXPORT_OR_EVAL.format(operation=operation)}\n"
    assert logged_in.requests == []  # nothing uploaded


@pytest.mark.parametrize("operation", ["export", "eval"])
def test_export_and_eval_relay_the_server_refusal(
    logged_in: ApiStub, repo: Path, operation: str
) -> None:
    exp = add_experiment(repo)
    # A lock that claims the operation gets past the local check; the server decides.
    lock = json.loads((exp / "recipe.lock.json").read_text())
    lock["operations"] = ["train", operation]
    (exp / "recipe.lock.json").write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")
    commit_all(repo)

    result = run_tp(operation, "my-custom", "--observability-url", OBS_URL)

    assert result.exit_code == 1
    assert result.stderr == f"Error: {CUSTOM_NO_EXPORT_OR_EVAL.format(operation=operation)}\n"
    (call,) = logged_in.calls("POST", "/api/v1/jobs/validate")
    assert call.job_request()["operation"] == operation


def test_another_recipe_without_the_operation_is_refused_naming_it(
    logged_in: ApiStub, repo: Path
) -> None:
    recipe = {
        **CUSTOM_RECIPE,
        "name": "pytorch/image-classification",
        "operations": ["train", "eval"],
    }
    add_experiment(repo, recipe=recipe)

    result = run_tp("export", "my-custom")

    assert result.exit_code == 1
    assert result.stderr == (
        "Error: recipe pytorch/image-classification has no export operation (it declares: train, eval)\n"
    )
    assert logged_in.requests == []
