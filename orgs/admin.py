from django.contrib import admin

from orgs.models import IngestToken, Membership, Organization


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "colour", "created_at")
    search_fields = ("slug", "name")


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("user", "org", "role")
    list_filter = ("org", "role")


@admin.register(IngestToken)
class IngestTokenAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "org",
        "purpose",
        "prefix",
        "created_at",
        "expires_at",
        "revoked_at",
        "last_used_at",
    )
    list_filter = ("org", "purpose")
    readonly_fields = ("prefix", "token_hash", "created_at", "last_used_at")
    fields = ("org", "name", "purpose", "prefix", "token_hash", "expires_at", "revoked_at", "last_used_at")

    def has_add_permission(self, request) -> bool:
        # The secret is shown once by `manage.py create_token`; the admin cannot display it safely.
        return False
