"""``jobsched demo``: the reference design's demo, run from its job file."""

from __future__ import annotations

import argparse
import importlib.resources
from typing import Any

from .. import PluginManager
from ..jobfile import load_jobfile
from ._common import configure_logging, make_console
from ._run import add_run_options, run_and_report

#: The demo job file shipped inside the package (a copy of examples/demo.toml).
DEMO_RESOURCE = "demo.toml"


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run the reference design's demo (examples/demo.toml)",
        description="Run the reference design's demo: the job file examples/demo.toml "
        "(shipped inside the package), through the same path as `jobsched run`. Some of "
        "its jobs fail, time out or are cancelled on purpose, so unlike `run` it exits 0 "
        "once the demo has run; it exits 2 if the demo cannot run (say, its plugins are "
        "disabled).",
    )
    add_run_options(parser)
    parser.set_defaults(handler=demo_command)


def demo_command(args: argparse.Namespace, plugins: PluginManager) -> int:
    configure_logging(args.log_format, args.log_level)
    resource = importlib.resources.files("jobsched.cli").joinpath(DEMO_RESOURCE)
    with importlib.resources.as_file(resource) as path:
        jobfile = load_jobfile(path, plugins=plugins)
    if not args.json:
        make_console().print(
            "jobsched demo: the reference design's demo, from examples/demo.toml "
            "(its failures are on purpose)\n",
            markup=False,
        )
    code = run_and_report(jobfile, plugins, as_json=args.json)
    return 0 if code in (0, 1) else code
