"""`tp env ...` and `tp plugin push`: agent environments, runners and harness plugins.

The directory is parsed locally with the same contracts module the server uses
(tuneplane.contracts.environment), so a bad manifest is refused before anything is
uploaded, with the same words the server would use; the server parses it again.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import rich_click as click
from rich.console import Console
from rich.table import Table
from tuneplane.contracts import environment as C
from tuneplane.contracts.environment_bundle import build_archive, collect_directory

from tp_cli.client import CONNECT_TIMEOUT, READ_TIMEOUT, UPLOAD_READ_TIMEOUT, ApiClient, path_part
from tp_cli.config import load_credentials
from tp_cli.errors import NetworkError, ServerError, TpError


def _client() -> ApiClient:
    return ApiClient(load_credentials())


def _console() -> Console:
    console = Console(highlight=False)
    if not console.is_terminal:
        console.width = max(console.width, 200)
    return console


def _post_json(client: ApiClient, path: str, payload: dict[str, Any] | None = None) -> Any:
    resp = client._send("POST", path, json=payload, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
    return client._json(resp)


def _post_bundle(client: ApiClient, path: str, data: dict[str, str], archive: bytes) -> Any:
    resp = client._send(
        "POST",
        path,
        data=data,
        files={"bundle": ("bundle.tar.gz", archive, "application/gzip")},
        timeout=(CONNECT_TIMEOUT, UPLOAD_READ_TIMEOUT),
    )
    return client._json(resp)


def _collect(directory: str) -> dict[str, bytes]:
    try:
        return collect_directory(Path(directory))
    except C.ContractError as exc:
        raise TpError(exc.message) from None


def _reference(client: ApiClient, text: str, *, require_version: bool = False) -> C.Reference:
    """owner/name@version; a bare name is in your own namespace."""
    try:
        ref = C.parse_reference(text, require_version=require_version)
    except C.ContractError as exc:
        raise click.BadParameter(exc.message) from None
    if ref.owner is None:
        me = client.get("api/v1/me")
        ref = C.Reference(str(me.get("username")), ref.name, ref.version)
    return ref


def _version_path(ref: C.Reference) -> str:
    return (
        f"api/v1/environments/{path_part(ref.owner or '')}/{path_part(ref.name)}"
        f"/versions/{path_part(ref.version or '')}"
    )


def _resolve_version(client: ApiClient, text: str) -> C.Reference:
    """A reference with its version; without one, the environment's latest."""
    ref = _reference(client, text)
    if ref.version is None:
        env = client.get(f"api/v1/environments/{path_part(ref.owner or '')}/{path_part(ref.name)}")
        versions = env.get("versions") or []
        if not versions:
            raise TpError(f"{ref} has no version")
        ref = C.Reference(ref.owner, ref.name, str(versions[0]))
    return ref


def _tool_text(tool: dict[str, Any]) -> str:
    schema = tool.get("schema") or {}
    props = schema.get("properties") or {}
    args = ", ".join(f"{name}: {(spec or {}).get('type', 'any')}" for name, spec in props.items())
    required = schema.get("required") or []
    text = f"{tool.get('name')}  {tool.get('endpoint')}  ({args or 'no arguments'})"
    return text + (f" required: {', '.join(required)}" if required else "")


def _sandbox_text(item: dict[str, Any]) -> str:
    return "required" if item.get("sandbox_required") else "not required"


def _verifier_text(item: dict[str, Any]) -> str:
    verifier = item.get("verifier") or {}
    return f"{verifier.get('kind')}: {verifier.get('ref')}"


@click.group(name="env")
def env_group() -> None:
    """Agent environments: push versions, list and show them, run remote runners."""


@env_group.command(name="push")
@click.argument("directory", type=click.Path(file_okay=False, exists=True))
@click.option(
    "--name", required=True, metavar="NAME", help="owner/name, or a bare name in your namespace."
)
@click.option("--version", "version", required=True, metavar="V", help="Immutable once pushed.")
@click.option(
    "--public", is_flag=True, help="Visible to everyone; applies only when first created."
)
def env_push(directory: str, name: str, version: str, public: bool) -> None:
    """Upload everything under DIRECTORY as NAME@VERSION."""
    files = _collect(directory)
    try:
        checked = C.check_bundle_files(files)  # the server's own parser, before uploading
        C.parse_reference(name, what="name")
        C.check_version(version)
    except C.ContractError as exc:
        raise TpError(exc.message) from None
    archive = build_archive(files)
    request = json.dumps({"name": name, "version": version, "public": public})
    item = _post_bundle(_client(), "api/v1/environments", {"request": request}, archive)
    counts = ", ".join(f"{k} {v}" for k, v in (item.get("splits") or {}).items())
    click.echo(
        f"Pushed {item.get('ref')}: {len(files)} file(s), {sum(len(d) for d in files.values())} bytes"
    )
    click.echo(
        f"  {checked.manifest.protocol} + {checked.manifest.deployment}"
        + (f", tasks: {counts}" if counts else "")
    )
    click.echo(f"  digest {item.get('digest')}")
    click.echo(f"  console {item.get('url')}")


@env_group.command(name="ls")
def env_ls() -> None:
    """List the environments you can use (yours and public ones)."""
    answer = _client().get("api/v1/environments")
    items = answer.get("results") or []
    if not items:
        click.echo("no environments")
        return
    table = Table(box=None, pad_edge=False)
    for column in (
        "environment",
        "latest",
        "protocol",
        "deployment",
        "verifier",
        "tools",
        "sandbox",
    ):
        table.add_column(column.upper(), no_wrap=True)
    for item in items:
        latest = item.get("latest") or {}
        table.add_row(
            str(item.get("ref")) + (" (public)" if item.get("public") else ""),
            str(latest.get("version", "-")),
            str(latest.get("protocol", "-")),
            str(latest.get("deployment", "-")),
            _verifier_text(latest) if latest else "-",
            ", ".join(t.get("name", "") for t in latest.get("tools") or []) or "none",
            _sandbox_text(latest) if latest else "-",
        )
    _console().print(table)


@env_group.command(name="show")
@click.argument("reference", metavar="OWNER/NAME@VERSION")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the version as the server returned it."
)
def env_show(reference: str, as_json: bool) -> None:
    """Show a version: protocol, verifier, tools, sandbox, tasks per split, runs."""
    client = _client()
    ref = _resolve_version(client, reference)
    item = client.get(_version_path(ref))
    if as_json:
        click.echo(json.dumps(item, indent=2))
        return
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    tools = item.get("tools") or []
    rows: list[tuple[str, str]] = [
        ("environment", str(item.get("ref"))),
        ("protocol", str(item.get("protocol"))),
        ("deployment", str(item.get("deployment"))),
        ("verifier", _verifier_text(item)),
        ("tools", _tool_text(tools[0]) if tools else "none"),
        *[("", _tool_text(tool)) for tool in tools[1:]],
        ("sandbox", _sandbox_text(item)),
    ]
    if item.get("splits"):
        rows.append(("tasks", ", ".join(f"{k} {v}" for k, v in item["splits"].items())))
    for key in ("category", "image", "image_port", "endpoint", "fleet"):
        if item.get(key) is not None and (
            key != "category" or item.get("protocol") == C.PROTOCOL_NEMO_GYM
        ):
            rows.append((key.replace("_", " "), str(item[key])))
    harness = item.get("harness")
    if harness:
        rows.append(
            (
                "harness",
                f"{harness.get('plugin')}@{harness.get('version')} {harness.get('entrypoint')}"
                + (f" {harness.get('digest')}" if harness.get("digest") else ""),
            )
        )
    if item.get("description"):
        rows.append(("description", str(item["description"])))
    rows += [
        ("digest", str(item.get("digest"))),
        (
            "files",
            ", ".join(f"{f.get('path')} ({f.get('size')} B)" for f in item.get("files") or []),
        ),
        ("pushed", f"{item.get('pushed_by')} {item.get('created_at')}"),
    ]
    runners = item.get("runners") or []
    if runners or item.get("deployment") == C.DEPLOYMENT_REMOTE:
        answering = sum(1 for r in runners if r.get("state") == "answering")
        rows.append(
            ("runners", f"{len(runners)} registered, {answering} answering (tp env runner ls)")
        )
    runs = item.get("runs") or []
    rows.append(
        (
            "runs",
            ", ".join(f"{r.get('id')} ({r.get('operation')}, {r.get('state')})" for r in runs)
            or "none",
        )
    )
    rows.append(("url", str(item.get("url"))))
    for key, text in rows:
        grid.add_row(key, text)
    _console().print(grid)


# --- runners --------------------------------------------------------------------------


@env_group.group(name="runner")
def runner_group() -> None:
    """Where a remote environment answers: register, serve, list, drain."""


@runner_group.command(name="register")
@click.argument("url")
@click.option("--name", required=True, metavar="NAME")
@click.option("--version", "version", required=True, metavar="V")
@click.option("--description", default="", metavar="D")
@click.option(
    "--rubric",
    metavar="OWNER/NAME",
    help="Judge turns with this rubric instead of the environment's reward.",
)
@click.option("--fleet", metavar="ID", help="Let the platform pick a machine of this fleet.")
@click.option(
    "--public", is_flag=True, help="Visible to everyone; applies only when first created."
)
def runner_register(
    url: str,
    name: str,
    version: str,
    description: str,
    rubric: str | None,
    fleet: str | None,
    public: bool,
) -> None:
    """Verify that an OpenEnv service answers at URL and publish it as NAME@VERSION."""
    answer = _post_json(
        _client(),
        "api/v1/environments/remote",
        {
            "url": url,
            "name": name,
            "version": version,
            "description": description,
            "rubric": rubric,
            "fleet": fleet,
            "public": public,
        },
    )
    env = answer.get("environment") or {}
    runner = answer.get("runner") or {}
    click.echo(f"Registered {env.get('ref')}: openenv + remote, answering at {runner.get('url')}")
    click.echo(f"  verifier {_verifier_text(env)}")
    click.echo(f"  runner #{runner.get('id')}: {runner.get('state')}")


def _runner_table(items: list[dict[str, Any]]) -> Table:
    table = Table(box=None, pad_edge=False)
    for column in ("id", "url", "machine", "state", "last answered", "registered by"):
        table.add_column(column.upper(), no_wrap=True)
    for item in items:
        table.add_row(
            str(item.get("id")),
            str(item.get("url")),
            str(item.get("label") or "-"),
            str(item.get("state")),
            str(item.get("last_answered_at") or "never"),
            str(item.get("registered_by")),
        )
    return table


@runner_group.command(name="ls")
@click.argument("environment", metavar="OWNER/NAME[@VERSION]")
def runner_ls(environment: str) -> None:
    """Every runner of ENVIRONMENT, whatever its state, marked answering or not."""
    client = _client()
    ref = _resolve_version(client, environment)
    items = (client.get(f"{_version_path(ref)}/runners").get("results")) or []
    if not items:
        click.echo(
            f"{ref} has no runner: nobody has set one up (tp env runner serve {ref} --at URL)"
        )
        return
    _console().print(_runner_table(items))


@runner_group.command(name="drain")
@click.argument("environment", metavar="OWNER/NAME[@VERSION]")
@click.argument("runner_id", metavar="RUNNER", type=int)
def runner_drain(environment: str, runner_id: int) -> None:
    """Take RUNNER out of service; it stays listed and no new job resolves to it."""
    client = _client()
    ref = _resolve_version(client, environment)
    item = _post_json(client, f"{_version_path(ref)}/runners/{runner_id}/drain")
    click.echo(f"runner #{item.get('id')} of {ref} at {item.get('url')}: {item.get('state')}")


@runner_group.command(name="serve")
@click.argument("environment", metavar="OWNER/NAME[@VERSION]")
@click.option(
    "--at",
    "url",
    required=True,
    metavar="URL",
    help="Where the environment answers on this machine.",
)
@click.option(
    "--name", "label", default="", metavar="NAME", help="This machine's name in runner lists."
)
@click.option(
    "--interval",
    default=15.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    metavar="S",
    help="Seconds between heartbeats.",
)
@click.option(
    "--count",
    type=click.IntRange(min=0),
    default=None,
    hidden=True,
    help="Stop after this many heartbeats (tests).",
)
def runner_serve(
    environment: str, url: str, label: str, interval: float, count: int | None
) -> None:
    """Register this machine as a runner of ENVIRONMENT and heartbeat until stopped."""
    import socket

    client = _client()
    ref = _resolve_version(client, environment)
    item = _post_json(
        client, f"{_version_path(ref)}/runners", {"url": url, "name": label or socket.gethostname()}
    )
    runner_id = item.get("id")
    click.echo(
        f"Serving {ref} as runner #{runner_id} at {url}: {item.get('state')} (Ctrl-C to stop)"
    )
    last_state = item.get("state")
    beats = 0
    try:
        while count is None or beats < count:
            time.sleep(interval)
            beats += 1
            try:
                item = _post_json(client, f"{_version_path(ref)}/runners/{runner_id}/heartbeat")
            except (NetworkError, ServerError) as exc:
                click.secho(
                    f"warning: heartbeat failed: {exc.message}; retrying", fg="yellow", err=True
                )
                continue
            if item.get("state") != last_state:
                last_state = item.get("state")
                detail = f" ({item.get('last_error')})" if item.get("last_error") else ""
                click.echo(f"runner #{runner_id}: {last_state}{detail}")
            if item.get("drained"):
                click.echo(f"runner #{runner_id} was drained; stopping")
                return
    except KeyboardInterrupt:
        click.echo(
            f"stopped serving {ref}; runner #{runner_id} stays listed and will show not answering"
        )


# --- plugins --------------------------------------------------------------------------


@click.group(name="plugin")
def plugin_group() -> None:
    """Harness plugins (capability: environment)."""


@plugin_group.command(name="push")
@click.argument("directory", type=click.Path(file_okay=False, exists=True))
def plugin_push(directory: str) -> None:
    """Upload DIRECTORY (plugin.yaml and its code) as name@version from plugin.yaml."""
    files = _collect(directory)
    if C.PLUGIN_FILE not in files:
        raise TpError("plugin.yaml is missing from the plugin directory")
    try:
        C.parse_plugin(files[C.PLUGIN_FILE])
    except C.ContractError as exc:
        raise TpError(exc.message) from None
    item = _post_bundle(_client(), "api/v1/plugins", {}, build_archive(files))
    click.echo(
        f"Pushed {item.get('ref')}: {item.get('capability')} plugin, entrypoint {item.get('entrypoint')}"
    )
    click.echo(f"  digest {item.get('digest')}  (pin it as harness.digest in manifest.json)")
