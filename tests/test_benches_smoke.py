"""Benchmarks in their smoke mode: each runs end to end on a little data, so a change that breaks one
is seen by the test suite, not first by whoever runs it for figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.nab_detection import DEFAULT_DATA, evaluate_nab_detection, summary_line


@pytest.mark.django_db(transaction=True)
def test_nab_detection_smoke_imports_labelled_series_and_scores_detector_and_floor():
    if not (DEFAULT_DATA / "labels" / "combined_windows.json").is_file():
        pytest.skip(f"the labelled development set is not beside the project ({DEFAULT_DATA})")
    result = evaluate_nab_detection(Path(DEFAULT_DATA), smoke=True)
    assert result["series"] == 3 and result["windows"] >= 3
    assert 0 <= result["floor_windows_found"] <= result["windows"]
    # the detector finds labelled windows on real series, at a small false-positive rate
    assert result["windows_found"] >= 1 and result["fp_per_day"] < 2
    assert summary_line(result).startswith(f"nab detection {result['windows_found']}/{result['windows']} ")


def test_nab_window_rule_scores_only_the_rows_of_a_file():
    """A detection inside a window finds it once, one outside every window is a false positive, and one
    after the series' last point (the detector runs past the data) is outside the file NAB scores."""
    import numpy as np

    from bench.nab_detection import LabelledSeries, after_the_data, window_score

    hour = 3_600_000_000
    ts = np.arange(0, 48 * hour, hour // 12, dtype=np.int64)
    one = LabelledSeries("cat/a", "a", ts, np.zeros(ts.size), [(10 * hour, 12 * hour)])
    times = {"cat/a": [11 * hour, 11 * hour + 1, 30 * hour, int(ts[-1]), int(ts[-1]) + hour // 2]}
    found, false, days = window_score(times, [one])
    assert (found, false) == (1, 2)
    assert after_the_data(times, [one]) == 1
    assert days == pytest.approx((int(ts[-1]) - int(ts[0])) / (24 * hour))


def test_a_first_place_shared_with_another_answers_score_is_counted_as_tied():
    """The real-data ranking bench says how many of its first places are ties ordered by title."""
    from types import SimpleNamespace as Entry

    from bench.analysis_real import Tally, tied_first

    def title(entry):
        return entry.title

    tied = [Entry(title="cause", score=2.0), Entry(title="beside", score=2.0), Entry(title="x", score=1.0)]
    clear = [Entry(title="cause", score=2.0), Entry(title="cause", score=2.0), Entry(title="x", score=1.5)]
    assert tied_first(tied, title, "cause") and not tied_first(clear, title, "cause")
    assert not tied_first(tied[1:], title, "cause")  # not first: no tie of a first place
    tally = Tally()
    tally.add(1, 2, tied=True)
    tally.add(1, 1, tied=False)
    tally.add(2, 1, tied=True)
    assert tally.text() == "top1 2/3 (1 tied) top3 3/3 (floor top1 2/3 top3 3/3)"


def test_detection_bench_lists_each_failure_with_the_lead_its_precursor_allows():
    """``bench/detection.py --verbose`` lists every failure: its precursor (kind, clear or weak), the
    minutes it drifts before the XID (the most lead any detector could have) and the lead found, so
    a figure "k/n before the XID" can be read failure by failure."""
    from bench.detection import score

    minute = 60_000_000
    failures = [
        {
            "node": "n1",
            "ts_us": 100 * minute,
            "precursor": "power",
            "precursor_clear": False,
            "precursor_start_us": 80 * minute,
        },
        {"node": "n2", "ts_us": 200 * minute, "precursor": None, "precursor_start_us": None},
        {
            "node": "n3",
            "ts_us": 300 * minute,
            "precursor": "ecc_sbe",
            "precursor_clear": True,
            "precursor_start_us": 270 * minute,
        },
    ]
    manifest = {"gpu_failures": failures, "config": {"duration_s": 86_400}}
    detections = [
        {"entity": "n1", "ts": 98 * minute},
        {"entity": "n2", "ts": 201 * minute},
        {"entity": "n9", "ts": 50 * minute},
    ]
    result = score(detections, manifest, lead_us=30 * minute, after_us=10 * minute)
    rows = result["per_failure"]
    assert [r["precursor"] for r in rows] == ["power weak", "none", "ecc_sbe clear"]
    assert [r["available_min"] for r in rows] == [20.0, 0.0, 30.0]
    assert rows[0]["lead_min"] == pytest.approx(2.0) and rows[1]["lead_min"] == pytest.approx(-1.0)
    assert rows[2]["lead_min"] is None
    assert (result["detected"], result["early"], result["false_positives"]) == (2, 1, 1)
