"""The HTML pages: server-rendered Jinja2 templates (``templates/``) over the JSON API's data."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ._json import to_json
from ._state import dashboard


async def overview(request: Request) -> Response:
    board = dashboard(request)
    stats = to_json(await board.client.stats())
    return board.templates.TemplateResponse(request, "overview.html", {"stats": stats})


def page_routes() -> list[BaseRoute]:
    """The pages' routes."""
    return [Route("/", overview, methods=["GET"], name="overview")]
