"""Request bodies sent with ``Transfer-Encoding: chunked`` and no ``Content-Length``.

Django reads a body through a stream cut at ``CONTENT_LENGTH``; a chunked body
has none, so Django reads it as empty. Clients that stream their payload
(``curl -T -`` reading stdin, HTTP libraries sending a generator or compressing
on the fly) send exactly that, and a 400 is not retried: the data would be lost. This
module reads such a body itself, never more than a limit plus one byte of it:

* under gunicorn, and any server that sets ``wsgi.input_terminated``,
  ``wsgi.input`` is already de-chunked and ends where the body ends: it is
  read to its end;
* under the development server (``manage.py runserver``, built on wsgiref),
  ``wsgi.input`` is the connection itself: the chunked framing is decoded
  here, through the last chunk and its trailer section, so the connection is
  left at the start of the next request.

A body over the limit is refused (413) once ``limit + 1`` bytes of it have been
read, or, under the development server, as soon as a chunk announces more than
the limit, before that chunk is read. Under the development server a chunked
body that is refused or not read at all (401, 429) leaves the connection
unusable for a next request; the server answers that one with 400 and closes.
"""

from __future__ import annotations

import io
import re
import sys
from collections.abc import Mapping
from typing import Any

from django.core.handlers.wsgi import LimitedStream
from django.http import QueryDict
from django.http.multipartparser import MultiPartParser, MultiPartParserError
from django.utils.datastructures import MultiValueDict

from ingest.protocols.errors import FieldError, InvalidPayload, PayloadTooLarge

READ_SIZE = 64 * 1024
MAX_SIZE_LINE = 1024  # a chunk size in hex plus any chunk extensions
MAX_TRAILER_BYTES = 64 * 1024
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")


def is_chunked(meta: Mapping[str, Any]) -> bool:
    """Whether the request's body is framed by ``Transfer-Encoding`` rather than ``Content-Length``."""
    return bool((meta.get("HTTP_TRANSFER_ENCODING") or "").strip())


def read_chunked_body(meta: Mapping[str, Any], limit: int) -> bytes:
    """The de-chunked body of a request for which :func:`is_chunked` holds, at most ``limit`` bytes.

    Raises :class:`PayloadTooLarge` when the body exceeds ``limit`` (having read
    at most ``limit + 1`` bytes of it) and :class:`InvalidPayload` for a
    transfer coding other than ``chunked``, a ``Content-Length`` next to it,
    or broken chunk framing.
    """
    codings = [part.strip().lower() for part in meta.get("HTTP_TRANSFER_ENCODING", "").split(",")]
    if codings != ["chunked"]:
        raise InvalidPayload(
            "unsupported transfer coding",
            [FieldError("Transfer-Encoding", "only 'chunked' is supported; compress with Content-Encoding")],
        )
    if meta.get("CONTENT_LENGTH"):
        raise InvalidPayload(
            "conflicting body framing",
            [FieldError("Content-Length", "must not be sent with Transfer-Encoding: chunked")],
        )
    stream = meta["wsgi.input"]
    if meta.get("wsgi.input_terminated"):
        return _read_to_end(stream, limit)
    if isinstance(stream, LimitedStream):
        # Django's development server cuts the connection at CONTENT_LENGTH (none here): lift the
        # cut while the framing is decoded, then put it back so nothing after the body is consumed.
        stream.limit = sys.maxsize
        try:
            return _decode(stream, limit)
        finally:
            stream.limit = 0
    return _decode(stream, limit)


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"chunked body exceeds the limit of {limit} bytes")


def _read_to_end(stream, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        try:
            part = stream.read(min(READ_SIZE, limit + 1 - size))
        except Exception as exc:  # the server's own framing errors (gunicorn.http.errors.*) and I/O errors
            raise _broken(str(exc) or type(exc).__name__) from exc
        if not part:
            return b"".join(parts)
        parts.append(part)
        size += len(part)
        if size > limit:
            raise _too_large(limit)


def _broken(reason: str) -> InvalidPayload:
    return InvalidPayload("chunked body could not be read", [FieldError("Transfer-Encoding", reason)])


def _decode(stream, limit: int) -> bytes:
    """Decode ``chunk-size [ext] CRLF data CRLF ... 0 [ext] CRLF *(trailer CRLF) CRLF`` (RFC 9112 7.1)."""
    body = io.BytesIO()
    size = 0
    while True:
        line = _line(stream, MAX_SIZE_LINE, "chunk size line")
        digits = line.split(b";", 1)[0].strip()
        if not _CHUNK_SIZE.fullmatch(digits):
            raise _broken(f"chunk size {digits[:40]!r} is not a hexadecimal number")
        chunk = int(digits, 16)
        if chunk == 0:
            _skip_trailers(stream)
            return body.getvalue()
        if size + chunk > limit:
            raise _too_large(limit)
        data = stream.read(chunk)
        if len(data) != chunk:
            raise _broken("the body ends inside a chunk")
        body.write(data)
        size += chunk
        if stream.read(2) != b"\r\n":
            raise _broken("a chunk is not followed by CRLF")


def _line(stream, max_bytes: int, what: str) -> bytes:
    line = stream.readline(max_bytes + 1)
    if not line.endswith(b"\n"):
        raise _broken(f"{what} is longer than {max_bytes} bytes" if line else "the body ends early")
    return line.rstrip(b"\r\n")


def _skip_trailers(stream) -> None:
    read = 0
    while True:
        line = _line(stream, MAX_TRAILER_BYTES, "trailer field")
        read += len(line) + 2
        if read > MAX_TRAILER_BYTES:
            raise _broken(f"trailer section is longer than {MAX_TRAILER_BYTES} bytes")
        if not line:
            return


def buffered_form(request, limit: int) -> tuple[QueryDict, MultiValueDict]:
    """Parse a chunked ``multipart/form-data`` or urlencoded body of at most ``limit`` bytes.

    Returns ``(data, files)`` as Django's ``request.POST`` and ``request.FILES``
    would hold them; raises as :func:`read_chunked_body`.
    """
    body = read_chunked_body(request.META, limit)
    meta = {**request.META, "CONTENT_LENGTH": str(len(body))}
    content_type = meta.get("CONTENT_TYPE", "")
    if content_type.startswith("multipart/form-data"):
        try:
            return MultiPartParser(meta, io.BytesIO(body), request.upload_handlers).parse()
        except MultiPartParserError as exc:
            raise InvalidPayload("multipart body could not be read", [FieldError("body", str(exc))]) from None
    if content_type.startswith("application/x-www-form-urlencoded"):
        return QueryDict(body, encoding=request.encoding), MultiValueDict()
    return QueryDict(), MultiValueDict()
