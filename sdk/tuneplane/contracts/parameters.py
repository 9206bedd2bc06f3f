"""Recipe parameter schemas and the one validator of `--set` values against them.

`tp validate`, `tp submit` and the server's admission all call `validate_parameters`,
so a value the CLI accepts is a value the server accepts, coerced the same way.

A schema maps each parameter name to a spec::

    {"learning_rate": {"type": "float", "default": 0.1, "minimum": 0, "exclusive_minimum": true},
     "epochs": {"type": "int", "default": 10, "minimum": 1, "maximum": 1000},
     "optimizer": {"type": "string", "default": "sgd", "choices": ["sgd", "adamw"]},
     "bf16": {"type": "bool", "default": false}}

Values may arrive as strings (`--set lr=1e-5` keeps strings on the command line) or as
JSON scalars; both are coerced to the declared type. A recipe without parameters
(custom/custom) checks nothing: its values land in spec.hyperparams untouched.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

TYPES = ("int", "float", "bool", "string")
SPEC_KEYS = frozenset(
    {"type", "default", "required", "minimum", "maximum", "exclusive_minimum", "choices", "max_length",
     "pattern", "help", "flag"}
)
NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class ParameterError(ValueError):
    """A value (or a schema) that does not fit; `key` names the parameter."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


def _range_text(spec: Mapping[str, Any]) -> str:
    low, high = spec.get("minimum"), spec.get("maximum")
    if low is None and high is None:
        return ""
    low_text = "" if low is None else f"{low}{' (exclusive)' if spec.get('exclusive_minimum') else ''}"
    if high is None:
        return f" of at least {low_text}" if not spec.get("exclusive_minimum") else f" greater than {low}"
    if low is None:
        return f" of at most {high}"
    return f" from {low_text} to {high}"


def _describe(spec: Mapping[str, Any]) -> str:
    kind = spec["type"]
    if kind == "int":
        return "an integer" + _range_text(spec)
    if kind == "float":
        return "a number" + _range_text(spec)
    if kind == "bool":
        return "true or false"
    if spec.get("choices"):
        return "one of " + ", ".join(str(c) for c in spec["choices"])
    return "a string" + (f" of at most {spec['max_length']} characters" if spec.get("max_length") else "")


def coerce(name: str, spec: Mapping[str, Any], raw: Any) -> Any:
    """`raw` as the declared type, or ParameterError saying what is expected."""
    kind = spec["type"]
    wrong = ParameterError(f"hyperparams.{name} must be {_describe(spec)}, not {raw!r}", key=name)
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
            return raw.strip().lower() in _TRUE
        raise wrong
    if kind == "string":
        if not isinstance(raw, str):
            raise wrong
        if spec.get("choices") and raw not in spec["choices"]:
            raise wrong
        if spec.get("max_length") and len(raw) > spec["max_length"]:
            raise wrong
        if spec.get("pattern") and not re.fullmatch(spec["pattern"], raw):
            raise ParameterError(f"hyperparams.{name} must match {spec['pattern']}, not {raw!r}", key=name)
        return raw
    if isinstance(raw, bool):
        raise wrong
    if kind == "int":
        if isinstance(raw, int):
            value: float = raw
        elif isinstance(raw, float) and raw.is_integer() or isinstance(raw, str) and re.fullmatch(r"\s*[-+]?\d+\s*", raw):
            value = int(raw)
        else:
            raise wrong
    else:
        if isinstance(raw, (int, float)):
            value = float(raw)
        elif isinstance(raw, str):
            try:
                value = float(raw)
            except ValueError:
                raise wrong from None
        else:
            raise wrong
        if not math.isfinite(value):
            raise wrong
    low, high = spec.get("minimum"), spec.get("maximum")
    if low is not None and (value < low or (spec.get("exclusive_minimum") and value <= low)):
        raise wrong
    if high is not None and value > high:
        raise wrong
    if spec.get("choices") and value not in spec["choices"]:
        raise wrong
    return value


def validate_schema(schema: Any) -> dict[str, dict[str, Any]]:
    """Check a recipe's parameter schema (used when the catalogue is published)."""
    if not isinstance(schema, Mapping):
        raise ParameterError("parameters must be an object of name: spec")
    for name, spec in schema.items():
        if not isinstance(name, str) or not NAME.match(name):
            raise ParameterError(f"parameter name {name!r} must be lower case letters, digits and _", key=str(name))
        if not isinstance(spec, Mapping) or spec.get("type") not in TYPES:
            raise ParameterError(f"parameter {name} needs a type: one of {', '.join(TYPES)}", key=name)
        unknown = sorted(set(spec) - SPEC_KEYS)
        if unknown:
            raise ParameterError(f"parameter {name} has unknown field {unknown[0]!r}", key=name)
        if "default" in spec:
            coerce(name, spec, spec["default"])
        elif not spec.get("required"):
            raise ParameterError(f"parameter {name} needs a default or required: true", key=name)
    return dict(schema)


def validate_parameters(schema: Mapping[str, Any] | None, values: Mapping[str, Any] | None,
                        recipe: str = "this recipe") -> dict[str, Any]:
    """`values` checked against `schema`, coerced, with every default filled in.

    Raises ParameterError for an unknown name, a missing required value, or a value of
    the wrong type or out of range. An empty schema returns the values unchanged.
    """
    values = dict(values or {})
    if not schema:
        return values
    unknown = sorted(set(values) - set(schema))
    if unknown:
        raise ParameterError(
            f"hyperparams.{unknown[0]} is not a parameter of {recipe}; it takes: {', '.join(sorted(schema))}",
            key=unknown[0],
        )
    checked: dict[str, Any] = {}
    for name in sorted(schema):
        spec = schema[name]
        if name in values:
            checked[name] = coerce(name, spec, values[name])
        elif "default" in spec:
            checked[name] = spec["default"]
        else:
            raise ParameterError(
                f"hyperparams.{name} is required by {recipe} ({_describe(spec)}): pass --set {name}=VALUE",
                key=name,
            )
    return checked


def to_argv(schema: Mapping[str, Any] | None, values: Mapping[str, Any]) -> list[str]:
    """Checked values as command-line flags for a catalogue trainer: `--name value`
    (or the spec's `flag`); booleans as bare flags when true."""
    argv: list[str] = []
    for name in sorted(values):
        spec = (schema or {}).get(name, {})
        flag = spec.get("flag") or "--" + name.replace("_", "-")
        value = values[name]
        if isinstance(value, bool):
            if value:
                argv.append(flag)
            continue
        argv += [flag, repr(value) if isinstance(value, float) else str(value)]
    return argv
