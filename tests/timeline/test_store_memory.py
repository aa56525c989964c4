"""What only the in-memory fake store (store/memory.py) has to show: its samples follow the Django
transaction they were written in, values are finite, the first of a sample sent twice stays, its events
are the Django database's, and only the test settings let ``get_store()`` give it out."""

from __future__ import annotations

import math

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.test import override_settings

from store import ReadHints, get_store
from store.memory import MemoryStore
from tests.factories import T0, S, log_line, node_gauge, own_scope, write
from timeline.models import Series

pytestmark = pytest.mark.skipif(
    settings.JOINTLINE_STORE_BACKEND != "", reason="builds the fake over the Django database's own store"
)

WINDOW = ReadHints(start=T0, end=T0 + 3600 * S)


@pytest.fixture
def fake(db) -> MemoryStore:
    return MemoryStore(connection, relational=get_store())


def samples(store, org) -> list[float]:
    ids = list(Series.objects.scoped(own_scope(org)).values_list("pk", flat=True))
    read = store.select_samples(own_scope(org), ids, WINDOW)
    return [value for _ts, values in read.values() for value in values.tolist()]


class Died(Exception):
    pass


def test_a_rolled_back_write_leaves_its_samples_out_and_keeps_the_earlier_ones(fake, org_a):
    write(org_a, series=[node_gauge([1, 2])], store=fake)
    with pytest.raises(Died), transaction.atomic():
        write(org_a, series=[node_gauge([1, 2, 3, 4])], store=fake)
        assert samples(fake, org_a) == [1.0, 2.0, 3.0, 4.0]  # its own transaction sees them
        raise Died
    assert samples(fake, org_a) == [1.0, 2.0]
    assert write(org_a, series=[node_gauge([1, 2, 3, 4])], store=fake).samples_stored == 2


def test_a_rolled_back_retention_delete_puts_the_samples_back(fake, org_a):
    write(org_a, series=[node_gauge([1, 2, 3])], store=fake)
    with pytest.raises(Died), transaction.atomic():
        assert fake.delete_org_rows_before("samples", org_a.pk, T0 + 20 * S) == 2
        raise Died
    assert samples(fake, org_a) == [1.0, 2.0, 3.0]


def test_a_sample_sent_again_with_another_value_keeps_the_first(fake, org_a):
    write(org_a, series=[node_gauge([1, 2, 3])], store=fake)
    result = write(org_a, series=[node_gauge([9, 9, 9, 4])], store=fake)
    assert (result.samples_received, result.samples_stored) == (4, 1)
    assert samples(fake, org_a) == [1.0, 2.0, 3.0, 4.0]


def test_a_value_that_is_not_finite_is_refused(fake, org_a):
    with pytest.raises(ValueError, match="finite"):
        write(org_a, series=[node_gauge([1, math.nan])], store=fake)


def test_events_are_stored_and_read_by_the_django_databases_store(fake, org_a, org_b):
    write(org_a, events=[log_line(T0 + i * S, "", name=f"e{i}") for i in range(3)], store=fake)
    relational = fake.relational
    names = sorted(event.name for event in list(fake.select_events(own_scope(org_a), WINDOW)))
    assert names == sorted(event.name for event in list(relational.select_events(own_scope(org_a), WINDOW)))
    assert names == ["e0", "e1", "e2"]
    assert fake.count_events(own_scope(org_a), WINDOW).total == 3
    assert list(fake.select_events(own_scope(org_b), WINDOW)) == []


def test_get_store_gives_the_fake_only_where_the_settings_allow_it(db):
    with override_settings(JOINTLINE_STORE_BACKEND="memory", JOINTLINE_STORE_MEMORY_ALLOWED=True):
        assert get_store().vendor == "memory"
    with (
        override_settings(JOINTLINE_STORE_BACKEND="memory", JOINTLINE_STORE_MEMORY_ALLOWED=False),
        pytest.raises(ImproperlyConfigured, match="tests only"),
    ):
        get_store()
