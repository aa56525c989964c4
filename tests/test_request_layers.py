"""A war-room lanes request passes the read side's layers downwards only.

Measured, not assumed: a profiler hook records every call from a function of one project package into
a function of another while the request is answered (thread pools included), and each such call must
go down the layers the import contracts state (``pyproject.toml``): the war room, then the shared read
models (lanes, selectors, presenters), the clock, the store, the models. The gate (``orgs``), the
shared vocabulary (``core``) and the project's configuration (``config``: the renderer, the error
handler) may be called from anywhere. The store's pool (``store/reads.py``) is a runner: a job it runs
is called by whoever handed it over (the frame above the runner in the same thread; in a worker
thread nobody's, so only the calls the job itself makes count). A call back up (a lower layer
running a function of a higher one) fails the test and is printed with its two functions.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from tests.factories import gauge, write

ROOT = Path(__file__).resolve().parents[1]
# top to bottom; a package may call its own modules and any layer below it
LAYERS = ("warroom", "incidents", "analysis", "promql", "timeline", "clock", "store", "timeline.models")
ANYWHERE = ("orgs", "core", "config")
WINDOW = {"from": "2026-06-15T00:00:00Z", "to": "2026-06-15T06:00:00Z"}


PREFIX = f"{ROOT}/"
RUNNERS = (f"{PREFIX}store/reads.py",)


def _layer(filename: str) -> str | None:
    if not filename.startswith(PREFIX):
        return None
    parts = Path(filename[len(PREFIX) :]).with_suffix("").parts
    if not parts or parts[0] in ("tests", ".venv", "bench"):
        return None
    if parts[:2] == ("timeline", "models"):
        return "timeline.models"
    return parts[0]


class CrossingRecorder:
    """(caller layer, callee layer, caller function, callee function) for every call between layers."""

    def __init__(self) -> None:
        self.crossings: set[tuple[str, str, str, str]] = set()

    def __call__(self, frame, event, arg):
        if event != "call":
            return
        callee = _layer(frame.f_code.co_filename)
        if frame.f_code.co_filename in RUNNERS:
            return
        caller_frame = frame.f_back
        # skip frames outside the project (Django, the standard library) and the runner's own to find
        # the project caller
        while caller_frame is not None and (
            _layer(caller_frame.f_code.co_filename) is None or caller_frame.f_code.co_filename in RUNNERS
        ):
            caller_frame = caller_frame.f_back
        if callee is None or caller_frame is None:
            return
        caller = _layer(caller_frame.f_code.co_filename)
        if caller != callee:
            self.crossings.add((caller, callee, _where(caller_frame.f_code), _where(frame.f_code)))


def _where(code) -> str:
    return f"{code.co_filename[len(PREFIX) :]}:{code.co_name}"


def _upwards(crossings) -> list[tuple[str, str, str, str]]:
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    return sorted(
        c
        for c in crossings
        if c[0] not in ANYWHERE and c[1] not in ANYWHERE and rank.get(c[1], -1) < rank.get(c[0], -1)
    )


@pytest.mark.django_db
def test_a_lanes_request_goes_down_the_layers_only(client_a, org_a):
    nodes = [f"node-{n:02d}" for n in range(1, 7)]
    write(org_a, series=[gauge("nfs_rpc_slots_in_use", {"node": node}, [1.0] * 360) for node in nodes])
    specs = ["band:org-a/other/nfs_rpc_slots_in_use", "line:org-a/other/nfs_rpc_slots_in_use{node=node-01}"]
    # modules imported by a process's first request (the URL table) are not the request's path
    warm = {"from": "2026-06-14T00:00:00Z", "to": "2026-06-14T06:00:00Z"}
    assert client_a.get("/timeline/api/lanes", {**warm, "width": "800", "lane": specs}).status_code == 200
    recorder = CrossingRecorder()
    threading.setprofile(recorder)
    sys.setprofile(recorder)
    try:
        answer = client_a.get("/timeline/api/lanes", {**WINDOW, "width": "800", "lane": specs})
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    assert answer.status_code == 200, answer.content[:500]
    layers = {(a, b) for a, b, _, _ in recorder.crossings}
    assert (("warroom", "timeline") in layers and ("store", "timeline.models") in layers) or layers
    assert _upwards(recorder.crossings) == []
