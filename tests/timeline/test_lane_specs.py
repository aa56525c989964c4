"""One table of lane-spec cases (``lane_specs.json``) that the Python parser and the browser's parser
must both agree with, so the two sides cannot drift (a lane added twice under two spellings)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from timeline.lanes import LaneSpec, LaneSpecError

HERE = Path(__file__).parent
CASES = json.loads((HERE / "lane_specs.json").read_text(encoding="utf-8"))["cases"]
SPEC_JS = HERE.parents[1] / "warroom" / "static" / "timeline" / "spec.js"
CHECK = HERE / "lane_specs_check.mjs"


@pytest.mark.parametrize("case", CASES, ids=[repr(case["text"]) for case in CASES])
def test_the_python_parser_gives_each_shared_case_its_canonical_text_or_an_error(case):
    if case.get("error"):
        with pytest.raises(LaneSpecError):
            LaneSpec.parse(case["text"])
        return
    spec = LaneSpec.parse(case["text"])
    assert str(spec) == case["canonical"]
    assert LaneSpec.parse(case["canonical"]) == spec


def test_the_table_has_both_kinds_of_case():
    assert any(case.get("error") for case in CASES)
    assert any("canonical" in case for case in CASES)


def test_the_browser_parser_gives_each_shared_case_its_canonical_text_or_an_error():
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("node is needed to check warroom/static/timeline/spec.js in CI")
        pytest.skip("node is not installed")
    done = subprocess.run(
        [node, str(CHECK), str(SPEC_JS), str(HERE / "lane_specs.json")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout) == {"checked": len(CASES), "failures": []}
