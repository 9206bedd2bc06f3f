"""`tp job ls | show | cancel`."""

from __future__ import annotations

import json

from .api_stub import ApiStub, make_job
from .tp_testlib import run_tp


def test_job_ls_shows_a_table_of_jobs(logged_in: ApiStub) -> None:
    logged_in.jobs["exp-a-111111"] = make_job("exp-a-111111", state="succeeded", experiment="exp-a")
    logged_in.jobs["exp-b-222222"] = make_job("exp-b-222222", state="running", experiment="exp-b")

    result = run_tp("job", "ls")

    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.strip().splitlines()
    assert header.split() == ["ID", "STATE", "RECIPE", "EXPERIMENT", "CREATED"]
    assert [row.split() for row in rows] == [
        ["exp-b-222222", "running", "custom/custom", "exp-b", "2025-01-02T03:04:05Z"],
        ["exp-a-111111", "succeeded", "custom/custom", "exp-a", "2025-01-02T03:04:05Z"],
    ]


def test_job_ls_filters_by_state(logged_in: ApiStub) -> None:
    logged_in.jobs["exp-a-111111"] = make_job("exp-a-111111", state="succeeded")
    logged_in.jobs["exp-b-222222"] = make_job("exp-b-222222", state="running")

    result = run_tp("job", "ls", "--state", "running")

    assert result.exit_code == 0, result.output
    assert logged_in.calls("GET", "/api/v1/jobs")[0].query == {"state": ["running"]}
    assert "exp-b-222222" in result.stdout
    assert "exp-a-111111" not in result.stdout


def test_job_ls_refuses_an_unknown_state(logged_in: ApiStub) -> None:
    result = run_tp("job", "ls", "--state", "exploded")

    assert result.exit_code == 2
    assert logged_in.requests == []


def test_job_show_prints_fields_attempts_package_and_url(logged_in: ApiStub) -> None:
    job = make_job("my-custom-3f9a1c", state="failed", exit_code=3)
    job["attempts"][0].update(state="failed", exit_code=3)
    logged_in.jobs[job["id"]] = job

    result = run_tp("job", "show", "my-custom-3f9a1c")

    assert result.exit_code == 0, result.output
    lines = [line.split() for line in result.stdout.splitlines()]
    assert ["state", "failed"] in lines
    assert ["exit", "code", "3"] in lines
    assert ["package", "sha256", "cd" * 32] in lines
    assert ["url", "http://console.example/jobs/my-custom-3f9a1c"] in lines
    assert ["1", "failed", "local", "3", "-", "-"] in lines  # the attempts table


def test_job_show_json_prints_the_raw_job(logged_in: ApiStub) -> None:
    logged_in.jobs["my-custom-3f9a1c"] = make_job("my-custom-3f9a1c")

    result = run_tp("job", "show", "my-custom-3f9a1c", "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == logged_in.jobs["my-custom-3f9a1c"]


def test_job_show_relays_not_found(logged_in: ApiStub) -> None:
    result = run_tp("job", "show", "nope")

    assert result.exit_code == 1
    assert result.stderr == "Error: no job nope\n"


def test_job_ids_cannot_reach_other_routes(logged_in: ApiStub) -> None:
    run_tp("job", "show", "../me")

    (call,) = logged_in.requests
    assert call.path == "/api/v1/jobs/..%2Fme"


def test_job_cancel_cancels(logged_in: ApiStub) -> None:
    logged_in.jobs["my-custom-3f9a1c"] = make_job("my-custom-3f9a1c", state="running")

    result = run_tp("job", "cancel", "my-custom-3f9a1c")

    assert result.exit_code == 0, result.output
    assert result.stdout == "job my-custom-3f9a1c: cancelled\n"
    assert len(logged_in.calls("POST", "/api/v1/jobs/my-custom-3f9a1c/cancel")) == 1


def test_job_cancel_of_a_finished_job_relays_the_conflict(logged_in: ApiStub) -> None:
    logged_in.jobs["my-custom-3f9a1c"] = make_job("my-custom-3f9a1c", state="succeeded")

    result = run_tp("job", "cancel", "my-custom-3f9a1c")

    assert result.exit_code == 1
    assert result.stderr == "Error: job my-custom-3f9a1c already finished (succeeded)\n"
    assert logged_in.jobs["my-custom-3f9a1c"]["state"] == "succeeded"
