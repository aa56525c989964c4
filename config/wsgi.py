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
"""

import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

YOUNG_OBJECTS = 50_000

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()
get_resolver().url_patterns  # noqa: B018 - imports every view module now, not on the first request

from store import get_store  # noqa: E402 - needs the settings loaded above

get_store()
gc.set_threshold(YOUNG_OBJECTS, *gc.get_threshold()[1:])
