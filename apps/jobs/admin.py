from django.contrib import admin

from .models import ExecutionAttempt, Job, JobPackage


class AttemptInline(admin.TabularInline):
    model = ExecutionAttempt
    extra = 0
    can_delete = False
    fields = ("number", "executor", "state", "exit_code", "failure_reason", "started_at", "finished_at")
    readonly_fields = fields


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("public_id", "owner", "recipe", "operation", "state", "created_at")
    list_filter = ("state", "operation", "recipe")
    search_fields = ("public_id", "experiment", "owner__username")
    readonly_fields = [f.name for f in Job._meta.fields]
    inlines = [AttemptInline]

    def has_add_permission(self, request):
        return False


@admin.register(JobPackage)
class JobPackageAdmin(admin.ModelAdmin):
    list_display = ("sha256", "size", "created_at")
    search_fields = ("sha256",)
    readonly_fields = ("sha256", "size", "storage_name", "created_at")

    def has_add_permission(self, request):
        return False  # packages come only from `tp submit`, content-addressed
