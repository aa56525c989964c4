"""Every alternative root cause of the scenario is found by the "what changed" ranking: stored with the
walkthrough's grants up to the end of its incident, the incident window (the manifest's ``cause``)
against the hour before puts the cause's lanes in the top 3 for every organisation's viewer who may
read them, and the onset of the cause's signals is not later than the symptoms' (within their
uncertainty)."""

from __future__ import annotations

import pytest

from analysis.changes import Period, rank_changes
from analysis.onsets import onsets
from clock.model import read_hints
from ingest.scenario import CAUSES, REFERENCE_CAUSE, ScenarioConfig, cause_truth, generate
from ingest.scenario_loading import demo_organisations_create, store_until
from orgs.access import Scope
from orgs.models import Role
from orgs.services import user_create
from store import EventMatch, get_store
from tests.conftest import PASSWORD
from timeline.lanes import readable_series

ALTERNATIVES = [c for c in CAUSES if c != REFERENCE_CAUSE]


def _store(cause: str, seed: int | None):
    """The compact scenario of ``cause`` (60 s scrapes; ``seed``, or the default one) stored up to the
    end of its incident, with the walkthrough's grants and one viewer per organisation; returns
    (truth, viewers)."""
    overrides = {} if seed is None else {"seed": seed}
    scenario = generate(ScenarioConfig.compact(step_s=60, detail_step_s=60, cause=cause, **overrides))
    truth = cause_truth(scenario.manifest)
    orgs = demo_organisations_create()
    store_until(scenario.batches(), truth["window_us"][1])
    viewers = {
        slug: user_create(org=org, username=f"{slug}-viewer", role=Role.VIEWER, password=PASSWORD)[0]
        for slug, org in orgs.items()
    }
    return truth, viewers


def _matches(entry, lane: dict) -> bool:
    return (
        entry.org.slug == lane["org"]
        and entry.title == lane["title"]
        and all(entry.labels.get(k, v) == v for k, v in lane["labels"].items())
    )


def _visible(scope: Scope, lane: dict, window: Period) -> bool:
    title = lane["title"]
    if title.endswith(")") and " (" in title:
        hints = read_hints(scope, start=window.start, end=window.end)
        name = title.split(" (")[0]
        return get_store().any_events(scope, hints, match=EventMatch(org_slugs=(lane["org"],), names=(name,)))
    series = readable_series(scope, include_aggregate=True).filter(org__slug=lane["org"], metric=title)
    if lane["labels"]:
        series = series.filter(labels__contains=lane["labels"])
    series = list(series)
    return bool(series) and scope.fleet_readable(series)


def _earliest(found, lanes):
    timed = [o for o in found if o.t_us is not None and any(_matches(o.entry, lane) for lane in lanes)]
    return min(timed, key=lambda o: o.t_us, default=None)


@pytest.mark.parametrize("seed", [None, 3], ids=["default-seed", "seed-3"])
@pytest.mark.parametrize("cause", ALTERNATIVES)
def test_each_alternative_cause_ranks_on_top_for_the_viewers_who_may_read_it(db, cause, seed):
    truth, viewers = _store(cause, seed)
    window, baseline = Period(*truth["window_us"]), Period(*truth["baseline_us"])
    seen_by = []
    symptom_onsets = {}
    for slug, user in viewers.items():
        scope = Scope.for_user(user)
        ranking = rank_changes(scope, window=window, baseline=baseline, limit=30)
        top = [(e.org.slug, e.title, e.labels, round(e.score, 3)) for e in ranking.entries[:6]]
        visible = [lane for lane in truth["lanes"] if _visible(scope, lane, window)]
        found = onsets(scope, ranking, top=len(ranking.entries))
        symptom_onsets[slug] = _earliest(found, truth["symptoms"])
        if not visible:
            continue
        seen_by.append(slug)
        for lane in visible:
            assert any(_matches(e, lane) for e in ranking.entries[:3]), (slug, lane["title"], top)
        _assert_localised_to_the_rack(ranking.entries[:3], truth, slug)
        first = _earliest(found, truth["signals"])
        symptom = symptom_onsets[slug] or symptom_onsets.get("modeldev")
        assert first is not None, (slug, top)
        if symptom is not None:
            slack = first.uncertainty_us + symptom.uncertainty_us
            assert first.t_us <= symptom.t_us + slack, (slug, first.t_us, symptom.t_us)
    assert truth["org"] in seen_by


def _assert_localised_to_the_rack(entries, truth: dict, slug: str) -> None:
    """A cause confined to one rack is said to be there (the network inventory's racks and switches
    are shared with everyone), and no entry is localised anywhere else."""
    places = [x["entities"] for e in entries for x in e.explanations if x.get("role") == "localised"]
    for entities in places:
        assert f"rack {truth.get('rack')}" in entities, (slug, places)
    if truth.get("rack") and slug == truth["org"]:
        assert places, (slug, [(e.title, e.explanations) for e in entries])
