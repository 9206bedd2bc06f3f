"""The `tp` command (rich-click). Console script: `tp = "tp_cli.main:cli"`.

Exit codes: 0 ok; 1 refused by the server or a local check (printed as `Error: ...`);
2 usage errors (click's own).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import rich_click as click
from click.exceptions import Exit
from rich.console import Console
from rich.table import Table

from tp_cli import __version__
from tp_cli.client import ApiClient, path_part
from tp_cli.config import (
    ENV_SERVER,
    ENV_TOKEN,
    Credentials,
    load_credentials,
    normalise_server,
    save_credentials,
)
from tp_cli.errors import TpError
from tp_cli.logs import follow_logs, page_logs
from tp_cli.packaging import UNCOMMITTED_WARNING, Package, build_package
from tp_cli.parameters import check_hyperparams
from tp_cli.scaffold import (
    EXPERIMENT_NAME_RULE,
    RECIPE_NAME_RE,
    ensure_can_create,
    is_valid_experiment_name,
    repo_root,
    scaffold_experiment,
)

JOB_STATES = ("pending", "queued", "running", "succeeded", "failed", "cancelled")
_STATE_STYLE = {
    "succeeded": "green",
    "failed": "red",
    "cancelled": "yellow",
    "running": "cyan",
}
_MAX_LISTED_CHANGES = 10


# --- output ------------------------------------------------------------------------


def _error(message: str) -> None:
    click.secho(f"Error: {message}", fg="red", err=True)


def _warn(message: str) -> None:
    click.secho(f"warning: {message}", fg="yellow", err=True)


def _console() -> Console:
    # Created per call so it writes to whatever sys.stdout is now (CliRunner swaps it).
    console = Console(highlight=False)
    if not console.is_terminal:
        # Piped output: do not squeeze the table into 80 columns and cut job ids.
        console.width = max(console.width, 200)
    return console


def _table(columns: tuple[str, ...], title: str | None = None) -> Table:
    """A borderless table with upper-case headers, as every `tp` listing prints."""
    table = Table(title=title, title_justify="left", box=None, pad_edge=False)
    for column in columns:
        table.add_column(column.upper(), no_wrap=True)
    return table


def _state_text(state: object) -> str:
    text = str(state) if state is not None else "-"
    style = _STATE_STYLE.get(text)
    return f"[{style}]{text}[/{style}]" if style else text


def _value(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


# --- the group ---------------------------------------------------------------------


class TpGroup(click.RichGroup):
    """Shows a TpError as one red `Error: <message>` line instead of a traceback or a
    usage panel: these are answers from the server or the repository, not misuse."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TpError as exc:
            _error(exc.message)
            raise Exit(exc.exit_code) from None


def _client() -> ApiClient:
    return ApiClient(load_credentials())


def _check_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not is_valid_experiment_name(value):
        raise click.BadParameter(EXPERIMENT_NAME_RULE)
    return value


def _parse_sets(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> dict[str, str]:
    # Values stay strings: the custom recipe declares no parameters, so there is no
    # schema to coerce against; a recipe that has one is checked by the server.
    hyperparams: dict[str, str] = {}
    for raw in values:
        key, sep, value = raw.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {raw!r}")
        hyperparams[key.strip()] = value
    return hyperparams


@click.group(cls=TpGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tp")
def cli() -> None:
    """TunePlane: scaffold experiments, submit them as GPU jobs, follow their logs."""


# --- login -------------------------------------------------------------------------


@cli.command()
@click.option(
    "--server",
    required=True,
    metavar="URL",
    help="The TunePlane server, e.g. https://tuneplane.example.",
)
@click.option(
    "--token",
    required=True,
    prompt="API token",
    hide_input=True,
    metavar="T",
    help="Your API token (tpu_...; manage.py create_api_token USER). Prompted for when omitted.",
)
def login(server: str, token: str) -> None:
    """Check the token against the server and store both for later commands."""
    creds = Credentials(server=normalise_server(server), token=token.strip())
    me = ApiClient(creds).get("api/v1/me")
    username = me.get("username") if isinstance(me, dict) else None
    if not isinstance(username, str):
        raise TpError(
            f"the server at {creds.server} did not say who you are; is it a TunePlane server?"
        )
    save_credentials(creds)
    click.echo(f"Logged in to {creds.server} as {username}")
    for var in (ENV_SERVER, ENV_TOKEN):
        if os.environ.get(var):
            _warn(f"{var} is set and overrides the stored login")


# --- new ---------------------------------------------------------------------------


@cli.command()
@click.argument("name", callback=_check_name)
@click.option("--method", required=True, metavar="NS/NAME", help="The recipe, e.g. custom/custom.")
@click.option(
    "--force", is_flag=True, help="Overwrite the scaffold files of an existing experiment."
)
def new(name: str, method: str, force: bool) -> None:
    """Scaffold experiments/NAME/ for a recipe."""
    if not RECIPE_NAME_RE.fullmatch(method):
        raise click.BadParameter(
            f"expected NAMESPACE/NAME such as custom/custom, got {method!r}", param_hint="--method"
        )
    root = repo_root(Path.cwd())
    # Refuse before asking the server, so the answer does not depend on being logged in.
    ensure_can_create(root, name, force=force)
    namespace, recipe_name = method.split("/", 1)
    recipe = _client().get(f"api/v1/recipes/{path_part(namespace)}/{path_part(recipe_name)}")
    made = scaffold_experiment(root, name, recipe, force=force)
    click.echo(f"Created {made.directory.relative_to(root)}/ in {root}:")
    for path in made.files:
        click.echo(f"  {path.relative_to(root)}")
    entry = made.files[0].relative_to(root)
    flags = " --observability-url URL" if recipe.get("observability") == "external" else ""
    click.echo("\nNext steps:")
    click.echo(f"  1. Edit {entry}: replace its `exit 1` with your launch command.")
    click.echo(f'  2. git add {made.directory.relative_to(root)} && git commit -m "{name}"')
    click.echo(f"  3. tp submit {name} --profile PROFILE --image IMAGE{flags}")


# --- validate / submit / export / eval ---------------------------------------------


@dataclass(frozen=True)
class JobOptions:
    profile: str | None
    image: str | None
    observability_url: str | None
    hyperparams: dict[str, str]
    model: str | None
    train_data: str | None
    environment: str | None = None


F = TypeVar("F", bound=Callable[..., Any])


def _job_options(required: bool) -> Callable[[F], F]:
    """The request options shared by validate, submit, export and eval."""
    options = [
        click.option("--profile", required=required, metavar="P", help="GPU profile, e.g. h200:8."),
        click.option(
            "--image",
            required=required,
            metavar="I",
            help="Container image (pin @sha256: in production).",
        ),
        click.option(
            "--observability-url",
            metavar="U",
            help="Your tracking URL; required by external recipes.",
        ),
        click.option(
            "--set",
            "hyperparams",
            multiple=True,
            metavar="K=V",
            callback=_parse_sets,
            help="A hyperparameter, kept as a string; repeatable.",
        ),
        click.option("--model", metavar="M", help="Model binding (verl, TRL); custom ignores it."),
        click.option(
            "--train-data",
            metavar="D",
            help="Training data binding (verl, TRL); custom ignores it.",
        ),
        click.option(
            "--env",
            "environment",
            metavar="OWNER/NAME@VERSION",
            help="An agent environment; the job sees the split its operation implies.",
        ),
    ]

    def decorate(func: F) -> F:
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


def _package(name: str, operation: str) -> Package:
    pkg = build_package(Path.cwd(), name, operation)
    if pkg.uncommitted:
        _warn(UNCOMMITTED_WARNING + ":")
        for line in pkg.uncommitted[:_MAX_LISTED_CHANGES]:
            click.secho(f"  {line}", fg="yellow", err=True)
        if len(pkg.uncommitted) > _MAX_LISTED_CHANGES:
            click.secho(
                f"  ... and {len(pkg.uncommitted) - _MAX_LISTED_CHANGES} more",
                fg="yellow",
                err=True,
            )
    return pkg


def _request(pkg: Package, operation: str, opts: JobOptions) -> dict[str, Any]:
    lock = pkg.lock
    request: dict[str, Any] = {
        "experiment": pkg.experiment,
        "operation": operation,
        "recipe": lock["name"],
        "hyperparams": opts.hyperparams,
        "recipe_lock": {key: lock.get(key) for key in ("name", "version", "digest")},
    }
    # Unset options are left out rather than sent as null: the server decides what a
    # recipe requires and words the refusal (e.g. the custom observability URL).
    optional = {
        "profile": opts.profile,
        "image": opts.image,
        "observability_url": opts.observability_url,
        "model": opts.model,
        "train_data": opts.train_data,
        "environment": opts.environment,
    }
    request.update({key: value for key, value in optional.items() if value is not None})
    return request


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    if isinstance(value, dict) and value:
        rows: list[tuple[str, str]] = []
        for key in value:
            rows.extend(_flatten(value[key], f"{prefix}.{key}" if prefix else str(key)))
        return rows
    return [(prefix, _value(value))]


def _validate(name: str, operation: str, opts: JobOptions) -> None:
    pkg = _package(name, operation)
    check_hyperparams(_client(), pkg.lock, opts.hyperparams)
    request = _request(pkg, operation, opts)
    answer = _client().post_package(
        "api/v1/jobs/validate", json.dumps(request), pkg.data, pkg.filename
    )
    click.secho("ok", fg="green")
    for warning in answer.get("warnings") or []:
        _warn(str(warning))
    spec = answer.get("spec") or {}
    if spec:
        click.echo("spec:")
        for key, text in _flatten(spec):
            click.echo(f"  {key}: {text}")


def _options(**kwargs: Any) -> JobOptions:
    return JobOptions(
        profile=kwargs["profile"],
        image=kwargs["image"],
        observability_url=kwargs["observability_url"],
        hyperparams=kwargs["hyperparams"],
        model=kwargs["model"],
        train_data=kwargs["train_data"],
        environment=kwargs.get("environment"),
    )


@cli.command()
@click.argument("name", callback=_check_name)
@_job_options(required=False)
def validate(name: str, **kwargs: Any) -> None:
    """Check the committed experiment with the server without starting a job."""
    _validate(name, "train", _options(**kwargs))


@cli.command()
@click.argument("name", callback=_check_name)
@_job_options(required=True)
def submit(name: str, **kwargs: Any) -> None:
    """Package the committed experiments/NAME and submit it as a training job."""
    opts = _options(**kwargs)
    pkg = _package(name, "train")
    check_hyperparams(_client(), pkg.lock, opts.hyperparams)
    request = _request(pkg, "train", opts)
    job = _client().post_package("api/v1/jobs", json.dumps(request), pkg.data, pkg.filename)
    job_id = job.get("id")
    click.echo(f"Submitted job {job_id}: {job.get('state')}")
    click.echo(f"  package {pkg.sha256} ({len(pkg.data)} bytes) from commit {pkg.commit[:12]}")
    click.echo(f"  console {job.get('url')}")
    click.echo(f"Follow it: tp job logs {job_id} --follow")


@cli.command()
@click.argument("name", callback=_check_name)
@_job_options(required=False)
def export(name: str, **kwargs: Any) -> None:
    """Validate an export of the experiment (refused for custom/custom)."""
    _validate(name, "export", _options(**kwargs))


@cli.command(name="eval")
@click.argument("name", callback=_check_name)
@_job_options(required=False)
def eval_(name: str, **kwargs: Any) -> None:
    """Validate an evaluation of the experiment (refused for custom/custom)."""
    _validate(name, "eval", _options(**kwargs))


# --- job ---------------------------------------------------------------------------


@cli.group()
def job() -> None:
    """List, inspect, cancel and follow jobs."""


@job.command(name="ls")
@click.option("--state", type=click.Choice(JOB_STATES), help="Only jobs in this state.")
def job_ls(state: str | None) -> None:
    """List your jobs, newest first."""
    answer = _client().get("api/v1/jobs", params={"state": state} if state else None)
    jobs = answer.get("results") or []
    if not jobs:
        click.echo("no jobs" + (f" in state {state}" if state else ""))
        return
    table = _table(("id", "state", "recipe", "experiment", "created"))
    for item in jobs:
        table.add_row(
            _value(item.get("id")),
            _state_text(item.get("state")),
            _value(item.get("recipe")),
            _value(item.get("experiment")),
            _value(item.get("created_at")),
        )
    _console().print(table)


@job.command(name="show")
@click.argument("job_id", metavar="JOB")
@click.option("--json", "as_json", is_flag=True, help="Print the job as the server returned it.")
def job_show(job_id: str, as_json: bool) -> None:
    """Show a job: fields, attempts, package and console URL."""
    item = _client().get(f"api/v1/jobs/{path_part(job_id)}")
    if as_json:
        click.echo(json.dumps(item, indent=2))
        return
    package = item.get("package") or {}
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold")
    fields.add_column()
    for label, text in (
        ("id", _value(item.get("id"))),
        ("state", _state_text(item.get("state"))),
        ("exit code", _value(item.get("exit_code"))),
        ("owner", _value(item.get("owner"))),
        ("experiment", _value(item.get("experiment"))),
        ("recipe", _value(item.get("recipe"))),
        ("operation", _value(item.get("operation"))),
        ("created", _value(item.get("created_at"))),
        ("started", _value(item.get("started_at"))),
        ("finished", _value(item.get("finished_at"))),
        ("package sha256", _value(package.get("sha256"))),
        ("package size", _value(package.get("size"))),
        ("url", _value(item.get("url"))),
    ):
        fields.add_row(label, text)
    console = _console()
    console.print(fields)
    attempts = item.get("attempts") or []
    if attempts:
        table = _table(("#", "state", "executor", "exit code", "started", "finished"), title="attempts")
        for attempt in attempts:
            table.add_row(
                _value(attempt.get("number")),
                _state_text(attempt.get("state")),
                _value(attempt.get("executor")),
                _value(attempt.get("exit_code")),
                _value(attempt.get("started_at")),
                _value(attempt.get("finished_at")),
            )
        console.print()
        console.print(table)


@job.command(name="cancel")
@click.argument("job_id", metavar="JOB")
def job_cancel(job_id: str) -> None:
    """Cancel a job that has not finished."""
    item = _client().post(f"api/v1/jobs/{path_part(job_id)}/cancel")
    click.echo(f"job {item.get('id', job_id)}: {item.get('state')}")


def _print_line(line: dict[str, Any]) -> None:
    text = str(line.get("text", ""))
    click.echo(text, err=line.get("stream") == "stderr", nl=not text.endswith("\n"))


@job.command(name="logs")
@click.argument("job_id", metavar="JOB")
@click.option(
    "--follow",
    "-f",
    is_flag=True,
    help="Stream new lines until the job ends; exit 0 only if it succeeded.",
)
def job_logs(job_id: str, follow: bool) -> None:
    """Print a job's log lines (stderr lines go to stderr)."""
    client = _client()
    if not follow:
        page_logs(client, job_id, _print_line)
        return

    def on_retry(reason: str, delay: float, failures: int) -> None:
        # A single quick reconnect after a dropped stream is routine; say nothing.
        if failures > 1:
            _warn(f"{reason}; reconnecting to {client.server} in {delay:.1f} s")

    result = follow_logs(client, job_id, _print_line, on_retry=on_retry)
    state, exit_code = result.state, result.exit_code
    if state is None:  # `end` without a `state` event: ask for the job itself
        item = client.get(f"api/v1/jobs/{path_part(job_id)}")
        state, exit_code = item.get("state"), item.get("exit_code")
    succeeded = state == "succeeded"
    click.secho(
        f"job {job_id} finished: {state} (exit code {_value(exit_code)})",
        fg="green" if succeeded else "red",
        err=True,
    )
    raise Exit(0 if succeeded else 1)


# --- env, plugin (tp_cli/env.py) ------------------------------------------------------

from tp_cli.env import env_group, plugin_group  # noqa: E402

cli.add_command(env_group)
cli.add_command(plugin_group)
