"""`tp login` and where credentials come from."""

from __future__ import annotations

import json
import socket
import stat
from pathlib import Path

import pytest

from tp_cli.config import NOT_LOGGED_IN

from .api_stub import TOKEN, ApiStub
from .tp_testlib import run_tp


def test_it_verifies_the_token_and_stores_it_0600(stub: ApiStub, isolated_env: Path) -> None:
    result = run_tp("login", "--server", stub.url + "/", "--token", TOKEN)

    assert result.exit_code == 0, result.output
    assert result.stdout == f"Logged in to {stub.url} as alice\n"
    (me,) = stub.calls("GET", "/api/v1/me")
    assert me.headers["authorization"] == f"Bearer {TOKEN}"
    path = isolated_env / "tuneplane" / "config.json"
    assert json.loads(path.read_text()) == {"server": stub.url, "token": TOKEN}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_it_tightens_an_existing_config_file(stub: ApiStub, isolated_env: Path) -> None:
    directory = isolated_env / "tuneplane"
    directory.mkdir(parents=True, mode=0o755)
    (directory / "config.json").write_text("{}")
    (directory / "config.json").chmod(0o644)

    assert run_tp("login", "--server", stub.url, "--token", TOKEN).exit_code == 0

    assert stat.S_IMODE((directory / "config.json").stat().st_mode) == 0o600
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_it_refuses_a_bad_token_and_stores_nothing(stub: ApiStub, isolated_env: Path) -> None:
    result = run_tp("login", "--server", stub.url, "--token", "tpu_wrong")

    assert result.exit_code == 1
    assert result.stderr == "Error: invalid token\n"
    assert not (isolated_env / "tuneplane" / "config.json").exists()


def test_it_names_the_server_it_could_not_reach(isolated_env: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"

    result = run_tp("login", "--server", url, "--token", TOKEN)

    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: could not reach the TunePlane server at {url}: ")
    assert not (isolated_env / "tuneplane").exists()


def test_it_refuses_a_server_url_without_scheme() -> None:
    result = run_tp("login", "--server", "tuneplane.example", "--token", TOKEN)

    assert result.exit_code == 2
    assert "must start with http:// or https://" in result.stderr


def test_commands_say_how_to_log_in_when_not_logged_in() -> None:
    result = run_tp("job", "ls")

    assert result.exit_code == 1
    assert result.stderr == f"Error: {NOT_LOGGED_IN}\n"
    assert NOT_LOGGED_IN == "not logged in: run tp login --server URL --token T"


def test_the_stored_login_is_used(stub: ApiStub) -> None:
    assert run_tp("login", "--server", stub.url, "--token", TOKEN).exit_code == 0

    result = run_tp("job", "ls")

    assert result.exit_code == 0, result.output
    (listing,) = stub.calls("GET", "/api/v1/jobs")
    assert listing.headers["authorization"] == f"Bearer {TOKEN}"


def test_environment_variables_override_the_file(
    stub: ApiStub, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = isolated_env / "tuneplane"
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(
        json.dumps({"server": "http://127.0.0.1:9", "token": "tpu_stale"})
    )
    monkeypatch.setenv("TUNEPLANE_SERVER", stub.url)
    monkeypatch.setenv("TUNEPLANE_TOKEN", TOKEN)

    result = run_tp("job", "ls")

    assert result.exit_code == 0, result.output
    assert stub.calls("GET", "/api/v1/jobs")[0].headers["authorization"] == f"Bearer {TOKEN}"
