"""``--metrics-port`` and ``status --metrics``: the CLI's side of the prometheus plugin.

The CLI finds the plugin through the plugin manager, like everything else:
disabled or not installed, the options fail with one line saying how to get it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import PluginManager
from ._common import BadInput

PLUGIN = "prometheus"


def add_metrics_options(parser: argparse.ArgumentParser, *, host: bool = True) -> None:
    """``--metrics-port N`` (and ``--metrics-host H``): serve /metrics while running."""
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="N",
        help="serve Prometheus metrics on http://HOST:N/metrics while running "
        "(the prometheus plugin: pip install 'jobsched[prometheus]'; 0 picks a free port)",
    )
    if host:
        parser.add_argument(
            "--metrics-host",
            default="127.0.0.1",
            metavar="HOST",
            help="the address --metrics-port listens on (default: 127.0.0.1; "
            "0.0.0.0 for every interface)",
        )


def prometheus_plugin(plugins: PluginManager, option: str) -> Any:
    """The loaded prometheus plugin module, or `BadInput` saying why there is none."""
    plugin = plugins.loaded_plugin(PLUGIN)
    if plugin is not None:
        return plugin
    record = next((r for r in plugins.records() if r.name == PLUGIN), None)
    why = "it is not installed" if record is None else f"it is {record.status}"
    if record is not None and record.error:
        why += f": {record.error}"
    raise BadInput(
        f"{option} needs the prometheus plugin ({why}); "
        "install it with pip install 'jobsched[prometheus]'"
    )


def start_metrics(args: argparse.Namespace, plugins: PluginManager) -> None:
    """Start the /metrics server if ``--metrics-port`` was given; say where on stderr."""
    port = getattr(args, "metrics_port", None)
    if port is None:
        return
    host = getattr(args, "metrics_host", "127.0.0.1")
    if not 0 <= port <= 65535:
        raise BadInput(f"--metrics-port must be 0 to 65535, got {port}")
    plugin = prometheus_plugin(plugins, "--metrics-port")
    try:
        server, _ = plugin.start_http_server(port, host)
    except OSError as exc:
        raise BadInput(f"--metrics-port {port}: cannot listen on {host}:{port}: {exc}") from None
    print(
        f"jobsched: metrics on http://{host}:{server.server_port}/metrics",
        file=sys.stderr,
        flush=True,
    )
