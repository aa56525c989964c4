"""Read API views answered over one window: ``from`` and ``to``, then what was read in the window.

The window is the query's (:class:`timeline.api_params.WindowQuery`), read on the clock its ``align``
asks for (corrections on unless ``align=off``); the answer opens with the window's bounds, as
:class:`timeline.api_shapes.WindowShape` documents them.
"""

from __future__ import annotations

from rest_framework.response import Response

from clock.model import aligned_param, use_clock
from orgs.api_base import QueryAPIView
from timeline.api_shapes import window_bounds
from timeline.selectors import Window


# A QueryAPIView whose answer is read over the query's window: a view declares ``query_class``,
# ``summary`` and ``responses`` (a WindowShape) and ``read``. (No docstring: the schema describes an
# endpoint without one of its own by the first docstring up its class tree, and one here would be it.)
class WindowAPIView(QueryAPIView):
    def answer(self, query: dict) -> Response:
        window = query["window"]
        with use_clock(self.scope, aligned=aligned_param(query.get("align"))):
            found = self.read(query, window)
        return Response({**window_bounds(window), **found})

    def read(self, query: dict, window: Window) -> dict:
        """What the answer holds after ``from`` and ``to``: read in ``window``, on the query's clock."""
        raise NotImplementedError
