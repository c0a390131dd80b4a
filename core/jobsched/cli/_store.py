"""``jobsched store sql``: a store's schema as SQL, for a DBA to review and apply."""

from __future__ import annotations

import argparse
import sys
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .. import PluginManager
from ..store import SchemaScript, resolve_store
from ._common import BadInput

#: What ``--store`` means when it names only the kind of store.
_SHORTHANDS = {
    "postgresql": "postgresql://localhost/",
    "postgres": "postgresql://localhost/",
    "sqlite": "sqlite:///jobs.db",
}


def add_parser(subparsers: Any) -> None:
    group = subparsers.add_parser(
        "store",
        help="print a store's schema as SQL",
        description="Work with a store's schema without opening the store.",
    )
    commands = group.add_subparsers(title="commands", metavar="COMMAND", required=True)
    sql = commands.add_parser(
        "sql",
        help="print the SQL that creates or migrates a store's schema (for a DBA)",
        description="Print the SQL that creates a store's schema at the version this "
        "jobsched writes, or with --from migrates it from an older version: the "
        "statements a worker or a client runs when it opens the store, in one "
        "transaction. Apply it with psql (or sqlite3 FILE < script); a store opened on "
        "the result migrates nothing. Nothing is connected to.",
    )
    sql.add_argument(
        "--store",
        default="postgresql",
        metavar="URL",
        help="the store: a URL (postgresql://host/db?schema=NAME, sqlite:///path.db) or "
        "just postgresql or sqlite (default: postgresql)",
    )
    sql.add_argument(
        "--schema",
        metavar="NAME",
        help="the PostgreSQL schema (default: the URL's ?schema=, else jobsched)",
    )
    sql.add_argument(
        "--from",
        dest="since",
        type=_version,
        default=0,
        metavar="VERSION",
        help="print only the steps after this schema version (default: 0, the whole schema)",
    )
    sql.set_defaults(handler=print_sql)


def _version(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a schema version (0, 1, 2, ...)")
    return int(text)


def print_sql(args: argparse.Namespace, plugins: PluginManager) -> int:
    url = _SHORTHANDS.get(args.store, args.store)
    if args.schema is not None:
        parts = urlsplit(url)
        if parts.scheme not in ("postgresql", "postgres"):
            raise BadInput(f"--schema {args.schema!r}: only a PostgreSQL store has schemas")
        query = dict(parse_qsl(parts.query))
        query["schema"] = args.schema
        url = urlunsplit(parts._replace(query=urlencode(query)))
    store: object = resolve_store(url, plugins)
    if not isinstance(store, SchemaScript):
        raise BadInput(f"--store {args.store!r}: this store has no schema to print as SQL")
    try:
        text = store.migration_sql(args.since)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    sys.stdout.write(text)
    return 0
