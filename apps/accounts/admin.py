from django.contrib import admin, messages

from .models import ApiToken
from .services import issue_api_token, revoke_api_token


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "user", "name", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("user__username", "name", "prefix")
    fields = ("user", "name", "prefix", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("prefix", "created_at", "last_used_at", "revoked_at")
    actions = ["revoke"]

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields + (("user", "name") if obj else ())

    def save_model(self, request, obj, form, change):
        if change:
            return
        token, secret = issue_api_token(obj.user, name=obj.name)
        obj.pk = token.pk
        self.message_user(
            request, f"Token for {obj.user}: {secret} (shown once; copy it now)", messages.WARNING
        )

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request, queryset):
        for token in queryset:
            revoke_api_token(token)
