"""OpenAPI security schemes for our two bearer tokens (loaded in AccountsConfig.ready)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "apps.accounts.auth.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "User API token (tpu_...)"}


class IngestTokenScheme(OpenApiAuthenticationExtension):
    target_class = "apps.telemetry.api.ingest.IngestTokenAuthentication"
    name = "ingestToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "Per-attempt ingest token (tpi_...)"}
