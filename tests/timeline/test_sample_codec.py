"""The sample block codec (store/sample_codec.py): exact round trips of times and values, bit for bit,
a damaged block refused with a ValueError, and the size of typical blocks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store import sample_codec
from store.sample_codec import decode_block, decode_blocks, decode_times, decode_values, encode_block

T0 = 1_781_481_600_000_000  # 2026-06-15T00:00:00Z
MINUTE_US = 60_000_000
STALE_NAN_BITS = 0x7FF0000000000002  # Prometheus's stale marker


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and bool((a.view(np.uint64) == b.view(np.uint64)).all())


def round_trip(ts: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    times_blob, values_blob = encode_block(ts, values)
    return decode_block(times_blob, values_blob)


sorted_times = st.lists(
    st.integers(min_value=-(2**62), max_value=2**62), min_size=0, max_size=300, unique=True
).map(lambda xs: np.array(sorted(xs), dtype=np.int64))


@settings(max_examples=200, deadline=None)
@given(ts=sorted_times, data=st.data())
def test_any_sorted_times_and_any_float_bits_come_back_exactly(ts, data):
    bits = data.draw(st.lists(st.integers(0, 2**64 - 1), min_size=len(ts), max_size=len(ts)))
    values = np.array(bits, dtype=np.uint64).view(np.float64)
    got_ts, got_values = round_trip(ts, values)
    assert got_ts.dtype == np.int64 and (got_ts == ts).all()
    assert same_bits(got_values, values)


@settings(max_examples=100, deadline=None)
@given(
    xs=st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), min_size=0, max_size=100),
    floats=st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=0, max_size=100),
)
def test_extreme_times_in_any_order_and_any_floats_come_back(xs, floats):
    ts = np.array(xs, dtype=np.int64)
    assert (decode_times(sample_codec.encode_times(ts)) == ts).all()
    values = np.array(floats, dtype=np.float64)
    assert same_bits(decode_values(sample_codec.encode_values(values)), values)


def test_special_values_keep_their_bits():
    values = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, 5e-324, np.finfo(np.float64).max], dtype=np.float64
    )
    stale = np.array([STALE_NAN_BITS, 0x7FF8DEADBEEF0001, 0xFFF8000000000000], dtype=np.uint64)
    values = np.concatenate([values, stale.view(np.float64)])
    ts = T0 + np.arange(len(values), dtype=np.int64) * MINUTE_US
    got_ts, got_values = round_trip(ts, values)
    assert (got_ts == ts).all()
    assert same_bits(got_values, values)
    assert got_values.view(np.uint64)[8] == STALE_NAN_BITS
    assert np.signbit(got_values[1]) and got_values[1] == 0.0


@pytest.mark.parametrize("compressor", [sample_codec.LZ4, sample_codec.ZSTD, sample_codec.NONE])
def test_every_compressor_round_trips_and_the_header_names_it(compressor):
    rng = np.random.default_rng(2)
    ts = T0 + np.arange(500, dtype=np.int64) * MINUTE_US
    values = np.abs(2 + np.cumsum(rng.normal(0, 0.05, 500)))
    times_blob, values_blob = encode_block(ts, values, compressor=compressor)
    assert times_blob[1] == values_blob[1] == compressor
    got_ts, got_values = decode_block(times_blob, values_blob)
    assert (got_ts == ts).all() and same_bits(got_values, values)


def test_counter_with_resets_and_gaps_round_trips():
    rng = np.random.default_rng(3)
    ts = T0 + np.arange(2000, dtype=np.int64) * 15_000_000 + rng.integers(0, 900_000, 2000)
    ts = np.delete(ts, np.r_[100:400, 1500:1510])  # scrapes missed: gaps of minutes
    counter = np.cumsum(rng.exponential(5e5, len(ts)))
    counter[700:] -= counter[699]  # the process restarted: the counter starts again near zero
    counter[1200:] -= counter[1199] - 3.0
    got_ts, got_values = round_trip(ts, counter)
    assert (got_ts == ts).all() and same_bits(got_values, counter)


def test_one_sample_and_no_sample():
    for ts, values in (
        (np.array([T0], dtype=np.int64), np.array([42.0])),
        (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)),
    ):
        got_ts, got_values = round_trip(ts, values)
        assert got_ts.dtype == np.int64 and (got_ts == ts).all()
        assert same_bits(got_values, values)


def test_times_and_values_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="2 times and 1 values"):
        encode_block(np.array([T0, T0 + 1]), np.array([1.0]))
    times_blob, _ = encode_block(np.array([T0, T0 + 1]), np.array([1.0, 2.0]))
    _, other = encode_block(np.array([T0]), np.array([1.0]))
    with pytest.raises(ValueError, match="2 times and 1 values"):
        decode_block(times_blob, other)


def regular_blocks() -> tuple[bytes, bytes]:
    rng = np.random.default_rng(5)
    ts = T0 + np.arange(1440, dtype=np.int64) * MINUTE_US
    return encode_block(ts, np.round(rng.normal(20, 3, 1440)))


def test_truncated_block_raises_value_error():
    times_blob, values_blob = regular_blocks()
    for cut in (0, 3, sample_codec.HEADER.size, len(values_blob) - 1):
        with pytest.raises(ValueError, match="sample block"):
            decode_values(values_blob[:cut])
    with pytest.raises(ValueError, match="sample block"):
        decode_times(times_blob[: len(times_blob) // 2])


def test_damaged_block_raises_value_error():
    times_blob, values_blob = regular_blocks()
    for position in (sample_codec.HEADER.size, len(values_blob) // 2, len(values_blob) - 1):
        damaged = bytearray(values_blob)
        damaged[position] ^= 0x10
        with pytest.raises(ValueError, match="checksum"):
            decode_values(bytes(damaged))
    damaged = bytearray(times_blob)
    damaged[0] = 99  # another format version
    with pytest.raises(ValueError, match="format version 99"):
        decode_times(bytes(damaged))
    with pytest.raises(ValueError, match="kind"):
        decode_times(values_blob)  # values where times are expected


block_lists = st.lists(
    st.tuples(
        st.lists(st.integers(-(2**63), 2**63 - 1), max_size=40).map(lambda xs: np.array(xs, dtype=np.int64)),
        st.integers(0, 2**32),
    ),
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(blocks=block_lists)
def test_many_blocks_decode_at_once_as_each_decodes_alone(blocks):
    """Any times (wrapping deltas included) and any value bits: the batched decode gives each block's
    own numbers end to end, and its counts."""
    rng = np.random.default_rng(0)
    encoded, expected = [], []
    for ts, seed in blocks:
        bits = np.random.default_rng(seed).integers(0, 2**64 - 1, len(ts), dtype=np.uint64, endpoint=True)
        encoded.append(encode_block(ts, bits.view(np.float64), compressor=int(rng.choice([0, 1, 2]))))
        expected.append(decode_block(*encoded[-1]))
    ts, values, counts = decode_blocks(encoded)
    assert counts.tolist() == [len(one) for one, _values in expected]
    assert (ts == np.concatenate([np.empty(0, np.int64), *(one for one, _values in expected)])).all()
    assert same_bits(values, np.concatenate([np.empty(0), *(one for _ts, one in expected)]))


def test_many_blocks_with_one_damaged_or_uneven_raise_value_error():
    ts = T0 + MINUTE_US * np.arange(50)
    good = encode_block(ts, np.arange(50.0))
    damaged = bytearray(good[1])
    damaged[-1] ^= 0x10
    with pytest.raises(ValueError, match="checksum"):
        decode_blocks([good, (good[0], bytes(damaged)), good])
    with pytest.raises(ValueError, match="differ in number"):
        decode_blocks([good, (good[0], encode_block(ts[:49], np.arange(49.0))[1])])
    with pytest.raises(ValueError, match="kind"):
        decode_blocks([(good[1], good[0])])


def bytes_per_sample(ts: np.ndarray, values: np.ndarray) -> float:
    times_blob, values_blob = encode_block(ts, values)
    return (len(times_blob) + len(values_blob)) / len(ts)


def test_bytes_per_sample_of_a_regular_gauge_and_of_noise():
    rng = np.random.default_rng(11)
    ts = T0 + np.arange(1440, dtype=np.int64) * MINUTE_US  # a day at 60 s
    slots = np.clip(np.round(20 + np.cumsum(rng.normal(0, 1, 1440))), 0, 64)  # a gauge of small integers
    walk = np.abs(2 + np.cumsum(rng.normal(0, 0.05, 1440)))  # a gauge of full-precision floats
    noise = np.frombuffer(rng.bytes(8 * 1440), dtype=np.float64)  # any bits at all
    jittered = ts + rng.integers(0, 2_000_000, 1440)  # scrapes up to 2 s late
    sizes = {
        "regular gauge": bytes_per_sample(ts, slots),
        "regular float walk": bytes_per_sample(ts, walk),
        "jittered float walk": bytes_per_sample(jittered, walk),
        "noise": bytes_per_sample(np.sort(rng.integers(T0, T0 + 86_400_000_000, 1440)), noise),
    }
    print("bytes per sample:", ", ".join(f"{name} {size:.2f}" for name, size in sizes.items()))
    # regular times cost almost nothing; small integers XOR to mostly zero bytes
    assert sizes["regular gauge"] < 2.0
    # a full-precision walk keeps its mantissa's noise, but the sign, exponent and times mostly compress
    assert sizes["regular float walk"] < 7.5
    assert sizes["jittered float walk"] < sizes["regular float walk"] + 3.5
    # noise does not compress, but the framing adds little to its 16 raw bytes
    assert 12.0 < sizes["noise"] < 17.0
