"""Fixtures for the `tp` CLI tests: an API stub, an isolated config dir, real git repos.

No Django: run with `python -m pytest tests/tp_cli -q -p no:django`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .api_stub import TOKEN, ApiStub
from .tp_testlib import commit_all, git


@pytest.fixture(autouse=True)
def _tuneplane_settings() -> None:
    """Replaces tests/conftest.py's autouse fixture of the same name for this folder:
    that one needs pytest-django's `settings`, and these tests run without Django
    (`-p no:django`); `tp` talks to a stub, never to the Django app."""


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test reads the developer's login or git identity."""
    config_home = tmp_path / "xdg-config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TUNEPLANE_SERVER", raising=False)
    monkeypatch.delenv("TUNEPLANE_TOKEN", raising=False)
    # rich-click wraps usage errors at the terminal width; wide enough to assert on.
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(var, raising=False)
    return config_home


@pytest.fixture
def stub() -> Iterator[ApiStub]:
    server = ApiStub().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def logged_in(stub: ApiStub, monkeypatch: pytest.MonkeyPatch) -> ApiStub:
    monkeypatch.setenv("TUNEPLANE_SERVER", stub.url)
    monkeypatch.setenv("TUNEPLANE_TOKEN", TOKEN)
    return stub


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A real git repository with one commit; the working directory of the test."""
    root = tmp_path / "experiments-repo"
    root.mkdir()
    git(root, "-c", "init.defaultBranch=main", "init", "-q")
    git(root, "config", "user.name", "Alice")
    git(root, "config", "user.email", "alice@example.com")
    git(root, "config", "commit.gpgsign", "false")
    (root / "README.md").write_text("my experiments\n")
    commit_all(root, "initial")
    monkeypatch.chdir(root)
    return root
