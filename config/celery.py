import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# Autodiscovery imports each app's own ``tasks`` module only; task modules deeper in an app (the live
# detector's) are named here, or the worker would discard what beat sends them as unregistered
# (tests/ops/test_worker_tasks.py checks every task of the beat schedule against the worker's).
TASK_MODULES_BEYOND_APPS = ("analysis.tasks",)

app = Celery("jointline", include=TASK_MODULES_BEYOND_APPS)
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
