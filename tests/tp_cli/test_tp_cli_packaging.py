"""Packages are built from the committed state of experiments/<name> (git archive HEAD)."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest
from tuneplane.contracts.errors import CUSTOM_ENTRYPOINT_INVALID

from tp_cli.errors import TpError
from tp_cli.packaging import UNCOMMITTED_WARNING, build_package

from .api_stub import ApiStub
from .tp_testlib import add_experiment, commit_all, git, run_tp

OBS = ("--observability-url", "https://wandb.example/proj")


def members(data: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {m.name: m for m in tar.getmembers()}


def read_member(data: bytes, name: str) -> str:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        extracted = tar.extractfile(name)
        assert extracted is not None
        return extracted.read().decode()


def test_it_packages_the_committed_experiment_only(repo: Path) -> None:
    add_experiment(repo, "my-custom")
    add_experiment(repo, "other")

    pkg = build_package(repo, "my-custom")

    files = {name for name, m in members(pkg.data).items() if m.isfile()}
    assert files == {
        f"experiments/my-custom/{n}"
        for n in ("train.sh", "config.yaml", "recipe.lock.json", "README.md")
    }
    assert members(pkg.data)["experiments/my-custom/train.sh"].mode & 0o111
    assert pkg.lock["name"] == "custom/custom"
    assert pkg.commit == git(repo, "rev-parse", "HEAD").strip()
    assert pkg.uncommitted == []


def test_an_uncommitted_edit_is_not_in_the_package(repo: Path) -> None:
    exp = add_experiment(repo)
    committed = (exp / "train.sh").read_text()
    with (exp / "train.sh").open("a") as fh:
        fh.write("echo UNCOMMITTED-EDIT\n")
    (exp / "untracked.py").write_text("print('not committed')\n")

    pkg = build_package(repo, "my-custom")

    assert read_member(pkg.data, "experiments/my-custom/train.sh") == committed
    assert "experiments/my-custom/untracked.py" not in members(pkg.data)
    assert any("train.sh" in line for line in pkg.uncommitted)
    assert any("untracked.py" in line for line in pkg.uncommitted)


def test_validate_warns_about_uncommitted_changes_and_uploads_the_committed_state(
    logged_in: ApiStub, repo: Path
) -> None:
    exp = add_experiment(repo)
    with (exp / "train.sh").open("a") as fh:
        fh.write("echo UNCOMMITTED-EDIT\n")

    result = run_tp("validate", "my-custom", *OBS)

    assert result.exit_code == 0, result.output
    assert f"warning: {UNCOMMITTED_WARNING}:" in result.stderr
    assert "experiments/my-custom/train.sh" in result.stderr
    (call,) = logged_in.calls("POST", "/api/v1/jobs/validate")
    assert "UNCOMMITTED-EDIT" not in read_member(call.package(), "experiments/my-custom/train.sh")


def test_a_clean_experiment_gets_no_warning(logged_in: ApiStub, repo: Path) -> None:
    add_experiment(repo)

    result = run_tp("validate", "my-custom", *OBS)

    assert result.exit_code == 0, result.output
    assert UNCOMMITTED_WARNING not in result.stderr


def test_packages_are_deterministic(repo: Path) -> None:
    add_experiment(repo)

    first, second = build_package(repo, "my-custom"), build_package(repo, "my-custom")

    assert first.data == second.data
    assert first.sha256 == second.sha256
    assert first.data[4:8] == b"\0\0\0\0"  # gzip MTIME: no build time in the bytes


def test_it_works_from_a_subdirectory(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exp = add_experiment(repo)
    monkeypatch.chdir(exp)

    assert "experiments/my-custom/train.sh" in members(build_package(exp, "my-custom").data)


def test_an_uncommitted_experiment_is_refused(logged_in: ApiStub, repo: Path) -> None:
    add_experiment(repo, commit=False)

    result = run_tp("validate", "my-custom", *OBS)

    assert result.exit_code == 1
    assert result.stderr == (
        "Error: experiments/my-custom is not committed: git add experiments/my-custom && git commit\n"
    )
    assert logged_in.requests == []


def test_a_repository_without_commits_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q")
    add_experiment(root, commit=False)

    with pytest.raises(TpError, match=r"^experiments/my-custom is not committed: git add"):
        build_package(root, "my-custom")


def test_outside_a_git_repository_it_says_so(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    add_experiment(plain, commit=False)

    with pytest.raises(TpError, match="is not inside a git repository"):
        build_package(plain, "my-custom")


def test_a_missing_committed_lock_is_refused(repo: Path) -> None:
    exp = add_experiment(repo, commit=False)
    (exp / "recipe.lock.json").unlink()
    commit_all(repo)

    with pytest.raises(TpError, match=r"recipe.lock.json is not committed"):
        build_package(repo, "my-custom")


def test_the_recipe_comes_from_the_committed_lock(logged_in: ApiStub, repo: Path) -> None:
    exp = add_experiment(repo)
    # An uncommitted edit of the lock must not change what is submitted.
    lock = (exp / "recipe.lock.json").read_text()
    (exp / "recipe.lock.json").write_text(lock.replace("custom/custom", "other/other"))

    assert run_tp("validate", "my-custom", *OBS).exit_code == 0

    request = logged_in.calls("POST", "/api/v1/jobs/validate")[0].job_request()
    assert request["recipe"] == "custom/custom"
    assert request["recipe_lock"]["name"] == "custom/custom"


def test_a_renamed_entrypoint_is_refused_before_upload(logged_in: ApiStub, repo: Path) -> None:
    add_experiment(repo)
    git(repo, "mv", "experiments/my-custom/train.sh", "experiments/my-custom/run.sh")
    commit_all(repo, "rename")

    result = run_tp("validate", "my-custom", *OBS)

    assert result.exit_code == 1
    assert result.stderr == f"Error: {CUSTOM_ENTRYPOINT_INVALID}\n"
    assert logged_in.requests == []


def test_a_symlinked_entrypoint_escaping_the_experiment_is_refused(
    logged_in: ApiStub, repo: Path
) -> None:
    exp = add_experiment(repo)
    (repo / "outside.sh").write_text("#!/usr/bin/env bash\necho escaped\n")
    (exp / "train.sh").unlink()
    os.symlink("../../outside.sh", exp / "train.sh")
    commit_all(repo, "symlink")
    assert git(repo, "ls-files", "-s", "experiments/my-custom/train.sh").startswith("120000")

    result = run_tp(
        "submit", "my-custom", "--profile", "h200:8", "--image", "registry.example.com/t:v1", *OBS
    )

    assert result.exit_code == 1
    assert result.stderr == f"Error: {CUSTOM_ENTRYPOINT_INVALID}\n"
    assert logged_in.requests == []


def test_the_local_check_needs_no_login(repo: Path) -> None:
    add_experiment(repo)
    git(repo, "rm", "-q", "experiments/my-custom/train.sh")
    commit_all(repo, "remove")

    result = run_tp("validate", "my-custom")

    assert result.exit_code == 1
    assert result.stderr == f"Error: {CUSTOM_ENTRYPOINT_INVALID}\n"
