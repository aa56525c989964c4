"""The WSGI application gunicorn serves.

Each worker imports this module when it starts (no ``preload_app``: after the master set
``PROMETHEUS_MULTIPROC_DIR``), and does here what its first request would otherwise wait for:

* loads the URL table, with every view module it names: in one process, a first PromQL query over a
  day of 60 series took 353 ms without them loaded, 194 ms with them (20 ms once its samples are
  cached);
* imports the store of its database engine (``get_store``; eleven modules on PostgreSQL, which the
  views import only when they first read): 100-130 ms of a worker's first query at load 4, the
  modules compiled from source;
* opens its database connection (16-20 ms at load 4), kept as any other (``DATABASE_CONN_MAX_AGE``),
  where a worker answers in its main thread (``JOINTLINE_WEB_THREADS`` 1, the default); a database
  not reachable yet is left to the first request, which reports it as usual.
"""

import contextlib
import os

from django.core.wsgi import get_wsgi_application
from django.db import DatabaseError, connection
from django.urls import get_resolver

from config.env import env_int

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()
get_resolver().url_patterns  # noqa: B018 - imports every view module now, not on the first request

from store import get_store  # noqa: E402 - needs the settings loaded above

get_store()
if env_int("JOINTLINE_WEB_THREADS", 1, minimum=1) == 1:
    with contextlib.suppress(DatabaseError):
        connection.ensure_connection()
