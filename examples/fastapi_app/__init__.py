"""A FastAPI app that hands work to jobsched workers (docs/integrations.md).

``tasks`` holds the tasks, and imports nothing of FastAPI: a worker imports
it (``jobsched worker --store URL --import fastapi_app.tasks``, run from
``examples/``) without the web app. ``app`` is the web app.
"""
