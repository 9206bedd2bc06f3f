"""`tp new`: the scaffold of spec/bring-your-own-trainer.md, "Scaffold"."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest
from tuneplane.contracts.env import JOB_CONTRACT
from tuneplane.contracts.errors import SCAFFOLD_NO_TRAINING_COMMAND

from .api_stub import CUSTOM_RECIPE, ApiStub
from .tp_testlib import git, run_tp

SCAFFOLD_FILES = {"train.sh", "config.yaml", "recipe.lock.json", "README.md"}


def contract_env(tmp_path: Path, *, without: str | None = None) -> dict[str, str]:
    env = {"PATH": os.environ["PATH"]}
    for var in JOB_CONTRACT:
        if var != without:
            env[var] = str(tmp_path) if var.endswith("_DIR") else "1"
    return env


@pytest.fixture
def scaffolded(logged_in: ApiStub, repo: Path) -> Path:
    result = run_tp("new", "my-custom", "--method", "custom/custom")
    assert result.exit_code == 0, result.output
    return repo / "experiments" / "my-custom"


def test_it_creates_the_four_files_from_the_server_recipe(logged_in: ApiStub, repo: Path) -> None:
    result = run_tp("new", "my-custom", "--method", "custom/custom")

    assert result.exit_code == 0, result.output
    directory = repo / "experiments" / "my-custom"
    assert {p.name for p in directory.iterdir()} == SCAFFOLD_FILES
    assert len(logged_in.calls("GET", "/api/v1/recipes/custom/custom")) == 1
    for name in SCAFFOLD_FILES:
        assert f"experiments/my-custom/{name}" in result.stdout
    assert (
        "tp submit my-custom --profile PROFILE --image IMAGE --observability-url URL"
        in result.stdout
    )


def test_it_scaffolds_at_the_repository_root_from_a_subdirectory(
    logged_in: ApiStub, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo / "docs").mkdir()
    monkeypatch.chdir(repo / "docs")

    assert run_tp("new", "my-custom", "--method", "custom/custom").exit_code == 0

    assert (repo / "experiments" / "my-custom" / "train.sh").is_file()
    assert not (repo / "docs" / "experiments").exists()


def test_train_sh_has_the_scaffold_properties(scaffolded: Path) -> None:
    train = scaffolded / "train.sh"
    lines = train.read_text().splitlines()

    assert train.stat().st_mode & stat.S_IXUSR
    assert lines[0] == "#!/usr/bin/env bash"
    assert lines[1] == "set -euo pipefail"
    assert lines[2].startswith("#")
    checks = [re.match(r': "\$\{(\w+):\?\1 is not set: ', line) for line in lines]
    assert [m.group(1) for m in checks if m] == list(JOB_CONTRACT)
    assert len([line for line in lines if line.startswith(": ")]) == len(JOB_CONTRACT)
    assert lines[-2:] == [f'echo "{SCAFFOLD_NO_TRAINING_COMMAND}" >&2', "exit 1"]
    # The launch example the user replaces the two lines above with.
    assert '#   exec python "${TUNEPLANE_EXP_DIR}/train.py" \\' in lines
    assert subprocess.run(["bash", "-n", str(train)], check=False).returncode == 0


def test_scaffolded_train_sh_says_no_training_command_yet_and_exits_1(
    scaffolded: Path, tmp_path: Path
) -> None:
    done = subprocess.run(
        ["bash", str(scaffolded / "train.sh")],
        env=contract_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 1
    assert done.stderr == f"{SCAFFOLD_NO_TRAINING_COMMAND}\n"
    assert done.stdout == ""


@pytest.mark.parametrize("missing", JOB_CONTRACT)
def test_scaffolded_train_sh_dies_naming_a_missing_variable(
    scaffolded: Path, tmp_path: Path, missing: str
) -> None:
    done = subprocess.run(
        ["bash", str(scaffolded / "train.sh")],
        env=contract_env(tmp_path, without=missing),
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode != 0
    assert f"{missing} is not set" in done.stderr
    assert SCAFFOLD_NO_TRAINING_COMMAND not in done.stderr


def test_recipe_lock_pins_the_recipe_with_sorted_keys(scaffolded: Path) -> None:
    text = (scaffolded / "recipe.lock.json").read_text()

    lock = json.loads(text)
    assert lock == {
        key: CUSTOM_RECIPE[key]
        for key in (
            "name",
            "version",
            "digest",
            "observability",
            "entrypoint",
            "operations",
            "runtime",
        )
    }
    assert "parameters" not in lock
    assert text == json.dumps(lock, indent=2, sort_keys=True) + "\n"


def test_config_yaml_and_readme_explain_the_experiment(scaffolded: Path) -> None:
    config = (scaffolded / "config.yaml").read_text()
    readme = (scaffolded / "README.md").read_text()

    # config.yaml is a commented example: every non-blank line is a comment.
    assert all(line.startswith("#") for line in config.splitlines() if line.strip())
    assert "git add experiments/my-custom && git commit" in readme
    assert "tp submit my-custom" in readme
    for var in JOB_CONTRACT:
        assert f"`{var}`" in readme


@pytest.mark.parametrize("name", ["My-Exp", "-exp", "exp_1", "a" * 64, "exp/../x", "exp\n"])
def test_it_refuses_a_bad_name_naming_the_rule(logged_in: ApiStub, repo: Path, name: str) -> None:
    result = run_tp("new", "--method", "custom/custom", "--", name)

    assert result.exit_code == 2
    assert "^[a-z0-9][a-z0-9-]{0,62}$" in result.stderr
    assert not (repo / "experiments").exists()
    assert logged_in.requests == []


def test_it_accepts_a_63_character_name(logged_in: ApiStub, repo: Path) -> None:
    assert run_tp("new", "a" * 63, "--method", "custom/custom").exit_code == 0
    assert (repo / "experiments" / ("a" * 63) / "train.sh").is_file()


def test_it_refuses_to_overwrite_an_existing_experiment(scaffolded: Path) -> None:
    (scaffolded / "train.sh").write_text("#!/usr/bin/env bash\nexec python train.py\n")

    result = run_tp("new", "my-custom", "--method", "custom/custom")

    assert result.exit_code == 1
    assert (
        result.stderr
        == "Error: experiments/my-custom already exists; pass --force to overwrite its scaffold files\n"
    )
    assert (scaffolded / "train.sh").read_text() == "#!/usr/bin/env bash\nexec python train.py\n"


def test_force_rewrites_the_scaffold_and_keeps_other_files(scaffolded: Path) -> None:
    (scaffolded / "train.sh").write_text("edited\n")
    (scaffolded / "train.py").write_text("print('mine')\n")

    result = run_tp("new", "my-custom", "--method", "custom/custom", "--force")

    assert result.exit_code == 0, result.output
    assert (
        (scaffolded / "train.sh").read_text().startswith("#!/usr/bin/env bash\nset -euo pipefail\n")
    )
    assert (scaffolded / "train.py").read_text() == "print('mine')\n"


def test_it_relays_an_unknown_recipe(logged_in: ApiStub, repo: Path) -> None:
    result = run_tp("new", "my-custom", "--method", "nope/nope")

    assert result.exit_code == 1
    assert result.stderr == "Error: unknown recipe nope/nope\n"
    assert not (repo / "experiments" / "my-custom").exists()


def test_it_works_outside_a_git_repository(
    logged_in: ApiStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.chdir(plain)

    assert run_tp("new", "my-custom", "--method", "custom/custom").exit_code == 0
    assert (plain / "experiments" / "my-custom" / "train.sh").is_file()


def test_the_scaffold_commits_cleanly(scaffolded: Path, repo: Path) -> None:
    git(repo, "add", "-A")
    staged = git(repo, "diff", "--cached", "--name-only").split()
    assert sorted(staged) == sorted(f"experiments/my-custom/{n}" for n in SCAFFOLD_FILES)
    # git records the executable bit, so the committed entrypoint stays runnable.
    assert git(repo, "ls-files", "-s", "experiments/my-custom/train.sh").startswith("100755")
