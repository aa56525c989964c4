"""The WSGI application gunicorn serves.

Each worker imports this module when it starts (no ``preload_app``: after the master set
``PROMETHEUS_MULTIPROC_DIR``), and does here what its first request would otherwise wait for:

* loads the URL table, with every view module it names: in one process, a first PromQL query over a
  day of 60 series took 353 ms without them loaded, 194 ms with them (20 ms once its samples are
  cached);
* imports the store of its database engine (``get_store``; eleven modules on PostgreSQL, which the
  views import only when they first read): 100-130 ms of a worker's first query at load 4, the
  modules compiled from source;

and gunicorn's ``post_worker_init`` (``config/gunicorn.py``) then opens the worker's database
connection (16-20 ms at load 4), not here: whatever imports this module (a test, another server)
must not connect at import.

This module also raises the collector's first threshold (:data:`YOUNG_OBJECTS`): a long lanes request keeps
large lists young (a lane's buckets as numbers, the rows of a read), and with Python's default of
700 each of its 3-6 young collections walked them again: 6-7 ms of the request at 24 h to 24 d,
none with the threshold raised (docs/decisions/0053-no-covering-rollup-index-and-fewer-young-collections.md).
Cycles are still collected, every :data:`YOUNG_OBJECTS` objects made and not freed.

It also keeps memory a request freed for the next one instead of handing it back to the system at once
(:func:`keep_freed_memory`): a PromQL query over a day of 60 series makes numpy arrays of 2.8 MB by
the dozen, and with glibc's defaults the heap's free top went back to the system after each one, so
every query touched ~27 MB of new pages again (6,800 page faults a query; in-process 49 ms against 43
with the memory kept, decoding the day's blocks 13.5 ms against 8). Decision 0063.
"""

import ctypes
import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

YOUNG_OBJECTS = 50_000
MMAP_THRESHOLD = 32 * 2**20
"""Allocations from this size on get pages of their own (glibc's largest; its default starts at 128 kB
and rises with what is freed); smaller ones come from the heap."""
TRIM_THRESHOLD = 64 * 2**20
"""Free memory at the top of the heap kept for the next requests, at most."""
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (malloc.h)


def keep_freed_memory() -> bool:
    """glibc's malloc told to keep up to :data:`TRIM_THRESHOLD` of freed heap (and to serve arrays
    under :data:`MMAP_THRESHOLD` from it), so a request's temporary arrays reuse the pages of the
    previous request's instead of faulting new ones in; False where the C library is not glibc."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()
get_resolver().url_patterns  # noqa: B018 - imports every view module now, not on the first request

from store import get_store  # noqa: E402 - needs the settings loaded above

get_store()
gc.set_threshold(YOUNG_OBJECTS, *gc.get_threshold()[1:])
keep_freed_memory()
