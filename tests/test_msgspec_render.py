"""The lanes answers written by msgspec (config.json_render) are the documents DRF's JSONRenderer wrote:
parsed back, equal, on hand-made values and on real answers of both lanes APIs."""

from __future__ import annotations

import decimal
import json
import math
import random

import msgspec
import numpy as np
import pytest
from django.utils.translation import gettext_lazy
from rest_framework.exceptions import ErrorDetail
from rest_framework.renderers import JSONRenderer

from config.json_render import MsgspecJSONRenderer, encode
from tests.conftest import nic_batch, push
from tests.factories import T0, gauge, write
from timeline.lanes import SeriesLane
from warroom.api import lanes_json


def drf(data) -> object:
    return json.loads(JSONRenderer().render(plain(data)))


def plain(data) -> object:
    """``data`` with each piece already written (``msgspec.Raw``) read back, for DRF's renderer."""
    if isinstance(data, msgspec.Raw):
        return msgspec.json.decode(data)
    if isinstance(data, dict):
        return {key: plain(value) for key, value in data.items()}
    if isinstance(data, list):
        return [plain(value) for value in data]
    return data


def ours(data) -> object:
    return json.loads(MsgspecJSONRenderer().render(data))


def test_numbers_strings_and_containers_read_back_the_same():
    rng = random.Random(5)
    floats = [rng.uniform(-1, 1) * 10 ** rng.uniform(-320, 308) for _ in range(2000)]
    floats += [0.0, -0.0, 1e16, 1e-7, 5e-324, 1.7976931348623157e308, 0.1 + 0.2, 1 / 3, 2.0**53 + 2]
    ints = [0, -1, 2**53 + 1, -(2**63), 2**63 - 1, *(rng.randrange(-(10**15), 10**15) for _ in range(500))]
    data = {
        "floats": floats,
        "ints": ints,
        "text": ["é", "☃", "\u2028", '"quoted" \\ back', "<script>", "\x00\x1f", "𝄞"],
        "nested": [{"a": None, "b": True, "c": [[], {}]}, (1, 2.5)],
        "nodes": {"node-01": 1.5, "ö": [None]},
    }
    assert ours(data) == drf(data)
    parsed = ours(data)
    assert all(
        math.copysign(1, a) == math.copysign(1, b) for a, b in zip(parsed["floats"], floats, strict=True)
    )
    assert parsed["floats"] == floats and parsed["ints"] == ints


def test_types_drf_knows_are_written_as_drf_writes_them():
    data = {
        "detail": ErrorDetail("must be between 1 and 4000", code="invalid"),
        "lazy": gettext_lazy("Lane data"),
        "numpy": np.array([1.5, 2.0]),
        "matrix": np.arange(6).reshape(2, 3),
        "scalars": [np.float64(0.25), np.int64(7), np.bool_(True), np.float32(0.5)],
        "decimal": decimal.Decimal("1.25"),
        "set": frozenset({3}),
    }
    assert ours(data) == drf(data)


def test_a_number_that_is_not_finite_is_null_where_drf_refused_the_answer():
    for value in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError):
            JSONRenderer().render({"mean": [1.0, value]})
        assert ours({"mean": [1.0, value]}) == {"mean": [1.0, None]}
    assert MsgspecJSONRenderer().render(None) == b""
    assert encode({"a": 1}) == b'{"a":1}'


@pytest.mark.django_db
def test_both_lanes_apis_answer_what_drf_would_have_written(client_a, pusher_a, org_a):
    assert push(pusher_a, nic_batch()).status_code == 202
    rng = random.Random(3)
    values = [rng.uniform(-1e9, 1e9) for _ in range(3 * 60)]
    write(org_a, series=[gauge("slots_in_use", {"node": "node-09"}, values, step_s=60)])
    series = client_a.get("/api/v1/series").json()["series"]
    window = {"from": "2026-06-15T00:00:07Z", "to": "2026-06-15T03:00:07Z", "width": 97}
    by_id = client_a.get("/api/v1/lanes", {**window, "series": ",".join(str(s["id"]) for s in series)})
    assert by_id.status_code == 200 and by_id["Content-Type"] == "application/json"
    document = json.loads(by_id.content)
    assert document == drf(by_id.data)
    assert sum(len(lane["t"]) for lane in document["lanes"]) > 50
    assert any(
        any(isinstance(v, float) and not v.is_integer() for v in lane["mean"]) for lane in document["lanes"]
    )
    # the lanes start where the buckets begin, in ms, as SeriesLane.starts computed them one by one
    for lane in document["lanes"]:
        assert all((t * 1000 - T0) % (lane["step_ms"] * 1000) == 0 for t in lane["t"])

    specs = ["line:modeldev/storage/slots_in_use", "band:modeldev/storage/slots_in_use"]
    absolute = {**window, "to": "2026-06-15T03:00:07Z", "lane": specs}  # not live: no cache entry
    drawn = client_a.get("/timeline/api/lanes", absolute)
    assert drawn.status_code == 200 and drawn["Content-Type"] == "application/json"
    document = json.loads(drawn.content)
    # its lanes are payload structs, which msgspec writes itself: DRF writes their builtins alike
    assert document == drf(msgspec.to_builtins(drawn.data)) and len(document["lanes"]) == 2
    assert document["lanes"][0]["status"] == "ok"


def test_lanes_on_the_same_buckets_write_their_times_once_into_the_same_bytes():
    rng = random.Random(8)
    origin, step = T0 * 1000 + 7_000_000, 1_800_000_000

    def lane(name: str, bucket: list[int], step: int = step) -> SeriesLane:
        values = [rng.uniform(-1e9, 1e9) for _ in bucket]
        return SeriesLane(
            {"id": name}, "value", step, origin, bucket, values, values, values, [1] * len(bucket)
        )

    lanes = [
        lane("a", list(range(1152))),
        lane("b", [0, 1, 5, 5000]),
        lane("c", list(range(1152))),
        lane("d", [0, 1, 5, 5000], step=step // 2),
        lane("e", []),
        lane("f", [0, 2, 5, 5000]),  # the same grid, length and ends as b's, other buckets
        lane("g", [0, 1, 5, 5000]),
        lane("h", []),
    ]
    written = lanes_json(lanes)
    assert encode({"lanes": written}) == encode({"lanes": [one.json() for one in lanes]})
    assert written[0]["t"] is written[2]["t"]  # written once for both
    assert written[1]["t"] is written[6]["t"] and written[4]["t"] is written[7]["t"]
    assert len({id(one["t"]) for one in written}) == 5
    assert msgspec.json.decode(written[1]["t"]) == [(origin + b * step) / 1000 for b in lanes[1].bucket]


def test_random_lanes_share_only_the_times_of_their_own_buckets():
    """Many lanes on two grids whose bucket lists often have the same length and ends (gaps drawn at
    random inside, NaN and infinite values beside): each lane's ``t`` is its own buckets' times, and the
    answer's bytes are those of every lane written on its own."""
    rng = random.Random(29)
    origin, step = T0 * 1000, 600_000_000
    lanes = []
    for i in range(200):
        size = rng.choice([0, 1, 2, 6])
        inner = sorted(rng.sample(range(1, 9), max(size - 2, 0)))
        bucket = [0, *inner, 9][:size] if size > 1 else [0] * size
        values = [rng.choice([float("nan"), float("inf"), -0.0, rng.uniform(-1e6, 1e6)]) for _ in bucket]
        lane_step = rng.choice([step, 2 * step])
        lanes.append(
            SeriesLane({"id": i}, "value", lane_step, origin, bucket, values, values, values, [1] * size)
        )
    written = lanes_json(lanes)
    assert encode({"lanes": written}) == encode({"lanes": [one.json() for one in lanes]})
    for lane, one in zip(lanes, written, strict=True):
        assert msgspec.json.decode(one["t"]) == [(origin + b * lane.step) / 1000 for b in lane.bucket]
    shared = {id(one["t"]) for one in written}
    assert len(shared) == len({(lane.step, tuple(lane.bucket)) for lane in lanes})


@pytest.mark.django_db
def test_a_refused_lanes_request_still_answers_the_error_shape(client_a):
    response = client_a.get("/api/v1/lanes", {"series": "1", "width": 0, "from": "now-1h", "to": "now"})
    assert response.status_code == 400
    assert json.loads(response.content) == drf(response.data)
    assert response.json()["errors"][0]["field"] == "width"
