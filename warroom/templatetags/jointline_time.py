"""Template filters for the store's integer-microsecond timestamps."""

from django import template

from core.timeparse import format_rfc3339

register = template.Library()


@register.filter
def us_time(value: int | None) -> str:
    """µs since the epoch → ``2026-06-15 01:00:00 UTC`` (empty for None)."""
    if value in (None, ""):
        return ""
    return format_rfc3339(int(value))[:19].replace("T", " ") + " UTC"
