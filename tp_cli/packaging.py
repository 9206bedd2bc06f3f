"""Job packages from the COMMITTED state of experiments/<name> (docs/api.md: "a gzip'd tar
rooted at the repository, holding experiments/<name>/... as committed (git archive)").

Packaging HEAD rather than the work tree makes a job reproducible from a commit id and
keeps stray local files (data, secrets, venvs) out of uploads. The package is checked
here with the same contract function the server and the runner use, so an invalid
entrypoint is reported before anything is uploaded.
"""

from __future__ import annotations

import gzip
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuneplane.contracts import errors as contract_errors
from tuneplane.contracts.package import PackageError, experiment_dir, inspect_package, sha256_bytes

from tp_cli.errors import TpError
from tp_cli.scaffold import EXPERIMENT_NAME_RULE, is_valid_experiment_name

UNCOMMITTED_WARNING = "submitting the committed state; uncommitted changes are not included"
LOCK_FILE = "recipe.lock.json"
CUSTOM_RECIPE = "custom/custom"
TRAIN = "train"


@dataclass(frozen=True)
class Package:
    experiment: str
    data: bytes  # the tar.gz bytes to upload
    sha256: str
    commit: str
    lock: dict[str, Any]
    uncommitted: list[str]  # `git status --porcelain` lines for the experiment, if any

    @property
    def filename(self) -> str:
        return f"{self.experiment}.tar.gz"


def _git(root: Path, *args: str, text: bool = True) -> subprocess.CompletedProcess[Any]:
    try:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=text, check=False)
    except FileNotFoundError:
        raise TpError(
            "git is not installed; tp packages experiments from a git repository"
        ) from None


def git_root(cwd: Path) -> Path:
    out = _git(cwd, "rev-parse", "--show-toplevel")
    if out.returncode != 0 or not out.stdout.strip():
        raise TpError(
            f"{cwd} is not inside a git repository; tp submits the committed state of "
            "experiments/NAME, so run it in your experiments repository"
        )
    return Path(out.stdout.strip())


def _not_committed(name: str) -> TpError:
    exp = experiment_dir(name)
    return TpError(f"{exp} is not committed: git add {exp} && git commit")


def read_committed_lock(root: Path, name: str, rev: str = "HEAD") -> dict[str, Any]:
    """recipe.lock.json as committed: the recipe name and entrypoint come from it, not
    from the work tree, so they match the package that is uploaded."""
    exp = experiment_dir(name)
    out = _git(root, "show", f"{rev}:{exp}/{LOCK_FILE}")
    if out.returncode != 0:
        raise TpError(
            f"{exp}/{LOCK_FILE} is not committed; it is written by tp new, "
            f"commit it with: git add {exp} && git commit"
        )
    try:
        lock = json.loads(out.stdout)
    except ValueError as exc:
        raise TpError(f"{exp}/{LOCK_FILE} in HEAD is not valid JSON: {exc}") from None
    if (
        not isinstance(lock, dict)
        or not isinstance(lock.get("name"), str)
        or not isinstance(lock.get("entrypoint"), str)
        or not isinstance(lock.get("operations"), list)
    ):
        raise TpError(
            f"{exp}/{LOCK_FILE} in HEAD lacks name, entrypoint or operations; "
            "restore the file tp new wrote"
        )
    return lock


def _head_commit(root: Path, name: str) -> str:
    out = _git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    if out.returncode != 0:
        raise _not_committed(name)  # an empty repository: nothing is committed yet
    return str(out.stdout.strip())


def _require_committed_dir(root: Path, commit: str, name: str) -> None:
    out = _git(root, "cat-file", "-t", f"{commit}:{experiment_dir(name)}")
    if out.returncode != 0:
        raise _not_committed(name)
    if out.stdout.strip() != "tree":
        raise TpError(f"{experiment_dir(name)} in HEAD is not a directory")


def uncommitted_changes(root: Path, name: str) -> list[str]:
    # Run at the root: pathspecs are relative to the working directory.
    out = _git(root, "status", "--porcelain", "--", experiment_dir(name))
    if out.returncode != 0:
        raise TpError(f"git status failed: {out.stderr.strip()}")
    return [line for line in out.stdout.splitlines() if line.strip()]


def committed_experiment(cwd: Path, name: str) -> tuple[Path, str, dict[str, Any]]:
    """Check that experiments/<name> is committed; returns (root, commit, lock)."""
    if not is_valid_experiment_name(name):
        raise TpError(EXPERIMENT_NAME_RULE, exit_code=2)
    root = git_root(cwd)
    commit = _head_commit(root, name)
    _require_committed_dir(root, commit, name)
    return root, commit, read_committed_lock(root, name, commit)


def check_operation(lock: dict[str, Any], operation: str) -> None:
    """Refuse an operation the committed recipe does not declare, before any upload.

    The server refuses it too; saying so locally spares a package upload and gives the
    same words (spec: "tp export and tp eval against a custom experiment are refused").
    """
    operations = [op for op in lock.get("operations", []) if isinstance(op, str)]
    if operation in operations:
        return
    if lock.get("name") == CUSTOM_RECIPE and operation != TRAIN:
        raise TpError(contract_errors.CUSTOM_NO_EXPORT_OR_EVAL.format(operation=operation))
    declared = ", ".join(operations) or "none"
    raise TpError(
        f"recipe {lock.get('name')} has no {operation} operation (it declares: {declared})"
    )


def build_package(cwd: Path, name: str, operation: str = TRAIN) -> Package:
    """Archive experiments/<name> from HEAD, gzip it deterministically and check it."""
    root, commit, lock = committed_experiment(cwd, name)
    check_operation(lock, operation)
    uncommitted = uncommitted_changes(root, name)
    # The commit id rather than HEAD, so the archive matches the commit checked above.
    out = _git(root, "archive", "--format=tar", commit, "--", experiment_dir(name), text=False)
    if out.returncode != 0:
        raise TpError(f"git archive failed: {out.stderr.decode(errors='replace').strip()}")
    # mtime=0 and no file name in the header: the same commit gives the same bytes and
    # so the same sha256, which is how the server stores and deduplicates packages.
    data = gzip.compress(out.stdout, compresslevel=9, mtime=0)
    try:
        inspect_package(data, name, lock["entrypoint"])
    except PackageError as exc:
        raise TpError(str(exc)) from None
    return Package(
        experiment=name,
        data=data,
        sha256=sha256_bytes(data),
        commit=commit,
        lock=lock,
        uncommitted=uncommitted,
    )
