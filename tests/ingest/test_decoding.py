"""Body decompression: every encoding, the size limit, bombs, corrupt bodies, unsupported encodings."""

import gzip
import re
import struct
import time
import tracemalloc
import zlib

import cramjam
import pytest

from ingest.protocols.decoding import MAX_GZIP_MEMBERS, decompress
from ingest.protocols.errors import InvalidPayload, PayloadTooLarge, UnsupportedMediaType

BODY = b'{"source": "node-exporter@node-17", "series": []}' * 50
ONE_MIB = 1 << 20


def snappy(data: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(data))


def raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


@pytest.fixture(scope="module")
def gzip_bomb() -> bytes:
    """A valid gzip stream of 1 GiB of zeros, about 1 MiB long, built in well under a second.

    Each further MiB of zeros compresses to the same deflate block, so the
    stream is one block for the first MiB, 1023 copies of the next, the final
    empty block and the gzip trailer (CRC-32 and size of the whole GiB).
    """
    compressor = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    zeros = bytes(ONE_MIB)
    first = compressor.compress(zeros) + compressor.flush(zlib.Z_SYNC_FLUSH)
    repeated = compressor.compress(zeros) + compressor.flush(zlib.Z_SYNC_FLUSH)
    final = compressor.flush(zlib.Z_FINISH)
    crc = 0
    for _ in range(1024):
        crc = zlib.crc32(zeros, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + first + repeated * 1023 + final + struct.pack("<II", crc, (1 << 30) & 0xFFFFFFFF)


# --------------------------------------------------------------------------- identity


@pytest.mark.parametrize("encoding", [None, "", "identity", "IDENTITY", " identity "])
def test_an_identity_body_is_returned_unchanged(encoding):
    assert decompress(BODY, encoding, max_bytes=10) is BODY


# --------------------------------------------------------------------------- gzip and deflate


@pytest.mark.parametrize("encoding", ["gzip", "GZIP", "x-gzip", " gzip "])
def test_a_gzip_body_is_decompressed_whatever_the_spelling(encoding):
    assert decompress(gzip.compress(BODY), encoding, max_bytes=len(BODY)) == BODY


def test_concatenated_gzip_members_are_decompressed_in_turn():
    body = gzip.compress(BODY) + gzip.compress(b"tail")
    assert decompress(body, "gzip", max_bytes=len(BODY) + 4) == BODY + b"tail"


def test_a_body_of_very_many_gzip_members_is_refused():
    body = gzip.compress(b"") * (MAX_GZIP_MEMBERS + 1)
    with pytest.raises(InvalidPayload, match=f"more than {MAX_GZIP_MEMBERS} concatenated members"):
        decompress(body, "gzip", max_bytes=ONE_MIB)


def test_a_zlib_wrapped_deflate_body_is_decompressed():
    assert decompress(zlib.compress(BODY), "deflate", max_bytes=len(BODY)) == BODY


def test_a_raw_deflate_body_is_decompressed_too():
    assert decompress(raw_deflate(BODY), "deflate", max_bytes=len(BODY)) == BODY


def test_an_empty_gzip_payload_decompresses_to_nothing():
    assert decompress(gzip.compress(b""), "gzip", max_bytes=0) == b""


def test_a_gzip_body_of_exactly_the_limit_is_accepted():
    data = bytes(5 * ONE_MIB)
    assert len(decompress(gzip.compress(data), "gzip", max_bytes=len(data))) == len(data)


@pytest.mark.parametrize(
    ("encoding", "encode"), [("gzip", gzip.compress), ("deflate", zlib.compress), ("deflate", raw_deflate)]
)
def test_one_byte_over_the_limit_is_too_large(encoding, encode):
    with pytest.raises(PayloadTooLarge, match=f"decompressed body exceeds {len(BODY) - 1} bytes"):
        decompress(encode(BODY), encoding, max_bytes=len(BODY) - 1)


def test_the_limit_counts_all_gzip_members_together():
    body = gzip.compress(BODY) + gzip.compress(BODY)
    with pytest.raises(PayloadTooLarge):
        decompress(body, "gzip", max_bytes=len(BODY) * 2 - 1)


def test_a_gzip_bomb_is_stopped_quickly_without_inflating_it(gzip_bomb):
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(PayloadTooLarge, match=f"exceeds {ONE_MIB} bytes"):
            decompress(gzip_bomb, "gzip", max_bytes=ONE_MIB)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < 1.0
    assert peak < 4 * ONE_MIB  # the limit plus one chunk, not the gibibyte


def test_a_too_large_body_maps_to_http_413():
    assert PayloadTooLarge("x").status == 413


def test_corrupt_gzip_is_an_invalid_payload_naming_the_encoding():
    with pytest.raises(InvalidPayload, match=r"^body is not valid gzip: .*incorrect header check"):
        decompress(b"this is not gzip", "gzip", max_bytes=ONE_MIB)


def test_a_gzip_body_with_a_bad_checksum_is_invalid():
    body = bytearray(gzip.compress(BODY))
    body[-8] ^= 0xFF  # first byte of the CRC-32
    with pytest.raises(InvalidPayload, match=r"^body is not valid gzip: .*incorrect data check"):
        decompress(bytes(body), "gzip", max_bytes=ONE_MIB)


def test_a_truncated_gzip_body_is_invalid():
    with pytest.raises(InvalidPayload, match=r"^body is not valid gzip: the stream ends prematurely"):
        decompress(gzip.compress(BODY)[:-10], "gzip", max_bytes=ONE_MIB)


def test_an_empty_body_declared_gzip_is_invalid():
    with pytest.raises(InvalidPayload, match=r"^body is not valid gzip"):
        decompress(b"", "gzip", max_bytes=ONE_MIB)


def test_garbage_after_a_gzip_member_is_invalid():
    with pytest.raises(InvalidPayload, match=r"^body is not valid gzip"):
        decompress(gzip.compress(BODY) + b"garbage", "gzip", max_bytes=ONE_MIB)


def test_corrupt_deflate_is_an_invalid_payload_naming_the_encoding():
    with pytest.raises(InvalidPayload, match=r"^body is not valid deflate: "):
        decompress(b"\x78\x9c this is not deflate", "deflate", max_bytes=ONE_MIB)


def test_garbage_after_a_deflate_stream_is_invalid():
    with pytest.raises(
        InvalidPayload, match=r"^body is not valid deflate: 3 bytes after the end of the stream"
    ):
        decompress(zlib.compress(BODY) + b"xyz", "deflate", max_bytes=ONE_MIB)


def test_an_invalid_body_maps_to_http_400():
    assert InvalidPayload("x").status == 400


# --------------------------------------------------------------------------- snappy


def test_a_snappy_body_is_decompressed():
    assert decompress(snappy(BODY), "snappy", max_bytes=len(BODY)) == BODY


def test_a_snappy_body_over_the_limit_is_too_large():
    with pytest.raises(PayloadTooLarge, match=f"decompressed body exceeds {len(BODY) - 1} bytes"):
        decompress(snappy(BODY), "snappy", max_bytes=len(BODY) - 1)


def test_the_snappy_length_header_is_checked_before_decompressing():
    # The header claims 2 GiB and the rest is garbage: a decoder that looked
    # at the data first would report corruption, not the size.
    declared = 1 << 31
    header = bytes([(declared >> shift & 0x7F) | (0x80 if shift < 28 else 0) for shift in (0, 7, 14, 21, 28)])
    with pytest.raises(PayloadTooLarge):
        decompress(header + b"garbage", "snappy", max_bytes=ONE_MIB)


def test_corrupt_snappy_is_an_invalid_payload_naming_the_encoding():
    with pytest.raises(InvalidPayload, match=r"^body is not valid snappy: "):
        decompress(b"\x10garbage", "snappy", max_bytes=ONE_MIB)


@pytest.mark.parametrize("body", [b"", b"\xff\xff\xff\xff\xff\x01"])
def test_a_snappy_body_without_a_valid_length_header_is_invalid(body):
    with pytest.raises(InvalidPayload, match="missing or malformed length header"):
        decompress(body, "snappy", max_bytes=ONE_MIB)


def test_the_snappy_framing_format_is_not_the_block_format():
    framed = bytes(cramjam.snappy.compress(BODY))
    with pytest.raises((InvalidPayload, PayloadTooLarge)):
        decompress(framed, "snappy", max_bytes=len(BODY))


# --------------------------------------------------------------------------- unsupported encodings


@pytest.mark.parametrize("encoding", ["br", "zstd", "compress", "lz4"])
def test_an_unknown_encoding_is_unsupported_naming_it_and_the_accepted_ones(encoding):
    expected = f"content encoding '{encoding}' is not supported; accepted: identity, gzip, deflate, snappy"
    with pytest.raises(UnsupportedMediaType, match=re.escape(expected)):
        decompress(b"x", encoding, max_bytes=ONE_MIB)


def test_several_encodings_at_once_are_unsupported():
    with pytest.raises(UnsupportedMediaType, match="applies several encodings; only one is supported"):
        decompress(snappy(gzip.compress(BODY)), "gzip, snappy", max_bytes=ONE_MIB)


def test_an_unsupported_encoding_maps_to_http_415():
    assert UnsupportedMediaType("x").status == 415


def test_a_negative_limit_is_a_programming_error():
    with pytest.raises(ValueError, match="must not be negative"):
        decompress(gzip.compress(BODY), "gzip", max_bytes=-1)
