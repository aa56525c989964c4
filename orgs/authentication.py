"""DRF authentication for organisation tokens: ``Authorization: Bearer jl_...``, or HTTP basic auth
with the token as the password, as Grafana's Prometheus data source and Prometheus's remote write send
it ("Basic auth" with any user name). What the token may do is decided by its scope: a push token reads
nothing (:meth:`orgs.access.Scope.for_token` refuses it), a read token pushes nothing."""

from __future__ import annotations

import base64

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


class BasicTokenAuthentication(authentication.BaseAuthentication):
    """HTTP basic auth whose password is an organisation token (the user name is ignored)."""

    def authenticate(self, request):
        header = authentication.get_authorization_header(request)
        scheme, _, encoded = header.partition(b" ")
        if scheme.lower() != b"basic":
            return None
        try:
            _, _, secret = base64.b64decode(encoded.strip(), validate=True).decode("utf-8").partition(":")
        except ValueError:  # binascii.Error and UnicodeDecodeError are both ValueErrors
            raise exceptions.AuthenticationFailed(
                "basic credentials are not valid base64 'user:token'"
            ) from None
        token = token_authenticate(secret.strip())
        if token is None:
            raise exceptions.AuthenticationFailed("token is unknown, revoked or expired")
        return AnonymousUser(), token

    def authenticate_header(self, request) -> str:
        return 'Basic realm="jointline"'
