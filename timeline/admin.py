from django.contrib import admin

from timeline.models import Series, Source


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin):
    list_display = ("name", "org", "clock_offset_us", "timezone", "last_seen_at")
    list_filter = ("org",)


@admin.register(Series)
class SeriesAdmin(admin.ModelAdmin):
    list_display = ("metric", "org", "signal", "kind", "unit", "labels_key")
    list_filter = ("org", "signal", "kind")
    search_fields = ("metric",)

    def get_queryset(self, request):
        # The admin is for superusers operating the installation: a system view.
        return Series.unscoped.select_related("org")
