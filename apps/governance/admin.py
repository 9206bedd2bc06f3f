"""The governance admin. Every save and delete goes through services.save_governed /
delete_governed, which write the audit row in the same transaction as the change."""

from __future__ import annotations

import json

from django.contrib import admin
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from . import services
from .models import (
    AllowedImageRegistry,
    Fleet,
    GovernanceAuditLog,
    GpuProfile,
    GpuQuota,
    SandboxProvider,
)


class GovernedAdmin(admin.ModelAdmin):
    """Saves and deletes through the audited services; links each object to its history."""

    def save_model(self, request: HttpRequest, obj, form, change: bool) -> None:
        services.save_governed(request.user, obj)

    def delete_model(self, request: HttpRequest, obj) -> None:
        services.delete_governed(request.user, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        # The bulk "delete selected" action: one audit row per object, not a silent bulk delete.
        for obj in queryset:
            services.delete_governed(request.user, obj)

    @admin.display(description="history")
    def history_link(self, obj) -> str:
        url = reverse("admin:governance_governanceauditlog_changelist")
        return format_html('<a href="{}?model={}&object_id={}">changes</a>', url, obj._meta.model_name, obj.pk)


@admin.register(AllowedImageRegistry)
class AllowedImageRegistryAdmin(GovernedAdmin):
    list_display = ("host", "enabled", "note", "updated_at", "history_link")
    list_filter = ("enabled",)
    search_fields = ("host", "note")
    fields = ("host", "enabled", "note")


@admin.register(Fleet)
class FleetAdmin(GovernedAdmin):
    list_display = ("name", "kind", "enabled", "description", "history_link")
    list_filter = ("kind", "enabled")
    search_fields = ("name", "description")


@admin.register(GpuProfile)
class GpuProfileAdmin(GovernedAdmin):
    list_display = ("name", "gpu_type", "gpus_per_node", "num_nodes", "fleet", "enabled", "history_link")
    list_filter = ("fleet", "enabled", "gpu_type")
    search_fields = ("name", "gpu_type", "description")
    list_select_related = ("fleet",)


@admin.register(SandboxProvider)
class SandboxProviderAdmin(GovernedAdmin):
    # A provider's API is https; Django 6 assumes that too, and says so until then.
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    list_display = ("name", "kind", "endpoint", "enabled", "history_link")
    list_filter = ("kind", "enabled")
    search_fields = ("name", "endpoint")


@admin.register(GpuQuota)
class GpuQuotaAdmin(GovernedAdmin):
    list_display = ("namespace", "gpu_type", "max_gpus", "history_link")
    search_fields = ("namespace", "gpu_type")


@admin.register(GovernanceAuditLog)
class GovernanceAuditLogAdmin(admin.ModelAdmin):
    """Read-only: the history is written by the services, never edited by hand."""

    list_display = ("created_at", "who", "action", "model", "object_repr", "change")
    list_filter = ("action", "model")
    search_fields = ("object_repr", "actor_name", "object_id")
    date_hierarchy = "created_at"
    list_per_page = 100

    @admin.display(description="by", ordering="actor_name")
    def who(self, entry: GovernanceAuditLog) -> str:
        return entry.actor_name or "system"

    @admin.display(description="old → new")
    def change(self, entry: GovernanceAuditLog) -> str:
        def text(value) -> str:
            return json.dumps(value, sort_keys=True) if value is not None else "—"

        return format_html('<code>{}</code> → <code>{}</code>', text(entry.old_value), text(entry.new_value))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
