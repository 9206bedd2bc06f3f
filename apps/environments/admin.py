"""Admin: environments, versions (read-only), runners (drain), plugins.

No admin page shows or downloads a file's content: files are listed by path, size and
digest only, and there is no export action (tasksets never leave).
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from . import services
from .models import (
    Environment,
    EnvironmentFile,
    EnvironmentVersion,
    HarnessPlugin,
    HarnessPluginFile,
    HarnessPluginVersion,
    Runner,
)


class ReadOnlyAdminMixin:
    """View-only: immutable rows are neither added, changed nor deleted here."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class EnvironmentFileInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = EnvironmentFile
    extra = 0
    fields = ("path", "size", "sha256")
    readonly_fields = fields


class RunnerInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Runner
    extra = 0
    fields = ("url", "label", "fleet", "answering", "last_answered_at", "drained_at")
    readonly_fields = fields


class VersionInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = EnvironmentVersion
    extra = 0
    fields = (
        "version",
        "protocol",
        "deployment",
        "verifier_kind",
        "sandbox_required",
        "created_at",
    )
    readonly_fields = fields
    show_change_link = True


@admin.register(Environment)
class EnvironmentAdmin(admin.ModelAdmin):
    list_display = ("__str__", "owner", "public", "created_at")
    list_filter = ("public",)
    search_fields = ("name", "owner__username")
    fields = ("owner", "name", "public", "created_at")
    readonly_fields = ("owner", "name", "created_at")
    inlines = [VersionInline]

    def has_add_permission(self, request) -> bool:
        return False  # environments are pushed (tp env push), not typed into a form

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # its versions are immutable and runs reference them


@admin.register(EnvironmentVersion)
class EnvironmentVersionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "__str__",
        "protocol",
        "deployment",
        "verifier_kind",
        "sandbox_required",
        "task_counts",
        "pushed_by",
        "created_at",
    )
    list_filter = ("protocol", "deployment", "verifier_kind", "sandbox_required")
    search_fields = (
        "environment__name",
        "environment__owner__username",
        "version",
        "digest",
        "verifier_ref",
    )
    readonly_fields = (
        "environment",
        "version",
        "protocol",
        "deployment",
        "verifier_kind",
        "verifier_ref",
        "sandbox_required",
        "description",
        "manifest",
        "task_counts",
        "digest",
        "size",
        "pushed_by",
        "created_at",
    )
    inlines = [EnvironmentFileInline, RunnerInline]


@admin.action(description="Drain the selected runners (kept, listed, no new jobs)")
def drain_runners(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Runner]
) -> None:
    count = 0
    for runner in queryset.select_related("version__environment__owner"):
        if not runner.drained:
            services.drain_runner(request.user, runner)
            count += 1
    modeladmin.message_user(request, f"Drained {count} runner(s).", messages.SUCCESS)


@admin.register(Runner)
class RunnerAdmin(admin.ModelAdmin):
    list_display = (
        "url",
        "version",
        "label",
        "fleet",
        "answering",
        "last_answered_at",
        "drained_at",
        "drained_by",
    )
    list_filter = (
        "answering",
        ("drained_at", admin.EmptyFieldListFilter),
        "fleet",
        "version__deployment",
    )
    search_fields = (
        "url",
        "label",
        "fleet",
        "version__environment__name",
        "version__environment__owner__username",
    )
    readonly_fields = (
        "version",
        "url",
        "label",
        "fleet",
        "registered_by",
        "registered_at",
        "last_heartbeat_at",
        "last_checked_at",
        "last_answered_at",
        "answering",
        "last_error",
        "drained_at",
        "drained_by",
    )
    actions = [drain_runners]

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # drained, never forgotten


class PluginVersionInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = HarnessPluginVersion
    extra = 0
    fields = ("version", "entrypoint", "digest", "created_at")
    readonly_fields = fields
    show_change_link = True


@admin.register(HarnessPlugin)
class HarnessPluginAdmin(admin.ModelAdmin):
    list_display = ("__str__", "owner", "created_at")
    search_fields = ("name", "owner__username")
    readonly_fields = ("owner", "name", "created_at")
    inlines = [PluginVersionInline]

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class PluginFileInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = HarnessPluginFile
    extra = 0
    fields = ("path", "size", "sha256")
    readonly_fields = fields


@admin.register(HarnessPluginVersion)
class HarnessPluginVersionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("__str__", "capability", "entrypoint", "digest", "pushed_by", "created_at")
    list_filter = ("capability",)
    search_fields = ("plugin__name", "plugin__owner__username", "version", "digest")
    readonly_fields = (
        "plugin",
        "version",
        "capability",
        "entrypoint",
        "digest",
        "size",
        "pushed_by",
        "created_at",
    )
    inlines = [PluginFileInline]
