from django.contrib import admin

from .models import GpuProfile


@admin.register(GpuProfile)
class GpuProfileAdmin(admin.ModelAdmin):
    list_display = ("name", "gpu_type", "gpus_per_node", "num_nodes", "fleet", "enabled")
    list_filter = ("fleet", "enabled", "gpu_type")
    search_fields = ("name", "gpu_type", "description")
