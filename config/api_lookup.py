"""Looking up one object for a request: what the caller may not read answers 404 like what does not exist.

Selectors return None both for a missing row and for one of another organisation the scope may not
read, so a 404 says nothing about whether it exists (STYLE: fail closed, no existence leak).
"""

from __future__ import annotations

from typing import TypeVar

from django.http import Http404

Row = TypeVar("Row")


def found(row: Row | None, what: str) -> Row:
    """``row``, or :class:`~django.http.Http404` ``no such <what>`` when there is none."""
    if row is None:
        raise Http404(f"no such {what}")
    return row
