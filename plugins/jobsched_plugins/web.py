"""The ``web`` plugin: ``jobsched web --store URL``, the dashboard served by uvicorn.

The command is always listed; running it without the ``web`` extra
(Starlette, Jinja2, uvicorn) exits with code 2 and the install line. Loading
this plugin imports none of them, so every other command stays as fast.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import signal
import socket
import sys
from collections.abc import Iterator
from typing import Any

from jobsched import Client, SchedulerError, hookimpl
from jobsched.store import (
    StoreContext,
    new_worker_id,
    offers_a_role,
    require_roles,
    resolve_store,
)

#: The environment variable the token is read from when ``--token`` is not given.
TOKEN_ENV = "JOBSCHED_WEB_TOKEN"
#: The levels ``--log-level`` takes.
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
#: What ``jobsched[web]`` installs (import names).
REQUIRES = ("starlette", "jinja2", "uvicorn")
#: Seconds open requests (event streams) get to end when the server stops.
GRACE = 2


@hookimpl
def jobsched_register_commands(cli: Any) -> None:
    parser = cli.add_command(
        "web",
        help="serve the web dashboard and JSON API of a store",
        handler=serve,
        description="Serve the dashboard and JSON API of a store: PostgreSQL, or any "
        "SQLite file jobsched wrote, `jobsched run --store` included (docs/web.md). "
        f"Without a token (--token or {TOKEN_ENV}) it is read-only.",
    )
    parser.add_argument("--store", required=True, metavar="URL", help="the store's URL")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to listen on (default: 127.0.0.1; 0.0.0.0 for every interface)",
    )
    parser.add_argument(
        "--port", type=int, default=8000, help="the port (default: 8000; 0 picks a free one)"
    )
    parser.add_argument(
        "--allowed-host",
        dest="allowed_hosts",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name (or IP address or network) the dashboard answers to besides "
        "the address it listens on (repeatable; *.example.com allows every name under "
        "it): a request naming another host is refused, as a DNS-rebinding page's would be",
    )
    parser.add_argument(
        "--token",
        help=f"the token that allows actions (default: ${TOKEN_ENV}; prefer the variable: "
        "a command line is visible to other users)",
    )
    parser.add_argument(
        "--log-format",
        choices=("console", "json"),
        default="console",
        help="how log lines (the audit of every action among them) look on stderr "
        "(default: console; json is one object per line)",
    )
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="info",
        help="the least severe level logged (default: info: every action's audit entry)",
    )
    parser.set_defaults(plugins=cli.plugins)


def configure_logging(log_format: str, log_level: str) -> None:
    """structlog for this process, to stderr: ``jobsched web`` is the application
    (the dashboard, a library, logs the ``jobsched.web.audit`` entries and its
    errors through structlog and never configures it)."""
    import logging

    import structlog

    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if log_format == "json":
        processors += [structlog.processors.dict_tracebacks, structlog.processors.JSONRenderer()]
    else:
        processors.append(structlog.dev.ConsoleRenderer(colors=False))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, log_level.upper())),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


def _fail(message: str) -> int:
    print(f"jobsched: error: {message}", file=sys.stderr, flush=True)
    return 2


def serve(args: argparse.Namespace) -> int:
    """``jobsched web``: open the store, listen, print the URL, serve until interrupted."""
    missing = [name for name in REQUIRES if importlib.util.find_spec(name) is None]
    if missing:
        return _fail(f"jobsched web needs {', '.join(missing)}: pip install 'jobsched[web]'")
    if not 0 <= args.port <= 65535:
        return _fail(f"--port must be 0 to 65535, got {args.port}")
    token = args.token if args.token is not None else os.environ.get(TOKEN_ENV) or None
    if token is not None and not token.strip():
        return _fail("--token must not be empty (omit it for a read-only dashboard)")
    try:
        from jobsched.web import check_host_pattern

        for name in args.allowed_hosts:
            check_host_pattern(name)
    except ValueError as exc:
        return _fail(f"--allowed-host: {exc}")
    try:
        sock = _listen(args.host, args.port)
    except OSError as exc:
        return _fail(f"cannot listen on {args.host}:{args.port}: {exc}")
    try:
        return asyncio.run(_serve(args, token, sock))
    except SchedulerError as exc:  # the store cannot be opened
        return _fail(str(exc))
    finally:
        sock.close()


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)  # connections wait in the backlog until uvicorn accepts
    except OSError:
        sock.close()
        raise
    return sock


async def _serve(args: argparse.Namespace, token: str | None, sock: socket.socket) -> int:
    import uvicorn

    from jobsched.web import bound_hosts, create_app

    await _check_exists(args.store, args.plugins, needs=_roles(token))
    # Once the command's input is known good: until then it answers with one line and exit 2.
    configure_logging(args.log_format, args.log_level)
    client = Client(args.store, plugins=args.plugins)
    # Its own address (all of the machine's when bound to 0.0.0.0) and the names given.
    hosts = [*bound_hosts(args.host), *args.allowed_hosts]
    app = create_app(client=client, token=token, plugins=args.plugins, allowed_hosts=hosts)
    async with client:
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        mode = "actions need the token" if token else f"read-only: no --token or {TOKEN_ENV}"
        print(f"jobsched web: http://{shown}:{port}/ ({mode})", flush=True)
        # Open event streams never end by themselves: give them this long at shutdown.
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=GRACE
        )
        await _server_class()(config).serve(sockets=[sock])
    return 0


def _roles(token: str | None) -> tuple[str, ...]:
    """The store roles the dashboard needs: it shows jobs, the queue and the
    schedules; with a token it acts on them too (`jobsched.store.ROLES`)."""
    return ("lookup", "inspect", "schedules", *(("operate",) if token else ()))


async def _check_exists(url: str, plugins: Any, needs: tuple[str, ...]) -> None:
    """Refuse a store that does not exist yet (a typo in the URL), creating
    nothing, or that lacks a role of `needs` (`MissingRoleError`, naming it).

    Opened read-only first, as the operator commands do: a new SQLite file or
    PostgreSQL schema is a `StoreError` naming it, never a new empty store.
    """
    store = resolve_store(url, plugins)
    if store is None or not offers_a_role(store):
        raise SchedulerError(
            f"--store {url!r} is not a store several processes can share "
            "(postgresql://host/db, or sqlite:////abs/path/jobs.db in shared mode)"
        )
    require_roles(store, needs, "jobsched web")
    await store.open(StoreContext(worker_id=new_worker_id(), readonly=True, load=False))
    await store.close()


def _server_class() -> Any:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, stopped by SIGINT/SIGTERM as a normal end (exit code 0).

        uvicorn would raise the signal again once it has shut down, which the
        command line reports as an interruption (exit code 130).
        """

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self.handle_exit, sig, None)
            try:
                yield
            finally:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(sig)

    return Server
