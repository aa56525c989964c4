"""Benchmarks of Jointline against the production stack (PostgreSQL, Redis, gunicorn, Celery).

Each module is a script, e.g. ``python bench/ingest.py``; :mod:`bench._harness` holds what they share.
"""
