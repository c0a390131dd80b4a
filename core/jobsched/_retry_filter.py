"""Which failures are worth another attempt: ``retry_on``, ``no_retry_on`` and `Retry`.

An exception class is kept by name, so a job's filters are data that a store
keeps and another process reads without importing anything: a builtin by its
bare name (``"TimeoutError"``), any other class as ``"module.Qualname"``. A
failure matches a name when its class or one of its bases has that name, so
``"OSError"`` covers ``ConnectionError``.
"""

from __future__ import annotations

import builtins
import difflib
import keyword
import sys
from collections.abc import Iterable
from typing import Any

from ._errors import NonRetryableError, Retry
from ._options import check_delay

_BUILTIN_EXCEPTIONS = frozenset(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
)


def exception_name(cls: type[BaseException]) -> str:
    """How filters name `cls`: ``"TimeoutError"``, ``"myapp.errors.Transient"``."""
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def exception_names(value: Any, option: str) -> tuple[str, ...]:
    """`value` (an exception class, a name, or a list of them) as checked names.

    A bare name must be a builtin exception; a dotted one is checked against
    its module when that module is already imported (nothing is imported
    here: a producer may name a class only its workers can import), and else
    kept as written. Anything else is a `ValueError` (`TypeError` for a value
    that is neither a class nor a name) naming `option` and the culprit.
    """
    if value is None:
        return ()
    items = [value] if isinstance(value, str | type) else value
    if not isinstance(items, Iterable) or isinstance(items, dict):
        raise TypeError(f"{option} must be a list of exception classes or names, got {value!r}")
    names: list[str] = []
    for item in items:
        if isinstance(item, type) and issubclass(item, BaseException):
            name = exception_name(item)
        elif isinstance(item, str):
            name = _checked_name(item, option)
        else:
            raise TypeError(
                f"{option}: {item!r} is neither an exception class nor a name like "
                f'"TimeoutError" or "myapp.errors.Transient"'
            )
        if name not in names:
            names.append(name)
    return tuple(names)


def _checked_name(name: str, option: str) -> str:
    parts = name.split(".")
    if not all(part.isidentifier() and not keyword.iskeyword(part) for part in parts):
        raise ValueError(
            f"{option}: {name!r} is not an exception class name (a builtin like "
            f'"TimeoutError", or "module.Class")'
        )
    if len(parts) == 1:
        if name not in _BUILTIN_EXCEPTIONS:
            close = difflib.get_close_matches(name, sorted(_BUILTIN_EXCEPTIONS), n=2)
            hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise ValueError(
                f"{option}: unknown exception class {name!r}{hint} (a builtin is named bare, "
                f'any other class by module and name, like "myapp.errors.Transient")'
            )
        return name
    _check_in_loaded_module(name, parts, option)
    return name


def _check_in_loaded_module(name: str, parts: list[str], option: str) -> None:
    # The longest imported module the name starts with, then attributes down.
    for split in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:split]))
        if module is None:
            continue
        value: Any = module
        for part in parts[split:]:
            value = getattr(value, part, None)
            if value is None:
                raise ValueError(
                    f"{option}: unknown exception class {name!r}: module "
                    f"{module.__name__!r} has no {'.'.join(parts[split:])!r}"
                )
        if not (isinstance(value, type) and issubclass(value, BaseException)):
            raise ValueError(f"{option}: {name!r} is {value!r}, not an exception class")
        return


def retry_verdict(
    error: BaseException | None, retry_on: tuple[str, ...], no_retry_on: tuple[str, ...]
) -> tuple[bool, float | None, str]:
    """Whether a failed attempt may be retried: ``(retry, delay, note)``.

    `error` is what the attempt raised, None when the job's timeout ended it
    (it counts as a `TimeoutError`). `delay` is a `Retry`'s own (None: the
    retry policy's). `note` says why a failure the filters or a bad `Retry`
    refused is not retried (added to the job's error); it is empty otherwise.
    CancelledError, SystemExit and the like (not an ``Exception``) and
    `NonRetryableError` are never retried. The retry policy decides the rest
    (how many attempts, and when).
    """
    if error is None:
        failed: type[BaseException] = TimeoutError
    elif isinstance(error, Retry):
        try:
            delay = None if error.delay is None else check_delay(error.delay, "Retry(delay=)")
        except ValueError as exc:
            return False, None, f" (not retried: {exc})"
        return True, delay, ""
    elif not isinstance(error, Exception) or isinstance(error, NonRetryableError):
        return False, None, ""
    else:
        failed = type(error)
    if not retry_on and not no_retry_on:
        return True, None, ""
    names = [exception_name(cls) for cls in failed.__mro__]
    matched = [name for name in names if name in no_retry_on]
    if matched:
        return False, None, f" (not retried: {matched[0]} is in no_retry_on)"
    if retry_on and not any(name in retry_on for name in names):
        return False, None, f" (not retried: {names[0]} is not in retry_on)"
    return True, None, ""
