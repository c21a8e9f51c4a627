"""The Celery application.

With `CELERY_BROKER_URL` unset, settings make tasks run eagerly in-process (the embedded
default); with a broker, they go to workers. Nothing connects to the broker at import time.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("mitl")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
