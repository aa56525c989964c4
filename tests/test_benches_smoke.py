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
