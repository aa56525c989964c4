"""Deferring rollup upkeep for a bulk load: writes made inside :func:`rollup_refresh_deferred` queue
their minutes and start no refresh, and the loader refreshes once at the end."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

_DEFERRED: contextvars.ContextVar[bool] = contextvars.ContextVar("jointline_rollups_deferred", default=False)


@contextlib.contextmanager
def rollup_refresh_deferred() -> Iterator[None]:
    """Within the block, writes made here leave their rollups queued (none is merged from the batch)
    and applies run here (eager Celery) start no refresh: a bulk load is refreshed once afterwards
    (``manage.py refresh_rollups``, or beat where a worker runs) instead of after every batch; reads
    meanwhile use the raw samples of what waits. Writes in a worker process are not affected."""
    token = _DEFERRED.set(True)
    try:
        yield
    finally:
        _DEFERRED.reset(token)


def rollup_refresh_is_deferred() -> bool:
    """Whether this code runs inside :func:`rollup_refresh_deferred` (whose owner refreshes)."""
    return _DEFERRED.get()
