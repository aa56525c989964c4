"""config.settings with the ops middleware and URLs wired in, for the deploy test's subprocesses.

Used only while config/settings.py and config/urls.py do not wire ops in yet; the deploy test
runs config.settings itself as soon as they do (see ``tests/ops/test_deploy.py``).
"""

from config.settings import *  # noqa: F403
from config.settings import MIDDLEWARE

OPS_MIDDLEWARE = ["ops.middleware.ProbeMiddleware", "ops.middleware.ApiMetricsMiddleware"]

MIDDLEWARE = [*OPS_MIDDLEWARE, *(m for m in MIDDLEWARE if m not in OPS_MIDDLEWARE)]
ROOT_URLCONF = "tests.ops.urls"
