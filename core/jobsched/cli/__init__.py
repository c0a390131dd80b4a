"""The ``jobsched`` command line (also ``python -m jobsched``).

One module per command group; each has ``add_parser(subparsers)`` that adds
its parser and sets ``handler`` (``handler(args, plugins) -> exit code``). To
add a command, write a module and list it in `COMMANDS`; plugins add theirs
through the ``jobsched_register_commands`` hook (`_commands`). `main` loads
the plugins once per invocation and hands that one `PluginManager` to the
command. This package is the application: it configures structlog and may use
rich; the kernel does neither.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from typing import NoReturn

from .. import PluginManager, __version__
from . import (
    _demo,
    _jobs,
    _plugins,
    _queue,
    _run,
    _schedule,
    _schedules,
    _status,
    _store,
    _worker,
    _workers,
)
from ._commands import PluginCommands, failure_line
from ._common import (
    BAD_INPUT_ERRORS,
    EXIT_BAD_INPUT,
    EXIT_CRASH,
    error,
    import_modules,
    load_plugins,
)

#: The command modules, in the order ``jobsched --help`` lists them.
COMMANDS = (
    _run,
    _status,
    _worker,
    _workers,
    _demo,
    _jobs,
    _plugins,
    _schedule,
    _schedules,
    _queue,
    _store,
)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is the one line docs/cli.md promises.

    argparse would print the usage block, then ``jobsched run: error: ...``;
    every error of ours is one ``jobsched: error: ...`` line, so usage errors are
    too (naming the command; ``--help`` shows the usage). Subparsers inherit
    this class from `add_subparsers`.
    """

    #: Said after a usage error: why a plugin's command may be missing.
    note = ""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("jobsched").strip()
        where = f"{command}: " if command else ""
        error(f"{where}{message} (see `{self.prog} --help`){self.note}")
        sys.exit(EXIT_BAD_INPUT)


def build_parser(plugins: PluginManager | None = None) -> argparse.ArgumentParser:
    """The whole command line: jobsched's commands, then those `plugins` add.

    Without `plugins`, only jobsched's own commands.
    """
    parser = _Parser(
        prog="jobsched",
        description="Run jobs from a TOML job file, inspect jobsched's plugins and job types, "
        "and operate a store (retry, cancel and purge jobs; pause schedules and the queue).",
        epilog="Exit codes: 0 every job completed, 1 a job failed, timed out or was cancelled, "
        "2 bad input (the file, a name, an argument), 3 jobsched itself crashed, "
        "4 a worker ended itself because a job blocked its event loop, "
        "130 interrupted. See docs/cli.md.",
    )
    parser.add_argument("--version", action="version", version=f"jobsched {__version__}")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(subparsers)
    if plugins is not None:
        added = PluginCommands(subparsers, plugins)
        added.add_all()
        if added.failures:
            failures = "; ".join(failure_line(p, f) for p, f in added.failures.items())
            parser.note = f"; {failures}"
            parser.epilog = f"{parser.epilog} Not available: {failures}."
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code."""
    try:
        with _sigterm_as_ctrl_c():
            # The one plugin manager of this invocation: the parser (plugins'
            # commands), the command and everything it composes use it.
            plugins = load_plugins()
            args = build_parser(plugins).parse_args(argv)
            import_modules(getattr(args, "imports", []))  # tasks join every registry
            code: int = args.handler(args, plugins)
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


@contextlib.contextmanager
def _sigterm_as_ctrl_c() -> Iterator[None]:
    # `kill`, `docker stop` and systemd send SIGTERM: every command stops as on
    # Ctrl-C instead of dying mid-write (`run` stops its jobs and prints the
    # summary itself; `worker` hands its jobs back).
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set signal handlers (main() called from a test)
        return
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
