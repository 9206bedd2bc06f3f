from django.contrib import admin

from .models import Recipe


@admin.register(Recipe)
class RecipeAdmin(admin.ModelAdmin):
    list_display = ("name", "version", "framework", "observability", "entrypoint")
    list_filter = ("observability", "framework")
    search_fields = ("name", "description")
    readonly_fields = ("digest",)
