"""When an apply has its rollups refreshed: at once when no journal entry waits, after the delay
(coalescing the applies in between) while others wait (decision 0054)."""

from __future__ import annotations

import pytest

from ingest.tasks import refresh_rollups_after_apply
from store import tasks
from tests.ingest.test_journal import journal, small_batch


@pytest.fixture
def sent(monkeypatch):
    """The refresh tasks sent, as the keyword arguments of their ``apply_async``."""
    calls: list[dict] = []
    monkeypatch.setattr(tasks.refresh_rollups, "apply_async", lambda **kw: calls.append(kw))
    return calls


@pytest.mark.django_db
def test_an_apply_that_drains_the_journal_sends_the_refresh_at_once(sent, settings):
    settings.JOINTLINE_ROLLUP_REFRESH_DELAY_S = 5.0
    refresh_rollups_after_apply()
    assert sent == [{}]


@pytest.mark.django_db
def test_an_apply_with_entries_waiting_leaves_the_refresh_to_the_delay(org_a, sent, settings):
    settings.JOINTLINE_ROLLUP_REFRESH_DELAY_S = 5.0
    journal(org_a, small_batch(1))
    refresh_rollups_after_apply()
    refresh_rollups_after_apply()
    assert sent == [{"countdown": 5.0}]


@pytest.mark.django_db
def test_one_immediate_refresh_is_pending_at_a_time_until_it_runs(sent):
    refresh_rollups_after_apply()
    refresh_rollups_after_apply()
    assert sent == [{}]
    tasks.refresh_rollups()
    refresh_rollups_after_apply()
    assert sent == [{}, {}]


@pytest.mark.django_db
def test_the_setting_turned_off_keeps_the_delay_for_an_idle_worker(sent, settings):
    settings.JOINTLINE_ROLLUP_REFRESH_WHEN_IDLE = False
    settings.JOINTLINE_ROLLUP_REFRESH_DELAY_S = 5.0
    refresh_rollups_after_apply()
    assert sent == [{"countdown": 5.0}]


@pytest.mark.django_db
def test_a_deferred_load_sends_no_refresh_even_when_idle(sent):
    with tasks.rollup_refresh_deferred():
        refresh_rollups_after_apply()
    assert sent == []
