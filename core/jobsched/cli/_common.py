"""What the commands share: errors, exit codes, output and logging setup."""

from __future__ import annotations

import json
import logging
import math
import os
import sys
from typing import TYPE_CHECKING, Any

import structlog

from .. import JobSpecError, PluginError, PluginManager
from ..jobfile import EXIT_BAD_INPUT, JobFileError
from ..store import StoreError

if TYPE_CHECKING:
    from rich.console import Console

EXIT_CRASH = 3


class BadInput(Exception):
    """Bad input found by the command line itself (exit code 2)."""


#: Errors that mean the user gave bad input: one line on stderr, exit code 2.
#: (A store that cannot be opened or written - corrupt, locked, full - counts:
#: the message names the file and the problem, and nothing was changed.)
BAD_INPUT_ERRORS = (BadInput, JobFileError, JobSpecError, PluginError, StoreError)

__all__ = [
    "BAD_INPUT_ERRORS",
    "EXIT_BAD_INPUT",
    "EXIT_CRASH",
    "BadInput",
    "add_import_option",
    "import_modules",
    "load_plugins",
]


_DURATION_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "": 1.0}


def parse_duration(text: str, option: str) -> float:
    """Seconds from ``7d``, ``12h``, ``30m``, ``45s`` or plain seconds (``90``,
    ``1.5``); anything else, or a negative or endless one, is `BadInput`
    naming `option`."""
    value = text.strip().lower()
    unit = value[-1:] if value[-1:] in ("d", "h", "m", "s") else ""
    number = value[: len(value) - len(unit)]
    try:
        seconds = float(number) * _DURATION_UNITS[unit]
    except ValueError:
        seconds = math.nan
    if not (seconds >= 0 and math.isfinite(seconds)):
        raise BadInput(
            f"{option} {text!r} is not a duration (7d, 12h, 30m, 45s or a number of seconds)"
        )
    return seconds


def error(message: str) -> None:
    """One line on stderr: ``jobsched: error: ...``."""
    text = " ".join(message.split("\n"))
    print(f"jobsched: error: {text}", file=sys.stderr, flush=True)


def load_plugins() -> PluginManager:
    """The installed plugins; one that is slow to import is named on stderr (once)."""
    return PluginManager(on_slow_import=_say_slow_import)


def _say_slow_import(name: str, distribution: str | None) -> None:
    source = f" (from {distribution})" if distribution else ""
    print(
        f"jobsched: loading plugin {name!r}{source} is taking a while; "
        f"JOBSCHED_DISABLE_PLUGINS={name} skips it",
        file=sys.stderr,
        flush=True,
    )


# ── --import MODULE ───────────────────────────────────────────────────
def add_import_option(parser: Any) -> None:
    """``--import MODULE`` (repeatable): modules that define tasks (``@jobsched.task``)."""
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import this module first, so the tasks it defines (@jobsched.task) are job "
        "types here (repeatable; the current directory is searched too, as by `python -m`)",
    )


def import_modules(names: list[str]) -> None:
    """Import each module of ``--import``; one that fails is bad input naming it."""
    if not names:
        return
    import importlib

    # As `python -m`: a module beside the command's working directory is found.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:
            raise BadInput(f"--import {name}: {type(exc).__name__}: {exc}") from None


def print_json(data: Any) -> None:
    """Machine output: indented JSON on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def make_console() -> Console:
    """A rich console on stdout; not a terminal means no colour and no width limit."""
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:
        width = int(os.environ.get("COLUMNS", "0") or 0) or 240
        console = Console(highlight=False, width=width, no_color=True)
    return console


# ── logging ───────────────────────────────────────────────────────────
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
LOG_FORMATS = ("console", "json")


def add_logging_options(parser: Any, *, default_level: str = "warning") -> None:
    """``--log-format`` and ``--log-level`` (structlog output goes to stderr)."""
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="console",
        help="how log lines look on stderr (default: console)",
    )
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default=default_level,
        type=str.lower,
        help="the least severe log level shown; info logs every job transition "
        f"(default: {default_level})",
    )


class _StderrLogger:
    """Writes each line to whatever ``sys.stderr`` is at the time.

    Looking it up per line (instead of holding the file, as structlog's
    PrintLogger does) lets a live progress display redirect it.
    """

    def msg(self, message: str) -> None:
        stream = sys.stderr
        stream.write(message + "\n")
        stream.flush()

    log = debug = info = warning = warn = error = critical = exception = fatal = msg


def _stderr_logger_factory(*args: Any) -> _StderrLogger:
    return _StderrLogger()


def configure_logging(log_format: str, log_level: str) -> None:
    """Configure structlog for this process (the kernel never does: it is a library)."""
    level: int = getattr(logging, log_level.upper())
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if log_format == "json":
        processors += [structlog.processors.dict_tracebacks, structlog.processors.JSONRenderer()]
    else:
        processors.append(structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=_stderr_logger_factory,
        cache_logger_on_first_use=True,
    )
