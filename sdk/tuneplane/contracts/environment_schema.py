"""Checking that a tool's argument schema is itself a JSON Schema (draft 2020-12).

Why not `jsonschema`: this module is part of the `tuneplane` wheel, which goes into
training images and must stay standard-library only (sdk/pyproject.toml). The check a
manifest needs is `Draft202012Validator.check_schema`, i.e. validating the schema
against the metaschema, and the metaschema's rules are only about the *shape* of each
keyword's value: `type` names a JSON type, `properties` maps names to schemas, `required`
is an array of unique strings, counts are non-negative integers, `pattern` compiles, and
so on. Those rules are below, keyword by keyword; tests/environments cross-check this
function against `jsonschema.Draft202012Validator.check_schema` on a corpus of good and
bad schemas, so the two cannot drift silently.

Unknown keywords are allowed, as the metaschema allows them (they are annotations).
"""

from __future__ import annotations

import re
from typing import Any

SIMPLE_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")

# keyword -> kind of value the metaschema requires
_SCHEMA = "schema"  # a schema (object or boolean)
_SCHEMA_MAP = "schema-map"  # an object whose values are schemas
_SCHEMA_ARRAY = "schema-array"  # a non-empty array of schemas
_NON_NEG_INT = "non-negative-integer"
_NUMBER = "number"
_STRING = "string"
_BOOLEAN = "boolean"
_UNIQUE_STRINGS = "unique-string-array"

_KEYWORDS: dict[str, str] = {
    # applicators
    "not": _SCHEMA,
    "if": _SCHEMA,
    "then": _SCHEMA,
    "else": _SCHEMA,
    "items": _SCHEMA,
    "contains": _SCHEMA,
    "additionalProperties": _SCHEMA,
    "propertyNames": _SCHEMA,
    "unevaluatedItems": _SCHEMA,
    "unevaluatedProperties": _SCHEMA,
    "contentSchema": _SCHEMA,
    "properties": _SCHEMA_MAP,
    "patternProperties": _SCHEMA_MAP,
    "dependentSchemas": _SCHEMA_MAP,
    "$defs": _SCHEMA_MAP,
    "definitions": _SCHEMA_MAP,
    "allOf": _SCHEMA_ARRAY,
    "anyOf": _SCHEMA_ARRAY,
    "oneOf": _SCHEMA_ARRAY,
    "prefixItems": _SCHEMA_ARRAY,
    # validation
    "multipleOf": _NUMBER,
    "maximum": _NUMBER,
    "exclusiveMaximum": _NUMBER,
    "minimum": _NUMBER,
    "exclusiveMinimum": _NUMBER,
    "maxLength": _NON_NEG_INT,
    "minLength": _NON_NEG_INT,
    "maxItems": _NON_NEG_INT,
    "minItems": _NON_NEG_INT,
    "maxContains": _NON_NEG_INT,
    "minContains": _NON_NEG_INT,
    "maxProperties": _NON_NEG_INT,
    "minProperties": _NON_NEG_INT,
    "uniqueItems": _BOOLEAN,
    "required": _UNIQUE_STRINGS,
    # core and meta-data
    "$id": _STRING,
    "$schema": _STRING,
    "$ref": _STRING,
    "$anchor": _STRING,
    "$dynamicRef": _STRING,
    "$dynamicAnchor": _STRING,
    "$comment": _STRING,
    "title": _STRING,
    "description": _STRING,
    "format": _STRING,
    "contentEncoding": _STRING,
    "contentMediaType": _STRING,
    "deprecated": _BOOLEAN,
    "readOnly": _BOOLEAN,
    "writeOnly": _BOOLEAN,
}

MAX_DEPTH = 32  # a tool schema deeper than this is a mistake, not a need


class SchemaShapeError(ValueError):
    """`path` is a JSON-pointer-like location inside the schema ("properties.x.type")."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.reason = message


def _is_int(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    # The metaschema's "integer" accepts 2.0: JSON does not distinguish.
    return isinstance(value, float) and value.is_integer()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _join(path: str, key: str | int) -> str:
    return f"{path}.{key}" if path else str(key)


def check_json_schema(schema: Any, path: str = "", depth: int = 0) -> None:
    """Raise SchemaShapeError if `schema` is not a valid draft 2020-12 JSON Schema."""
    if depth > MAX_DEPTH:
        raise SchemaShapeError(path, f"nests deeper than {MAX_DEPTH} levels")
    if isinstance(schema, bool):
        return  # true / false are schemas
    if not isinstance(schema, dict):
        raise SchemaShapeError(path, f"must be an object or a boolean, not {json_kind(schema)}")
    for key, value in schema.items():
        where = _join(path, key)
        if key == "type":
            _check_type(value, where)
        elif key in ("enum",):
            if not isinstance(value, list):
                raise SchemaShapeError(where, f"must be an array, not {json_kind(value)}")
        elif key == "pattern":
            _check_regex(value, where)
        elif key == "dependentRequired":
            if not isinstance(value, dict):
                raise SchemaShapeError(where, f"must be an object, not {json_kind(value)}")
            for name, names in value.items():
                _check_unique_strings(names, _join(where, name))
        elif key in _KEYWORDS:
            _check_kind(_KEYWORDS[key], value, where, depth)
        # any other keyword is an annotation: allowed, like the metaschema allows it
    if "patternProperties" in schema:
        for pattern in schema["patternProperties"]:
            _check_regex(pattern, _join(_join(path, "patternProperties"), pattern))


def _check_kind(kind: str, value: Any, where: str, depth: int) -> None:
    if kind == _SCHEMA:
        check_json_schema(value, where, depth + 1)
    elif kind == _SCHEMA_MAP:
        if not isinstance(value, dict):
            raise SchemaShapeError(where, f"must be an object of schemas, not {json_kind(value)}")
        for name, sub in value.items():
            check_json_schema(sub, _join(where, name), depth + 1)
    elif kind == _SCHEMA_ARRAY:
        if not isinstance(value, list) or not value:
            raise SchemaShapeError(where, "must be a non-empty array of schemas")
        for index, sub in enumerate(value):
            check_json_schema(sub, _join(where, index), depth + 1)
    elif kind == _NON_NEG_INT:
        if not _is_int(value) or value < 0:
            raise SchemaShapeError(where, f"must be a non-negative integer, not {value!r}")
    elif kind == _NUMBER:
        if not _is_number(value):
            raise SchemaShapeError(where, f"must be a number, not {json_kind(value)}")
        if where.endswith("multipleOf") and value <= 0:
            raise SchemaShapeError(where, f"must be greater than 0, not {value!r}")
    elif kind == _STRING:
        if not isinstance(value, str):
            raise SchemaShapeError(where, f"must be a string, not {json_kind(value)}")
    elif kind == _BOOLEAN:
        if not isinstance(value, bool):
            raise SchemaShapeError(where, f"must be a boolean, not {json_kind(value)}")
    elif kind == _UNIQUE_STRINGS:
        _check_unique_strings(value, where)


def _check_type(value: Any, where: str) -> None:
    names = value if isinstance(value, list) else [value]
    if isinstance(value, list) and not value:
        raise SchemaShapeError(where, "must name at least one type")
    for name in names:
        if name not in SIMPLE_TYPES:
            raise SchemaShapeError(
                where, f"{name!r} is not a JSON Schema type (one of {', '.join(SIMPLE_TYPES)})"
            )
    if isinstance(value, list) and len(set(value)) != len(value):
        raise SchemaShapeError(where, "must not repeat a type")


def _check_unique_strings(value: Any, where: str) -> None:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SchemaShapeError(where, "must be an array of strings")
    if len(set(value)) != len(value):
        raise SchemaShapeError(where, "must not repeat a name")


def _check_regex(value: Any, where: str) -> None:
    if not isinstance(value, str):
        raise SchemaShapeError(where, f"must be a string, not {json_kind(value)}")
    try:
        re.compile(value)
    except re.error as exc:
        raise SchemaShapeError(where, f"is not a valid regular expression ({exc})") from None


def json_kind(value: Any) -> str:
    """How a JSON value's type reads in an error: 'a string', 'an array', ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
