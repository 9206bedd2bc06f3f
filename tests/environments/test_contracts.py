"""The one parser: manifest.json v1, tasks.jsonl, plugin.yaml, bundles. No database."""

from __future__ import annotations

import copy
import io
import json
import os
import tarfile
from pathlib import Path

import jsonschema
import pytest
from tuneplane.contracts import environment as C
from tuneplane.contracts.environment_bundle import build_archive, collect_directory, read_archive
from tuneplane.contracts.environment_schema import SchemaShapeError, check_json_schema

ROOT = Path(__file__).resolve().parents[2]
CALCULATOR = ROOT / "fixtures" / "environments" / "calculator"
MANIFEST = json.loads((CALCULATOR / "manifest.json").read_text())


def manifest(**changes) -> dict:
    data = copy.deepcopy(MANIFEST)
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def refusal(data) -> str:
    with pytest.raises(C.ContractError) as info:
        C.parse_manifest(json.dumps(data) if isinstance(data, dict) else data)
    return info.value.message


def test_the_spec_calculator_example_parses():
    m = C.parse_manifest((CALCULATOR / "manifest.json").read_bytes())
    assert (m.protocol, m.deployment, m.verifier_kind, m.verifier_ref) == (
        "openenv",
        "local",
        "rubric",
        "alice/arithmetic-correctness",
    )
    assert [t.name for t in m.tools] == ["calculator"]
    assert m.sandbox_required is False and m.category == "other" and m.harness is None
    tasks = C.parse_tasks((CALCULATOR / "tasks.jsonl").read_bytes())
    assert tasks.counts == {"train": 3, "eval": 2} and tasks.splits == ["train", "eval"]


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (None, 'manifest.json: schema is required; write "schema": "tuneplane/environment/v1"'),
        (
            "v1",
            'manifest.json: schema "v1" is no longer accepted; write "schema": "tuneplane/environment/v1"',
        ),
        (
            1,
            'manifest.json: schema 1 is no longer accepted; write "schema": "tuneplane/environment/v1"',
        ),
        (
            "tuneplane/environment/v0",
            'manifest.json: schema "tuneplane/environment/v0" is no longer accepted; write "schema": '
            '"tuneplane/environment/v1"',
        ),
    ],
)
def test_it_refuses_older_schemas_saying_what_to_write(schema, message):
    assert refusal(manifest(schema=schema)) == message


@pytest.mark.parametrize(
    ("protocol", "fixed"),
    [
        ("openenv-local", ("openenv", "local")),
        ("openenv-remote", ("openenv", "remote")),
        ("openenv+container", ("openenv", "container")),
        ("nemo-gym-local", ("nemo-gym", "local")),
        ("nemo_gym_local", ("nemo-gym", "local")),
    ],
)
def test_it_refuses_former_compound_protocol_names(protocol, fixed):
    assert refusal(manifest(protocol=protocol)) == (
        f"manifest.json: protocol {protocol!r} is a former compound name; write "
        f'"protocol": "{fixed[0]}", "deployment": "{fixed[1]}"'
    )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"protocol": "gym"},
            "manifest.json: protocol must be one of nemo-gym, openenv, not 'gym'",
        ),
        ({"protocol": 3}, "manifest.json: protocol must be a string, not a number"),
        (
            {"deployment": None},
            "manifest.json: deployment is required: one of local, remote, container",
        ),
        (
            {"deployment": "cloud"},
            "manifest.json: deployment must be one of local, remote, container, not 'cloud'",
        ),
        (
            {"verifier": None},
            'manifest.json: verifier is required: {"kind": "rubric|plugin|endpoint", "ref": "..."}',
        ),
        (
            {"verifier": {"kind": "vibes", "ref": "x"}},
            "manifest.json: verifier.kind must be one of rubric, plugin, endpoint, not 'vibes'",
        ),
        ({"verifier": {"kind": "rubric"}}, "manifest.json: verifier.ref is required"),
        ({"verifier": "rubric"}, "manifest.json: verifier must be an object, not a string"),
        (
            {"sandbox": {"required": "yes"}},
            "manifest.json: sandbox.required must be true or false, not a string",
        ),
        ({"tools": {"name": "x"}}, "manifest.json: tools must be an array, not an object"),
        (
            {"tools": [{"name": "calc", "endpoint": "/t"}]},
            "manifest.json: tools[0].schema is required: a JSON Schema for the arguments",
        ),
        (
            {"tools": [{"name": "calc", "schema": {}}]},
            "manifest.json: tools[0].endpoint is required",
        ),
        ({"tools": [{"endpoint": "/t", "schema": {}}]}, "manifest.json: tools[0].name is required"),
        (
            {"tools": [{"name": "calc", "endpoint": "/t", "schema": {"type": "strin"}}]},
            "manifest.json: tools[0].schema.type is not a valid JSON Schema: 'strin' is not a JSON Schema type "
            "(one of array, boolean, integer, null, number, object, string)",
        ),
        (
            {
                "tools": [
                    {
                        "name": "calc",
                        "endpoint": "/t",
                        "schema": {"type": "object", "properties": {"x": {"minLength": -1}}},
                    }
                ]
            },
            "manifest.json: tools[0].schema.properties.x.minLength is not a valid JSON Schema: "
            "must be a non-negative integer, not -1",
        ),
        (
            {"tools": [{"name": "calc", "endpoint": "/t", "schema": {"required": "x"}}]},
            "manifest.json: tools[0].schema.required is not a valid JSON Schema: must be an array of strings",
        ),
        (
            {
                "tools": [
                    {"name": "a", "endpoint": "/a", "schema": {}},
                    {"name": "a", "endpoint": "/b", "schema": {}},
                ]
            },
            "manifest.json: tools[1].name 'a' is declared twice",
        ),
        (
            {"image": "ghcr.io/acme/env:1"},
            "manifest.json: image is only valid with deployment: container",
        ),
        (
            {"endpoint": "http://envbox:8080"},
            "manifest.json: endpoint is only valid with deployment: remote",
        ),
        ({"category": 7}, "manifest.json: category must be a string, not a number"),
    ],
)
def test_it_refuses_bad_manifests_naming_the_field(changes, message):
    assert refusal(manifest(**changes)) == message


def test_nemo_gym_needs_local_a_harness_and_a_known_category():
    harness = {
        "plugin": "alice/calculator-harness",
        "version": "1.0.0",
        "entrypoint": "harness:CalculatorResources",
    }
    assert refusal(
        manifest(protocol="nemo-gym", deployment="remote", harness=harness, category="math")
    ) == ('manifest.json: protocol nemo-gym supports only "deployment": "local", not \'remote\'')
    assert refusal(manifest(protocol="nemo-gym", category="math")) == C.HARNESS_REQUIRED
    assert refusal(manifest(protocol="nemo-gym", harness=harness)) == (
        "manifest.json: category is required for nemo-gym: one of " + ", ".join(C.CATEGORIES)
    )
    assert refusal(manifest(protocol="nemo-gym", harness=harness, category="maths")) == (
        "manifest.json: category must be one of " + ", ".join(C.CATEGORIES) + ", not 'maths'"
    )
    bad = dict(harness, entrypoint="harness.CalculatorResources")
    assert refusal(manifest(protocol="nemo-gym", harness=bad, category="math")) == (
        "manifest.json: harness.entrypoint must be module:ClassName, not 'harness.CalculatorResources'"
    )
    bad = dict(harness, digest="md5:abc")
    assert refusal(manifest(protocol="nemo-gym", harness=bad, category="math")) == (
        "manifest.json: harness.digest must be empty or sha256:<64 hex digits>, not 'md5:abc'"
    )
    ok = C.parse_manifest(
        json.dumps(manifest(protocol="nemo-gym", harness=harness, category="math"))
    )
    assert (
        ok.harness is not None
        and ok.harness.class_name == "CalculatorResources"
        and ok.category == "math"
    )


def test_container_and_remote_rules():
    base = manifest(deployment="container")
    assert refusal(base) == (
        "manifest.json: image is required for deployment: container (the OCI image to run beside the job)"
    )
    assert C.parse_manifest(json.dumps(dict(base, image="ghcr.io/acme/env:1"))).image_port == 8900
    assert (
        C.parse_manifest(
            json.dumps(dict(base, image="ghcr.io/acme/env:1", image_port=8000))
        ).image_port
        == 8000
    )
    assert refusal(dict(base, image="ghcr.io/acme/env:1", image_port="8000")) == (
        "manifest.json: image_port must be a port number 1-65535, not '8000'"
    )
    assert refusal(dict(base, image="ghcr.io/acme/env:1", image_port=70000)) == (
        "manifest.json: image_port must be a port number 1-65535, not 70000"
    )
    assert (
        refusal(manifest(image_port=8000))
        == "manifest.json: image_port is only valid with deployment: container"
    )
    remote = manifest(deployment="remote")
    assert refusal(dict(remote, endpoint="http://a:1", fleet="gpu-a")) == C.ENDPOINT_AND_FLEET
    assert (
        refusal(dict(remote, endpoint="ftp://a"))
        == "manifest.json: endpoint must be an http(s) URL, not 'ftp://a'"
    )
    assert (
        refusal(manifest(fleet="gpu-a"))
        == "manifest.json: fleet is only valid with deployment: remote"
    )
    assert C.parse_manifest(json.dumps(dict(remote, fleet="gpu-a"))).fleet == "gpu-a"


def test_manifest_that_is_not_json_or_too_big():
    assert refusal(b"{nope").startswith("manifest.json is not valid JSON: ")
    assert refusal(b"[]") == "manifest.json must be a JSON object"
    assert refusal(b" " * (C.MANIFEST_MAX_BYTES + 1)) == (
        f"manifest.json is {C.MANIFEST_MAX_BYTES + 1} bytes; the limit is {C.MANIFEST_MAX_BYTES}"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b'{"prompt": "a", "reference": "1"}\n{"prompt": "b", "reference": "2", "split": "test"}\n',
            "tasks.jsonl line 2: field 'split' must be 'train' or 'eval', not \"test\"",
        ),
        (b'{"reference": "1"}\n', "tasks.jsonl line 1: field 'prompt' is required"),
        (b'{"prompt": "a"}\n', "tasks.jsonl line 1: field 'reference' is required"),
        (
            b'{"prompt": "", "reference": "1"}\n',
            "tasks.jsonl line 1: field 'prompt' must not be empty",
        ),
        (
            b'{"prompt": ["a"], "reference": "1"}\n',
            "tasks.jsonl line 1: field 'prompt' must be a string, not an array",
        ),
        (
            b'{"prompt": "a", "reference": {"x": 1}}\n',
            "tasks.jsonl line 1: field 'reference' must be a string or a number, not an object",
        ),
        (
            b'\n\n{"prompt": "a", "reference": "1"}\n["x"]\n',
            "tasks.jsonl line 4: must be a JSON object, not an array",
        ),
        (b"", "tasks.jsonl has no tasks"),
    ],
)
def test_tasks_errors_name_the_file_the_line_and_the_field(content, message):
    with pytest.raises(C.ContractError) as info:
        C.parse_tasks(content)
    assert info.value.message == message


def test_a_line_that_is_not_json_names_its_number():
    with pytest.raises(C.ContractError) as info:
        C.parse_tasks(b'{"prompt": "a", "reference": 1}\n{oops\n')
    assert info.value.message.startswith("tasks.jsonl line 2: is not valid JSON (")


def test_split_defaults_to_train_and_split_tasks_keeps_only_one_half():
    data = (CALCULATOR / "tasks.jsonl").read_bytes() + b'{"prompt": "p", "reference": 4}\n'
    assert C.parse_tasks(data).counts == {"train": 4, "eval": 2}
    eval_only = C.split_tasks(data, "eval")
    assert [t.split for t in C.iter_tasks(eval_only)] == ["eval", "eval"]
    assert b"17% of 340" not in eval_only and b"Celsius" in eval_only
    assert b"Celsius" not in C.split_tasks(data, "train")


def test_the_operation_implies_the_split():
    assert C.split_for_operation("train") == "train"
    assert C.split_for_operation("eval") == "eval"
    with pytest.raises(
        C.ContractError, match="operation 'export' does not run an environment; drop --env"
    ):
        C.split_for_operation("export")


def test_tasks_jsonl_is_required_only_for_local():
    with pytest.raises(C.ContractError) as info:
        C.check_bundle_files({"manifest.json": (CALCULATOR / "manifest.json").read_bytes()})
    assert info.value.message == C.TASKS_REQUIRED
    remote = json.dumps(manifest(deployment="remote", endpoint="http://envbox:8080")).encode()
    assert C.check_bundle_files({"manifest.json": remote}).tasks is None
    with pytest.raises(
        C.ContractError, match="^manifest.json is missing from the environment directory$"
    ):
        C.check_bundle_files({"tasks.jsonl": b""})


# JSON Schema: our metaschema check agrees with jsonschema's ------------------------------

GOOD_SCHEMAS = [
    {},
    True,
    False,
    {"type": "string"},
    {"type": ["string", "null"]},
    {
        "type": "object",
        "properties": {"a": {"type": "integer", "minimum": 0}},
        "required": ["a"],
        "additionalProperties": False,
    },
    {"type": "array", "items": {"type": "number"}, "minItems": 1, "uniqueItems": True},
    {"anyOf": [{"type": "string"}, {"type": "number"}]},
    {"enum": [1, "a", None]},
    {"const": 3},
    {"pattern": "^[a-z]+$"},
    {"$defs": {"x": {"type": "string"}}, "$ref": "#/$defs/x"},
    {"x-custom": "annotation"},
    {"maxLength": 2.0},
    {"dependentRequired": {"a": ["b"]}},
    {"patternProperties": {"^x": {"type": "string"}}},
    {"not": {"type": "null"}},
]
BAD_SCHEMAS = [
    [],
    "string",
    3,
    {"type": "strin"},
    {"type": []},
    {"type": ["string", "string"]},
    {"properties": []},
    {"properties": {"a": 3}},
    {"required": "a"},
    {"required": ["a", "a"]},
    {"minLength": -1},
    {"minLength": 1.5},
    {"maxItems": "3"},
    {"anyOf": []},
    {"anyOf": {}},
    {"items": 3},
    {"enum": "abc"},
    {"pattern": "("},
    {"multipleOf": 0},
    {"minimum": "0"},
    {"uniqueItems": "yes"},
    {"additionalProperties": "no"},
    {"patternProperties": {"(": {}}},
    {"$ref": 3},
    {"dependentRequired": {"a": "b"}},
    {"not": []},
]


@pytest.mark.parametrize("schema", GOOD_SCHEMAS)
def test_valid_json_schemas_pass_both_checks(schema):
    jsonschema.Draft202012Validator.check_schema(schema)
    check_json_schema(schema)


@pytest.mark.parametrize("schema", BAD_SCHEMAS)
def test_invalid_json_schemas_fail_both_checks(schema):
    with pytest.raises(jsonschema.SchemaError):
        jsonschema.Draft202012Validator.check_schema(
            schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
        )
    with pytest.raises(SchemaShapeError):
        check_json_schema(schema)


# plugin.yaml -----------------------------------------------------------------------------

PLUGIN_YAML = """schema: tuneplane/plugin/v1
name: calculator-harness
version: 1.0.0
capability: environment
entrypoint: harness:CalculatorResources
"""


def test_plugin_yaml_parses_and_refuses_what_it_must():
    plugin = C.parse_plugin(PLUGIN_YAML)
    assert (plugin.name, plugin.version, plugin.capability, plugin.entrypoint) == (
        "calculator-harness",
        "1.0.0",
        "environment",
        "harness:CalculatorResources",
    )
    assert C.parse_plugin(PLUGIN_YAML.replace("1.0.0", "2.0")).version == "2.0"
    cases = {
        PLUGIN_YAML.replace(
            "tuneplane/plugin/v1", "v1"
        ): "plugin.yaml: schema must be tuneplane/plugin/v1, not 'v1'",
        PLUGIN_YAML.replace(
            "capability: environment", "capability: trainer"
        ): "plugin.yaml: capability must be environment, not 'trainer'",
        PLUGIN_YAML.replace(
            "harness:CalculatorResources", "harness"
        ): "plugin.yaml: entrypoint must be module:ClassName, not 'harness'",
        PLUGIN_YAML.replace("calculator-harness", "Calc Harness"): "plugin.yaml: name must be "
        + C.NAME_RULE
        + ", not 'Calc Harness'",
        "- a\n- b\n": "plugin.yaml must be a mapping of schema, name, version, capability, entrypoint",
    }
    for text, message in cases.items():
        with pytest.raises(C.ContractError) as info:
            C.parse_plugin(text)
        assert info.value.message == message
    with pytest.raises(C.ContractError, match="^plugin.yaml is not valid YAML: "):
        C.parse_plugin("name: [unclosed\n")


# references ------------------------------------------------------------------------------


def test_references():
    assert C.parse_reference("alice/calculator-tasks@1.0.0") == C.Reference(
        "alice", "calculator-tasks", "1.0.0"
    )
    assert C.parse_reference("calculator-tasks") == C.Reference(None, "calculator-tasks", None)
    assert C.parse_reference("a@b.com/calc@1") == C.Reference("a@b.com", "calc", "1")
    assert C.parse_reference("a@b.com/calc") == C.Reference("a@b.com", "calc", None)
    for bad in (
        "alice/../x@1",
        "a/b/c@1",
        "alice/Calc@1",
        "alice/calc@",
        "/calc@1",
        "alice/calc@1 2",
    ):
        with pytest.raises(C.ContractError):
            C.parse_reference(bad)
    with pytest.raises(C.ContractError, match="needs a version"):
        C.parse_reference("alice/calc", require_version=True)


# bundles ---------------------------------------------------------------------------------


def test_collect_directory_refuses_symlinks_even_inside(tmp_path):
    env = tmp_path / "env"
    env.mkdir()
    (env / "manifest.json").write_text("{}")
    os.symlink(env / "manifest.json", env / "copy.json")
    with pytest.raises(C.ContractError) as info:
        collect_directory(env)
    assert info.value.message == "copy.json is a symlink; symlinks are refused in a bundle"


def test_collect_directory_refuses_a_symlinked_directory_out_of_the_tree(tmp_path):
    env = tmp_path / "env"
    env.mkdir()
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "key").write_text("x")
    os.symlink(tmp_path / "secrets", env / "data")
    with pytest.raises(C.ContractError) as info:
        collect_directory(env)
    assert info.value.message == "data is a symlink; symlinks are refused in a bundle"


def test_collect_directory_skips_git_and_reads_everything_else(tmp_path):
    env = tmp_path / "env"
    (env / "sub").mkdir(parents=True)
    (env / ".git").mkdir()
    (env / ".git" / "HEAD").write_text("ref")
    (env / "manifest.json").write_text("{}")
    (env / "sub" / "x.py").write_text("print(1)")
    assert collect_directory(env) == {"manifest.json": b"{}", "sub/x.py": b"print(1)"}


def _tar(entries: list[tarfile.TarInfo], data: dict[str, bytes] | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info in entries:
            payload = (data or {}).get(info.name)
            tar.addfile(info, io.BytesIO(payload) if payload is not None else None)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("name", "kind", "message"),
    [
        ("../evil", tarfile.REGTYPE, "bundle: path '../evil' escapes the directory"),
        ("/etc/passwd", tarfile.REGTYPE, "bundle: path '/etc/passwd' escapes the directory"),
        ("a/../../evil", tarfile.REGTYPE, "bundle: path 'a/../../evil' escapes the directory"),
        ("link", tarfile.SYMTYPE, "bundle: link is a link; links are refused in a bundle"),
        ("hard", tarfile.LNKTYPE, "bundle: hard is a link; links are refused in a bundle"),
        ("fifo", tarfile.FIFOTYPE, "bundle: fifo is not a regular file"),
    ],
)
def test_read_archive_refuses_unsafe_members(name, kind, message):
    info = tarfile.TarInfo(name)
    info.type = kind
    if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
        info.linkname = "/etc/passwd"
    with pytest.raises(C.ContractError) as info_exc:
        read_archive(_tar([info]))
    assert info_exc.value.message == message


def test_archives_round_trip_deterministically():
    files = {"manifest.json": b"{}", "tasks.jsonl": b"x\n", "a/b.py": b""}
    assert build_archive(files) == build_archive(dict(reversed(list(files.items()))))
    assert read_archive(build_archive(files)) == files
    with pytest.raises(C.ContractError) as info:
        read_archive(b"not a tar")
    assert (
        info.value.message == "bundle is not a readable archive: send a gzip'd tar of the directory"
    )


def test_bundle_digest_depends_on_paths_and_contents_only():
    a = C.bundle_digest([("x", "1" * 64), ("y", "2" * 64)])
    assert a == C.bundle_digest([("y", "2" * 64), ("x", "1" * 64)])
    assert a != C.bundle_digest([("x", "2" * 64), ("y", "1" * 64)])
    assert C.DIGEST_RE.match(a)
