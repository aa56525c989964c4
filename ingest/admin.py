from django.contrib import admin

from ingest.models import IngestBatch


@admin.register(IngestBatch)
class IngestBatchAdmin(admin.ModelAdmin):
    list_display = ("id", "org", "source", "protocol", "status", "sample_count", "event_count", "received_at")
    list_filter = ("status", "protocol", "org")
    exclude = ("payload",)
    readonly_fields = [f.name for f in IngestBatch._meta.fields if f.name != "payload"]
