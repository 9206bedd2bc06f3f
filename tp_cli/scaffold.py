"""`tp new`: write experiments/<name>/ for a recipe (spec: bring-your-own-trainer, "Scaffold")."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

from tuneplane.contracts import env as contract_env
from tuneplane.contracts import errors as contract_errors
from tuneplane.contracts.package import experiment_dir

from tp_cli import templates
from tp_cli.errors import TpError
from tp_cli.train_py import render_train_py

EXPERIMENT_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
EXPERIMENT_NAME_RULE = (
    f"experiment names must match {EXPERIMENT_NAME_PATTERN} "
    "(lowercase letters, digits and '-', starting with a letter or digit, at most 63 characters)"
)
_EXPERIMENT_NAME_RE = re.compile(EXPERIMENT_NAME_PATTERN)
RECIPE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*$")
# The fields of a recipe pinned in recipe.lock.json (what submit and the runner rely on).
LOCK_FIELDS = ("name", "version", "digest", "observability", "entrypoint", "operations", "runtime")
_PLAIN_FILE_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")
_SHELL_SAFE_IN_DOUBLE_QUOTES = re.compile(r'^[^"$`\\!]*$')


def is_valid_experiment_name(name: str) -> bool:
    # fullmatch, because `$` also matches before a trailing newline.
    return _EXPERIMENT_NAME_RE.fullmatch(name) is not None


def repo_root(cwd: Path) -> Path:
    """The git work tree holding cwd, else cwd itself (`tp new` works outside git too)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        return cwd
    top = out.stdout.strip()
    return Path(top) if out.returncode == 0 and top else cwd


def recipe_lock(recipe: dict[str, Any]) -> dict[str, Any]:
    missing = [field for field in LOCK_FIELDS if field not in recipe]
    if missing:
        raise TpError(
            f"the server's recipe {recipe.get('name', '?')} lacks {', '.join(missing)}; "
            "cannot write recipe.lock.json"
        )
    return {field: recipe[field] for field in LOCK_FIELDS}


def _echo_no_command() -> str:
    text = contract_errors.SCAFFOLD_NO_TRAINING_COMMAND
    quoted = f'"{text}"' if _SHELL_SAFE_IN_DOUBLE_QUOTES.match(text) else shlex.quote(text)
    return f"echo {quoted} >&2"


def render_train_sh(name: str, recipe: str, entrypoint: str) -> str:
    checks = "\n".join(
        Template(templates.ENV_CHECK).substitute(var=var, name=name)
        for var in contract_env.JOB_CONTRACT
    )
    return Template(templates.TRAIN_SH).substitute(
        name=name,
        recipe=recipe,
        entrypoint=entrypoint,
        checks=checks,
        no_command=_echo_no_command(),
    )


def render_files(name: str, lock: dict[str, Any], recipe_definition: dict[str, Any] | None = None) -> dict[str, str]:
    """File name -> content of the scaffold; the entrypoint comes first."""
    recipe = str(lock["name"])
    entrypoint = str(lock["entrypoint"])
    # Only external observability needs --observability-url (spec, "Why
    # --observability-url is required"); a platform recipe refuses it.
    flags = " --observability-url URL" if lock.get("observability") == "external" else ""
    variables = "\n".join(
        f"- `{var}`: {templates.VARIABLE_HELP[var]}"
        if var in templates.VARIABLE_HELP
        else f"- `{var}`"
        for var in contract_env.JOB_CONTRACT
    )
    return {
        # A Python entrypoint (catalogue frameworks under torchrun) gets a train.py
        # declaring the recipe's parameters; custom's train.sh stays the shell scaffold.
        entrypoint: (
            render_train_py(name, recipe, recipe_definition or lock, contract_errors.SCAFFOLD_NO_TRAINING_COMMAND)
            if entrypoint.endswith(".py")
            else render_train_sh(name, recipe, entrypoint)
        ),
        "config.yaml": Template(templates.CONFIG_YAML).substitute(name=name, recipe=recipe),
        "recipe.lock.json": json.dumps(lock, indent=2, sort_keys=True) + "\n",
        "README.md": Template(templates.README_MD).substitute(
            name=name,
            recipe=recipe,
            version=lock.get("version", "?"),
            entrypoint=entrypoint,
            submit_flags=flags,
            variables=variables,
        ),
    }


def ensure_can_create(root: Path, name: str, *, force: bool) -> Path:
    """The experiment directory to write; refuses to overwrite one without --force."""
    directory: Path = root / experiment_dir(name)
    exists = directory.exists() or directory.is_symlink()
    if exists and not force:
        raise TpError(
            f"{experiment_dir(name)} already exists; pass --force to overwrite its scaffold files"
        )
    if directory.is_symlink() or (exists and not directory.is_dir()):
        raise TpError(f"{experiment_dir(name)} exists and is not a directory")
    return directory


@dataclass(frozen=True)
class Scaffold:
    root: Path  # the repository root (or cwd outside git)
    directory: Path
    files: list[Path]


def scaffold_experiment(
    root: Path, name: str, recipe: dict[str, Any], *, force: bool = False
) -> Scaffold:
    if not is_valid_experiment_name(name):
        raise TpError(EXPERIMENT_NAME_RULE, exit_code=2)
    lock = recipe_lock(recipe)
    entrypoint = str(lock["entrypoint"])
    if not _PLAIN_FILE_RE.match(entrypoint):
        # The entrypoint must sit directly in the experiment directory (the package check
        # refuses anything else), so a recipe naming a path cannot be scaffolded.
        raise TpError(
            f"recipe {lock['name']} names entrypoint {entrypoint!r}, not a plain file name"
        )
    directory = ensure_can_create(root, name, force=force)
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for filename, content in render_files(name, lock, recipe).items():
        path = directory / filename
        if path.is_symlink():
            # --force rewrites our files; it must not write through a link to elsewhere.
            path.unlink()
        path.write_text(content, encoding="utf-8")
        written.append(path)
    entry = directory / entrypoint
    os.chmod(entry, entry.stat().st_mode | 0o111)
    return Scaffold(root=root, directory=directory, files=written)
