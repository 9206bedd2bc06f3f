"""Where `tp` keeps the server URL and the API token.

The file is `$XDG_CONFIG_HOME/tuneplane/config.json` (default `~/.config/tuneplane`). It
holds a bearer token, so it is created 0600 inside a 0700 directory and never printed.
`TUNEPLANE_SERVER` / `TUNEPLANE_TOKEN` override the file, one by one, so CI can run
`tp` without a login step.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from tp_cli.errors import TpError

ENV_SERVER = "TUNEPLANE_SERVER"
ENV_TOKEN = "TUNEPLANE_TOKEN"
NOT_LOGGED_IN = "not logged in: run tp login --server URL --token T"


@dataclass(frozen=True)
class Credentials:
    server: str
    token: str


def config_dir() -> Path:
    # The XDG spec says a relative XDG_CONFIG_HOME is invalid and must be ignored.
    base = os.environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "tuneplane"


def config_path() -> Path:
    return config_dir() / "config.json"


def normalise_server(url: str) -> str:
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise TpError(f"server URL must start with http:// or https://, got {url!r}", exit_code=2)
    return url


def _read_file() -> dict[str, str]:
    path = config_path()
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise TpError(f"cannot read {path}: {exc.strerror}") from None
    try:
        data = json.loads(raw)
    except ValueError:
        raise TpError(f"{path} is not valid JSON: run tp login again") from None
    if not isinstance(data, dict):
        raise TpError(f"{path} is not a JSON object: run tp login again")
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def load_credentials() -> Credentials:
    """The server and token to use; raises TpError(NOT_LOGGED_IN) when either is missing."""
    stored = _read_file()
    server = os.environ.get(ENV_SERVER) or stored.get("server", "")
    token = os.environ.get(ENV_TOKEN) or stored.get("token", "")
    if not server or not token:
        raise TpError(NOT_LOGGED_IN)
    return Credentials(server=normalise_server(server), token=token)


def save_credentials(creds: Credentials) -> Path:
    """Write the config file atomically with mode 0600; returns its path."""
    directory = config_dir()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    # mkdir's mode is filtered by the umask and ignored for an existing directory.
    os.chmod(directory, 0o700)
    path = directory / "config.json"
    tmp = directory / f".config.json.{os.getpid()}.tmp"
    payload = json.dumps({"server": creds.server, "token": creds.token}, indent=2) + "\n"
    # Created 0600 from the start (os.open's mode), so the token is never readable by
    # others, not even between the write and a later chmod.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an older leftover tmp file keeps its mode under O_CREAT
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(payload)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
