"""The ``jobsched`` command line (also ``python -m jobsched``).

One module per command group; each has ``add_parser(subparsers)`` that adds
its parser and sets ``handler`` (``handler(args) -> exit code``). To add a
command, write a module and list it in `COMMANDS`. This package is the
application: it configures structlog and may use rich; the kernel does
neither.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence

from .. import __version__
from . import _demo, _jobs, _plugins, _run, _schedule, _status, _worker
from ._common import BAD_INPUT_ERRORS, EXIT_BAD_INPUT, EXIT_CRASH, error

#: The command modules, in the order ``jobsched --help`` lists them.
COMMANDS = (_run, _status, _worker, _demo, _jobs, _plugins, _schedule)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; each command module adds its own subparser."""
    parser = argparse.ArgumentParser(
        prog="jobsched",
        description="Run jobs from a TOML job file and inspect jobsched's plugins and job types.",
        epilog="Exit codes: 0 every job completed, 1 a job failed, timed out or was cancelled, "
        "2 bad input (the file, a name, an argument), 3 jobsched itself crashed, "
        "130 interrupted. See docs/cli.md.",
    )
    parser.add_argument("--version", action="version", version=f"jobsched {__version__}")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except BAD_INPUT_ERRORS as exc:
        error(str(exc))
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        error("interrupted")
        return 130
    except BrokenPipeError:
        return 0  # `jobsched ... | head`: the reader left, nothing to report
    except Exception:
        traceback.print_exc()
        error("jobsched crashed (this is a bug in jobsched or a plugin; the traceback is above)")
        return EXIT_CRASH
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
