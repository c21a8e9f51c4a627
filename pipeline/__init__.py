"""The pipeline app: each stage's database edge, the Celery tasks and the commands.

Above `annotation/` (models and crowd work) and `mitl/` (pure rules); below the pages.
"""
