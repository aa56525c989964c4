"""Body decompression with a hard limit on the decompressed size.

A request body is small on the wire but may inflate a thousandfold (a "zip
bomb"), so every decoder here stops as soon as the output would exceed
``max_bytes``: gzip and deflate are inflated incrementally with a bounded
output per step, and snappy's declared length is checked before anything is
allocated. The limit on the raw body is the HTTP layer's job.

With ``max_ratio`` the limit is also at most that many times the compressed
size (never below :data:`RATIO_FLOOR_BYTES`): real agents' bodies inflate 3 to
50 times, a bomb a thousand times, and a 199 KiB bomb then stops after about
20 MB of output (tens of milliseconds) instead of inflating the absolute limit
first (seconds of a web worker that other organisations' pushes wait for).
"""

from __future__ import annotations

import zlib

import cramjam

from ingest.protocols.errors import InvalidPayload, PayloadTooLarge, UnsupportedMediaType

ACCEPTED_ENCODINGS: tuple[str, ...] = ("identity", "gzip", "deflate", "snappy")
MAX_GZIP_MEMBERS = 64
RATIO_FLOOR_BYTES = 2**20  # a tiny body may inflate far beyond the ratio: a megabyte costs nothing

_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS
_RAW_DEFLATE_WBITS = -zlib.MAX_WBITS
_MAX_VARINT_BYTES = 5  # snappy lengths are 32-bit


def decompressed_limit(compressed_bytes: int, *, max_bytes: int, max_ratio: float | None) -> int:
    """The most a body of ``compressed_bytes`` may inflate to: ``max_bytes``, and with ``max_ratio``
    at most ``max_ratio`` times its size, but never less than :data:`RATIO_FLOOR_BYTES`."""
    if max_ratio is None:
        return max_bytes
    return min(max_bytes, max(int(compressed_bytes * max_ratio), RATIO_FLOOR_BYTES))


def decompress(body: bytes, encoding: str | None, *, max_bytes: int, max_ratio: float | None = None) -> bytes:
    """Decode ``body`` according to its ``Content-Encoding`` and return at most ``max_bytes`` bytes,
    and with ``max_ratio`` at most that many times its own size (see :func:`decompressed_limit`).

    ``None``, ``""`` and ``identity`` return the body unchanged; ``gzip``
    (also ``x-gzip``, possibly several members), ``deflate`` (zlib-wrapped, or
    raw deflate as some clients send) and ``snappy`` (block format, as in
    Prometheus remote write) are decoded. Encoding names are case-insensitive.

    Raises :class:`PayloadTooLarge` when the decoded body would exceed
    ``max_bytes`` (never allocating much more than that),
    :class:`InvalidPayload` when the body is not valid in its encoding, and
    :class:`UnsupportedMediaType` for any other encoding, including lists such
    as ``gzip, snappy``.
    """
    if max_bytes < 0:
        raise ValueError("max_bytes must not be negative")  # zlib reads a max_length of 0 as "no limit"
    name = (encoding or "").strip().lower()
    if name in ("", "identity"):
        return body
    limit = decompressed_limit(len(body), max_bytes=max_bytes, max_ratio=max_ratio)
    try:
        return _decode(body, name, encoding, limit)
    except PayloadTooLarge:
        if limit < max_bytes:
            raise PayloadTooLarge(
                f"decompressed body exceeds {limit} bytes, {max_ratio:g} times its {len(body)} compressed "
                "bytes (JOINTLINE_PUSH_MAX_DECOMPRESSION_RATIO): send it less compressed or in smaller parts"
            ) from None
        raise


def _decode(body: bytes, name: str, encoding: str | None, max_bytes: int) -> bytes:
    if name in ("gzip", "x-gzip"):
        return _inflate_gzip(body, max_bytes)
    if name == "deflate":
        return _inflate_deflate(body, max_bytes)
    if name == "snappy":
        return _decode_snappy(body, max_bytes)
    accepted = ", ".join(ACCEPTED_ENCODINGS)
    if "," in name:
        raise UnsupportedMediaType(
            f"content encoding {encoding!r} applies several encodings; only one is supported ({accepted})"
        )
    raise UnsupportedMediaType(f"content encoding {encoding!r} is not supported; accepted: {accepted}")


def _too_large(max_bytes: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"decompressed body exceeds {max_bytes} bytes")


def _inflate_gzip(body: bytes, max_bytes: int) -> bytes:
    """Inflate every gzip member in turn (concatenated members are valid gzip).

    The member count is capped: zlib copies the input left after each member,
    so a body of a million empty members would cost quadratic time.
    """
    parts: list[bytes] = []
    produced = 0
    remaining = body
    for _ in range(MAX_GZIP_MEMBERS):
        member, remaining = _inflate_stream(remaining, _GZIP_WBITS, "gzip", max_bytes - produced, max_bytes)
        parts.append(member)
        produced += len(member)
        if not remaining:
            return b"".join(parts)
    raise InvalidPayload(f"body is not valid gzip: more than {MAX_GZIP_MEMBERS} concatenated members")


def _inflate_deflate(body: bytes, max_bytes: int) -> bytes:
    """HTTP "deflate" means zlib-wrapped, but some clients send raw deflate; the header tells them apart."""
    wbits = _ZLIB_WBITS if _has_zlib_header(body) else _RAW_DEFLATE_WBITS
    data, trailing = _inflate_stream(body, wbits, "deflate", max_bytes, max_bytes)
    if trailing:
        raise InvalidPayload(f"body is not valid deflate: {len(trailing)} bytes after the end of the stream")
    return data


def _has_zlib_header(body: bytes) -> bool:
    return len(body) >= 2 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0


def _inflate_stream(data: bytes, wbits: int, name: str, budget: int, max_bytes: int) -> tuple[bytes, bytes]:
    """Inflate one stream, producing at most ``budget`` bytes; return (output, bytes after the stream).

    Each step asks zlib for at most ``budget + 1`` bytes, so exceeding the
    budget is detected after allocating one byte too many, not the whole bomb.
    """
    inflater = zlib.decompressobj(wbits)
    parts: list[bytes] = []
    produced = 0
    pending = data
    try:
        while not inflater.eof:
            chunk = inflater.decompress(pending, budget + 1 - produced)
            produced += len(chunk)
            if produced > budget:
                raise _too_large(max_bytes)
            parts.append(chunk)
            pending = inflater.unconsumed_tail
            if not chunk and not pending and not inflater.eof:
                raise InvalidPayload(f"body is not valid {name}: the stream ends prematurely")
    except zlib.error as exc:
        raise InvalidPayload(f"body is not valid {name}: {exc}") from None
    return b"".join(parts), inflater.unused_data


def _decode_snappy(body: bytes, max_bytes: int) -> bytes:
    declared = _snappy_declared_length(body)
    if declared > max_bytes:
        raise _too_large(max_bytes)
    try:
        return bytes(cramjam.snappy.decompress_raw(body))
    except cramjam.DecompressionError as exc:
        raise InvalidPayload(f"body is not valid snappy: {exc}") from None


def _snappy_declared_length(body: bytes) -> int:
    """The uncompressed length snappy's block format puts first, as a little-endian base-128 varint."""
    length = 0
    for position, byte in enumerate(body[:_MAX_VARINT_BYTES]):
        length |= (byte & 0x7F) << (7 * position)
        if not byte & 0x80:
            return length
    raise InvalidPayload("body is not valid snappy: missing or malformed length header")
