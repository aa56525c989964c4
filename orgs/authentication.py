"""DRF authentication for organisation tokens (``Authorization: Bearer jl_...``)."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from rest_framework import authentication, exceptions

from orgs.services import token_authenticate


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, secret = header.partition(" ")
        if scheme.lower() != self.keyword.lower():
            return None
        token = token_authenticate(secret.strip())
        if token is None:
            raise exceptions.AuthenticationFailed("token is unknown, revoked or expired")
        return AnonymousUser(), token

    def authenticate_header(self, request) -> str:
        return self.keyword
