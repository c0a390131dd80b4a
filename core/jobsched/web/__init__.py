"""``jobsched web``: a dashboard and JSON API over a store, as a Starlette app.

Installed with ``pip install 'jobsched[web]'`` (Starlette, Jinja2, uvicorn);
never imported by ``jobsched`` itself. `create_app` builds the ASGI
application; ``jobsched web --store URL`` serves it (the ``web`` plugin). See
docs/web.md.
"""

from __future__ import annotations

from ._app import create_app
from ._http import bound_hosts, check_host_pattern
from ._state import Dashboard, dashboard, template_environment

__all__ = [
    "Dashboard",
    "bound_hosts",
    "check_host_pattern",
    "create_app",
    "dashboard",
    "template_environment",
]
