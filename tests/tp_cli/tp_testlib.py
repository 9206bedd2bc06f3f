"""Helpers shared by the `tp` CLI tests (kept out of conftest.py so tests can import them)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from tp_cli.main import cli
from tp_cli.scaffold import scaffold_experiment

from .api_stub import CUSTOM_RECIPE


def run_tp(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return out.stdout


def commit_all(repo: Path, message: str = "change") -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def add_experiment(
    root: Path,
    name: str = "my-custom",
    *,
    commit: bool = True,
    recipe: dict[str, Any] | None = None,
) -> Path:
    """Scaffold experiments/<name> as `tp new` would (without the server round trip)."""
    made = scaffold_experiment(root, name, recipe or CUSTOM_RECIPE)
    if commit:
        commit_all(root, f"add {name}")
    return made.directory
