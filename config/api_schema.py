"""The OpenAPI schema's view of errors and credentials, added to every operation in one place.

:class:`JointlineAutoSchema` (DRF's ``DEFAULT_SCHEMA_CLASS``) documents the error answers every API
view can give, in the one shape of :mod:`config.api_errors`: 400 (a parameter or body field named),
401 (no or a bad credential), 403 (not allowed), 404 (for operations that look something up by a
path parameter), and 415 for operations with a body. An operation that documents a status itself
(a protocol endpoint answering errors in its own encoding) keeps its own. A POST that documents no
answer is documented as creating something (201). The two token authentications are described as
security schemes.
"""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema

from config.api_errors import ErrorSerializer


class JointlineAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema, plus the error answers of :mod:`config.api_errors`."""

    def _is_create_operation(self) -> bool:
        # The API's POSTs create something (201) unless their view documents another answer.
        return self.method == "POST"

    def error_statuses(self) -> list[int]:
        statuses = [400, 401, 403]
        if "{" in self.path:
            statuses.append(404)
        if self.method in ("POST", "PUT", "PATCH"):
            statuses.append(415)
        return statuses

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        for status in self.error_statuses():
            code = str(status)
            if code not in responses:
                responses[code] = self._get_response_for_code(ErrorSerializer, code, direction=direction)
        return dict(sorted(responses.items()))


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "orgs.authentication.BearerTokenAuthentication"
    name = "organisationToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "an organisation token: push tokens write, read tokens read",
        }


class BasicTokenScheme(OpenApiAuthenticationExtension):
    target_class = "orgs.authentication.BasicTokenAuthentication"
    name = "organisationTokenAsPassword"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "basic", "description": "any user name, an organisation token"}
