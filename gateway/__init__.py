"""The Django project: settings, URLs, the ASGI entry point and the Celery app."""

from gateway.celery import app as celery_app

__all__ = ["celery_app"]
