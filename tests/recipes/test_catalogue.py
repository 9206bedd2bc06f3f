"""The recipe catalogue: pytorch/image-classification and trl/sft beside custom/custom,
their parameter schemas checked by `tp validate` and by submission through the one
validator in tuneplane.contracts.parameters, their bindings and runtime pins."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from tuneplane.contracts.parameters import ParameterError, to_argv, validate_parameters

from apps.jobs.models import Job
from apps.recipes.models import Recipe
from apps.recipes.services import check_definition
from tests.conftest import build_package, token_for
from tp_cli.main import cli

pytestmark = pytest.mark.django_db

TRAIN_PY = build_package({"experiments/exp/train.py": "print('training')\n"})


def test_the_catalogue_publishes_three_recipes_with_digest_pinned_runtimes():
    recipes = {r.name: r for r in Recipe.objects.all()}
    assert {"custom/custom", "pytorch/image-classification", "trl/sft"} <= set(recipes)
    for name in ("pytorch/image-classification", "trl/sft"):
        recipe = recipes[name]
        assert recipe.observability == "platform"
        assert recipe.launcher == "torchrun"
        assert recipe.entrypoint == "train.py"
        assert "@sha256:" in recipe.runtime["image"] and len(recipe.runtime["image"].split("@sha256:")[1]) == 64
    assert recipes["pytorch/image-classification"].operations == ["train", "eval"]
    assert recipes["trl/sft"].bindings["model"]["required"] is True
    assert recipes["custom/custom"].parameters == {}


def test_the_recipe_api_shows_schema_operations_and_pins(alice_api):
    body = alice_api.get("/api/v1/recipes/trl/sft").json()
    assert body["parameters"]["learning_rate"] == {
        "type": "float", "default": 0.00002, "minimum": 0, "exclusive_minimum": True, "maximum": 1}
    assert body["operations"] == ["train", "eval", "export"]
    assert body["launcher"] == "torchrun"


@pytest.mark.parametrize(
    "definition, message",
    [
        ({"runtime": {"image": "ghcr.io/x/y:latest"}}, "runtime.image must be pinned as image@sha256"),
        ({"parameters": {"lr": {"type": "decimal", "default": 1}}}, "parameter lr needs a type"),
        ({"parameters": {"lr": {"type": "float", "default": "fast"}}}, "hyperparams.lr must be a number"),
        ({"operations": ["train", "deploy"]}, "operations must be a non-empty list"),
    ],
)
def test_a_broken_catalogue_file_fails_loudly(definition, message):
    from django.core.exceptions import ImproperlyConfigured

    base = json.loads(Path("fixtures/recipes/pytorch-image-classification.json").read_text())
    with pytest.raises(ImproperlyConfigured, match=message):
        check_definition({**base, **definition})


# The one validator -------------------------------------------------------------------------


SCHEMA = json.loads(Path("fixtures/recipes/pytorch-image-classification.json").read_text())["parameters"]


def test_values_are_coerced_and_defaults_filled():
    checked = validate_parameters(SCHEMA, {"learning_rate": "0.05", "epochs": "3", "amp": "false"})
    assert checked["learning_rate"] == 0.05
    assert checked["epochs"] == 3
    assert checked["amp"] is False
    assert checked["architecture"] == "resnet50"
    assert to_argv(SCHEMA, {"epochs": 3, "amp": True, "architecture": "vit_b_16"}) == [
        "--amp", "--architecture", "vit_b_16", "--epochs", "3"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"learning_rate": "0"}, "hyperparams.learning_rate must be a number from 0 (exclusive) to 10, not '0'"),
        ({"learning_rate": "fast"}, "hyperparams.learning_rate must be a number from 0 (exclusive) to 10, not 'fast'"),
        ({"epochs": "2.5"}, "hyperparams.epochs must be an integer from 1 to 10000, not '2.5'"),
        ({"architecture": "lenet"}, "hyperparams.architecture must be one of resnet18, resnet50, vit_b_16, "
                                    "efficientnet_b0, not 'lenet'"),
        ({"amp": "maybe"}, "hyperparams.amp must be true or false, not 'maybe'"),
        ({"lr": "0.1"}, "hyperparams.lr is not a parameter of this recipe; it takes: amp, architecture, batch_size, "
                        "epochs, image_size, learning_rate, momentum, seed, weight_decay"),
    ],
)
def test_bad_values_are_named_with_what_is_expected(values, message):
    with pytest.raises(ParameterError) as caught:
        validate_parameters(SCHEMA, values)
    assert str(caught.value) == message


def test_a_recipe_without_parameters_passes_values_untouched():
    assert validate_parameters({}, {"lr": "1e-5", "anything": "goes"}) == {"lr": "1e-5", "anything": "goes"}


# Submission ---------------------------------------------------------------------------------


def test_submission_refuses_an_out_of_range_value_and_stores_nothing(alice_api, submit):
    response = submit(alice_api, recipe="pytorch/image-classification", image="", observability_url="",
                      package=TRAIN_PY, hyperparams={"epochs": "0"})
    assert response.status_code == 400
    assert response.json() == {
        "detail": "hyperparams.epochs must be an integer from 1 to 10000, not '0'", "field": "hyperparams"}
    assert Job.objects.count() == 0


def test_submission_stores_the_checked_values_with_defaults(alice_api, submit):
    response = submit(alice_api, recipe="pytorch/image-classification", image="", observability_url="",
                      package=TRAIN_PY, hyperparams={"epochs": "3"})
    assert response.status_code == 201, response.content
    spec = response.json()["spec"]
    assert spec["hyperparams"]["epochs"] == 3
    assert spec["hyperparams"]["learning_rate"] == 0.1
    assert spec["launch"]["launcher"] == "torchrun"
    assert spec["launch"]["args"][:2] == ["--amp", "--architecture"]
    assert spec["framework"]["entrypoint"] == "experiments/exp/train.py"


def test_trl_requires_model_and_train_data(alice_api, submit):
    response = submit(alice_api, recipe="trl/sft", image="", observability_url="", package=TRAIN_PY,
                      train_data="trl-lib/Capybara")
    assert response.json() == {
        "detail": "trl/sft requires --model (a Hugging Face model id or a path the job can read)", "field": "model"}
    assert Job.objects.count() == 0


def test_trl_binds_model_and_train_data(alice_api, submit):
    response = submit(alice_api, recipe="trl/sft", image="", observability_url="", package=TRAIN_PY,
                      model="Qwen/Qwen2.5-0.5B", train_data="trl-lib/Capybara")
    assert response.status_code == 201, response.content
    spec = response.json()["spec"]
    assert spec["bindings"] == {"model": "Qwen/Qwen2.5-0.5B", "train_data": "trl-lib/Capybara"}
    assert spec["launch"]["args"][-4:] == ["--model-name-or-path", "Qwen/Qwen2.5-0.5B",
                                           "--dataset-name", "trl-lib/Capybara"]


def test_custom_ignores_model_and_train_data_with_a_warning(alice_api, submit):
    response = submit(alice_api, model="Qwen/Qwen2.5-0.5B", train_data="x")
    assert response.status_code == 201
    body = response.json()
    assert "--model and --train-data are ignored by custom/custom" in body["warnings"]
    assert body["spec"]["bindings"] == {}
    assert body["spec"]["launch"] == {"launcher": "bash", "args": []}  # values never reach argv


def test_an_explicit_image_for_a_catalogue_recipe_still_passes_the_allowlist(alice_api, submit):
    response = submit(alice_api, recipe="pytorch/image-classification", image="quay.io/me/torch:1",
                      observability_url="", package=TRAIN_PY)
    assert response.status_code == 400
    assert response.json()["field"] == "image"
    assert "'quay.io' is not in TUNEPLANE_ALLOWED_IMAGE_REGISTRIES" in response.json()["detail"]


# tp validate, against the real server ---------------------------------------------------------


@pytest.fixture
def workspace(tmp_path, live_server, alice, monkeypatch):
    monkeypatch.setenv("TUNEPLANE_SERVER", live_server.url)
    monkeypatch.setenv("TUNEPLANE_TOKEN", token_for(alice))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    for args in (["init", "-q"], ["config", "user.email", "a@example.com"], ["config", "user.name", "A"]):
        subprocess.run(["git", *args], cwd=tmp_path, check=True)
    return tmp_path


def _tp(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.django_db(transaction=True)
def test_tp_validate_checks_the_schema_before_uploading(workspace):
    created = _tp("new", "cls", "--method", "pytorch/image-classification")
    assert created.exit_code == 0, created.output
    lock = json.loads((workspace / "experiments/cls/recipe.lock.json").read_text())
    assert lock["name"] == "pytorch/image-classification"
    (workspace / "experiments/cls/train.py").write_text("print('train')\n")
    subprocess.run(["git", "add", "-A"], cwd=workspace, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "cls"], cwd=workspace, check=True)

    bad = _tp("validate", "cls", "--profile", "cpu", "--set", "epochs=0")
    assert bad.exit_code == 1
    assert bad.stderr == "Error: hyperparams.epochs must be an integer from 1 to 10000, not '0'\n"

    good = _tp("validate", "cls", "--profile", "cpu", "--set", "epochs=2")
    assert good.exit_code == 0, good.output
    assert "hyperparams.epochs: 2" in good.stdout
    assert "runtime.source: catalogue" in good.stdout


@pytest.mark.parametrize("fixture", ["pytorch-image-classification.json", "trl-sft.json"])
def test_the_scaffolded_train_py_accepts_exactly_the_flags_submission_passes(tmp_path, fixture):
    """What `tp new` writes and what the runner passes agree: every checked value and
    binding as a flag (to_argv), parsed by the scaffold's argparse without an error."""
    import os

    from tp_cli.scaffold import scaffold_experiment

    recipe = {**json.loads((Path("fixtures/recipes") / fixture).read_text()), "digest": "sha256:" + "0" * 64}
    made = scaffold_experiment(tmp_path, "exp", recipe)
    train_py = made.directory / "train.py"
    assert train_py.is_file()
    values = validate_parameters(recipe["parameters"], {})
    argv = to_argv(recipe["parameters"], values)
    for name, spec in recipe.get("bindings", {}).items():
        argv += [spec["flag"], f"some-{name}"]
    done = subprocess.run(
        [sys.executable, str(train_py), *argv], capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "TUNEPLANE_OUT_DIR": str(tmp_path / "out")},
    )
    # 1 with the scaffold's "no training command yet"; argparse would exit 2 on a bad flag.
    assert done.returncode == 1, done.stderr
    assert "no training command yet" in done.stdout
