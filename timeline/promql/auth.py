"""HTTP basic auth with an organisation token as the password, as Grafana's Prometheus data source
sends it ("Basic auth" with any user name). What the token may read is decided by its scope: a push
token gets none (``orgs.access.Scope.for_token`` refuses it)."""

from __future__ import annotations

import base64
import binascii

from django.contrib.auth.models import AnonymousUser
from rest_framework import authentication, exceptions

from orgs.services import token_authenticate


class BasicTokenAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        header = authentication.get_authorization_header(request)
        scheme, _, encoded = header.partition(b" ")
        if scheme.lower() != b"basic":
            return None
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            reason = "basic credentials are not valid base64 'user:token'"
            raise exceptions.AuthenticationFailed(reason) from None
        token = token_authenticate(decoded.partition(":")[2].strip())
        if token is None:
            raise exceptions.AuthenticationFailed("token is unknown, revoked or expired")
        return AnonymousUser(), token

    def authenticate_header(self, request) -> str:
        return 'Basic realm="jointline"'
