"""`--set` values checked before upload, with the same validator the server runs
(tuneplane.contracts.parameters): a value `tp validate` accepts is one submission
accepts, and a typo is reported without packaging and uploading the experiment."""

from __future__ import annotations

from typing import Any

from tuneplane.contracts.parameters import ParameterError, validate_parameters

from tp_cli.client import ApiClient, path_part
from tp_cli.errors import TpError

CUSTOM_RECIPE = "custom/custom"


def check_hyperparams(client: ApiClient, lock: dict[str, Any], hyperparams: dict[str, str]) -> None:
    """Raise TpError with the server's wording when a value does not fit the schema.

    custom/custom declares no parameters (spec: "tp validate has nothing to check"), so
    it costs no request; other recipes' schemas come from the catalogue, which is what
    the server checks against.
    """
    name = str(lock.get("name") or "")
    if name == CUSTOM_RECIPE or "/" not in name:
        return
    namespace, recipe = name.split("/", 1)
    published = client.get(f"api/v1/recipes/{path_part(namespace)}/{path_part(recipe)}")
    schema = published.get("parameters") if isinstance(published, dict) else None
    try:
        validate_parameters(schema or {}, hyperparams, recipe=name)
    except ParameterError as exc:
        raise TpError(str(exc)) from None
