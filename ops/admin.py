from django.contrib import admin

from ops.models import RetentionPolicy


@admin.register(RetentionPolicy)
class RetentionPolicyAdmin(admin.ModelAdmin):
    list_display = ("org", "samples_days", "events_days", "journal_days", "updated_at")
    search_fields = ("org__slug", "org__name")
    readonly_fields = ("updated_at",)
