"""Reading a job file: TOML -> checked tables, or one `JobFileError` that says where."""

from __future__ import annotations

import difflib
import graphlib
import heapq
import itertools
import os
import re
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from .. import JobSpecError, Limits, PluginError, SchedulerError, build_job, build_trigger
from ._model import (
    TABLES,
    ChainEntry,
    GroupEntry,
    JobEntry,
    JobFile,
    JobTemplate,
    LimitsSettings,
    RecurringEntry,
    SchedulerSettings,
    keys_of,
    result_ref,
    result_refs,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

if TYPE_CHECKING:
    from .. import PluginManager


class JobFileError(SchedulerError, ValueError):
    """A job file that cannot be run: the message names the file, line and key."""

    def __init__(
        self, message: str, *, source: str, line: int | None = None, column: int | None = None
    ) -> None:
        self.source = source
        self.line = line
        self.column = column
        self.reason = message
        where = f"{source}:{line}" if line else source
        if line and column:
            where += f":{column}"
        super().__init__(f"{where}: {message}")


def _not_an_id(where: str, name: str, kinds: str, known: Sequence[str]) -> str:
    """The message for `name`, given at `where`, that names no `kinds` entry of the file."""
    return f"{where} {name!r} is not a {kinds} id in this file{_did_you_mean(name, known)}"


def _did_you_mean(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=2, cutoff=0.5)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


class _Lines:
    """Best-effort line numbers for tables and keys (tomllib gives none)."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.headers: dict[str, list[int]] = {}
        header = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_\"'-]+)\s*\]\]?")
        for number, line in enumerate(self.lines, 1):
            match = header.match(line)
            if match:
                self.headers.setdefault(match.group(2).strip("\"'"), []).append(number)
        self.all_headers = sorted(n for numbers in self.headers.values() for n in numbers)

    def table(self, name: str, index: int = 0) -> int | None:
        numbers = self.headers.get(name, [])
        return numbers[index] if index < len(numbers) else None

    def key(self, start: int | None, name: str) -> int | None:
        """The line of ``name = ...`` in the table whose header is at `start`."""
        if start is None:
            return None
        end = next((n for n in self.all_headers if n > start), len(self.lines) + 1)
        pattern = re.compile(rf"^\s*[\"']?{re.escape(name)}[\"']?\s*=")
        for number in range(start + 1, end):
            if pattern.match(self.lines[number - 1]):
                return number
        return start


def parse_jobfile(
    text: str, *, source: str = "<job file>", plugins: PluginManager | None = None
) -> JobFile:
    """Parse and check a job file's text (see ``docs/jobfile.md``).

    With `plugins`, the strategy, job types, arguments and retry policies are
    checked against the registered names, so a file that loads will build.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = re.search(r"\(at line (\d+), column (\d+)\)", message)
        if match:
            reason = message[: match.start()].strip()
            raise JobFileError(
                f"invalid TOML: {reason}",
                source=source,
                line=int(match.group(1)),
                column=int(match.group(2)),
            ) from None
        raise JobFileError(f"invalid TOML: {message}", source=source) from None
    lines = _Lines(text)

    def fail(message: str, line: int | None = None) -> JobFileError:
        return JobFileError(message, source=source, line=line)

    for name in data:
        if name not in TABLES:
            known = ", ".join(f"[[{t}]]" if k.array else f"[{t}]" for t, k in TABLES.items())
            raise fail(
                f"unknown table or key {name!r} at the top level"
                f"{_did_you_mean(name, list(TABLES))} (known: {known})",
                lines.table(name) or lines.key(0, name),
            )
    # Every top-level table, the same way: one [name] or an array of [[name]].
    tables: dict[str, Any] = {}
    for name, kind in TABLES.items():
        if kind.array:
            raw = data.get(name, [])
            if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
                raise fail(
                    f"'{name}' must be an array of tables: write [[{name}]] before each entry",
                    lines.table(name) or lines.key(0, name),
                )
            tables[name] = [
                _parse_table(
                    kind.cls, table, f"[[{name}]] #{i + 1}", lines.table(name, i), lines, fail
                )
                for i, table in enumerate(raw)
            ]
        else:
            raw = data.get(name, {})
            if not isinstance(raw, dict):
                raise fail(
                    f"'{name}' must be a table: write [{name}]",
                    lines.table(name) or lines.key(0, name),
                )
            tables[name] = _parse_table(kind.cls, raw, f"[{name}]", lines.table(name), lines, fail)
    settings: SchedulerSettings = tables["scheduler"]
    entries = tables
    jobs: list[JobEntry] = entries["job"]
    recurring: list[RecurringEntry] = entries["recurring"]

    groups: list[GroupEntry] = entries["group"]
    seen: dict[str, JobTemplate | GroupEntry] = {}
    entries_with_ids: list[JobTemplate | GroupEntry] = [*jobs, *recurring, *groups]
    for entry in entries_with_ids:
        first = seen.get(entry.id)
        if first is not None:
            at = f" (first used at line {first.line})" if first.line else ""
            raise fail(f"duplicate id {entry.id!r}{at}", lines.key(entry.line, "id"))
        seen[entry.id] = entry
    job_ids = [j.id for j in jobs]
    members = _group_members(groups, job_ids, lines, fail)
    jobs = _with_workflow_edges(jobs, recurring, entries["chain"], members, lines, fail)
    for job in jobs:
        if job.trigger_rule != "all_success" and not job.depends_on:
            raise fail(f"{job.label}: trigger_rule {job.trigger_rule!r} needs depends_on", job.line)
    for job in jobs:
        for dep in job.depends_on:
            if dep in job_ids:
                continue
            line = lines.key(job.line, "depends_on")
            if dep in seen:
                raise fail(
                    f"{job.label}: depends_on {dep!r} is a [[recurring]] entry; "
                    "only [[job]] ids can be dependencies",
                    line,
                )
            raise fail(_not_an_id(f"{job.label}: depends_on", dep, "[[job]]", job_ids), line)
    order = _submit_order(jobs, fail, lines)

    if plugins is not None:
        _check_against_plugins(settings, [*jobs, *recurring], plugins, lines, fail, members)
        _check_limit_names(tables["limits"], plugins, lines, fail)
    if not jobs and not recurring:
        # Running it would do nothing and still create a store: surely the wrong
        # file. Checked last, so a mistake in what the file does say comes first.
        raise fail("no jobs in this file: it has no [[job]] or [[recurring]] entry")
    return JobFile(
        source=source,
        tables=tables,
        scheduler=settings,
        jobs=tuple(jobs),
        recurring=tuple(recurring),
        submit_order=tuple(order),
        groups=members,
    )


def _group_members(
    groups: list[GroupEntry], job_ids: list[str], lines: _Lines, fail: Any
) -> dict[str, tuple[str, ...]]:
    """``[[group]]`` ids -> their members, each a [[job]] id of the file."""
    for entry in groups:
        for member in entry.members:
            if member not in job_ids:
                raise fail(
                    _not_an_id(f"{entry.label}: member", member, "[[job]]", job_ids),
                    lines.key(entry.line, "members"),
                )
    return {entry.id: entry.members for entry in groups}


def _with_workflow_edges(
    jobs: list[JobEntry],
    recurring: list[RecurringEntry],
    chains: list[ChainEntry],
    members: Mapping[str, tuple[str, ...]],
    lines: _Lines,
    fail: Any,
) -> list[JobEntry]:
    """`jobs` with the dependencies ``[[chain]]`` steps and ``{ result_of = ID }``
    arguments add to their ``depends_on``."""
    job_ids = [j.id for j in jobs]
    known = [*job_ids, *members]

    def expand(name: str) -> tuple[str, ...]:
        return members.get(name, (name,))

    extra: dict[str, list[str]] = {}
    for chain in chains:
        for step in chain.steps:
            if step not in known:
                raise fail(
                    _not_an_id("[[chain]]: step", step, "[[job]] or [[group]]", known),
                    lines.key(chain.line, "steps"),
                )
        for before, after in itertools.pairwise(chain.steps):
            for job_id in expand(after):
                extra.setdefault(job_id, []).extend(expand(before))
    for entry in [*jobs, *recurring]:
        try:
            refs = [ref for value in entry.args.values() for ref in result_refs(value)]
        except ValueError as exc:
            raise fail(f"{entry.label}: args: {exc}", lines.key(entry.line, "args")) from None
        if refs and isinstance(entry, RecurringEntry):
            raise fail(
                f"{entry.label}: result_of is for [[job]] entries (a recurring run has no "
                "upstream to wait for)",
                lines.key(entry.line, "args"),
            )
        for ref in refs:
            if ref not in known:
                raise fail(
                    _not_an_id(f"{entry.label}: result_of", ref, "[[job]] or [[group]]", known),
                    lines.key(entry.line, "args"),
                )
            extra.setdefault(entry.id, []).extend(expand(ref))
    return [
        attrs.evolve(job, depends_on=tuple(dict.fromkeys([*job.depends_on, *extra[job.id]])))
        if job.id in extra
        else job
        for job in jobs
    ]


def _marker_data(value: Any, members: Mapping[str, tuple[str, ...]]) -> Any:
    """`value` with each ``{ result_of = ID }`` table in the marker's JSON form
    (entry ids stand in for job ids: only the job type's checks see it)."""
    ref = result_ref(value)
    if ref is not None:
        names = [ref] if isinstance(ref, str) else ref
        data = [list(members[n]) if n in members else n for n in names]
        return {"$result_of": data[0] if isinstance(ref, str) else data}
    if isinstance(value, list):
        return [_marker_data(v, members) for v in value]
    if isinstance(value, dict):
        return {k: _marker_data(v, members) for k, v in value.items()}
    return value


#: The largest job file read: a mistaken path (``/dev/zero``, a log file) must
#: not eat the memory. 64 MiB is hundreds of thousands of jobs.
MAX_JOBFILE_BYTES = 64 * 1024 * 1024


def load_jobfile(path: str | Path, *, plugins: PluginManager | None = None) -> JobFile:
    """Read and check the job file at `path` (see `parse_jobfile`).

    At most `MAX_JOBFILE_BYTES` are read; a device (``/dev/zero``) is refused
    without reading it. A pipe is read, up to the same cap.
    """
    source = str(path)
    try:
        with open(path, "rb") as file:
            mode = os.fstat(file.fileno()).st_mode
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
                raise JobFileError("not a job file but a device; give a TOML file", source=source)
            raw = file.read(MAX_JOBFILE_BYTES + 1)
    except OSError as exc:
        raise JobFileError(
            f"cannot read the job file: {exc.strerror or exc}", source=source
        ) from None
    if len(raw) > MAX_JOBFILE_BYTES:
        raise JobFileError(
            f"the job file is larger than {MAX_JOBFILE_BYTES // (1024 * 1024)} MiB", source=source
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JobFileError(f"not UTF-8 text: {exc}", source=source) from None
    return parse_jobfile(text, source=source, plugins=plugins)


def _parse_table(
    cls: type,
    raw: Mapping[str, Any],
    where: str,
    line: int | None,
    lines: _Lines,
    fail: Any,
) -> Any:
    specs = keys_of(cls)
    label = where
    if "id" in specs and isinstance(raw.get("id"), str):
        label = f"{TABLES_BY_CLASS[cls]} {raw['id']!r}"
    for name in raw:
        if name not in specs:
            raise fail(
                f"{label}: unknown key {name!r}{_did_you_mean(name, list(specs))} "
                f"(keys: {', '.join(specs)})",
                lines.key(line, name),
            )
    values: dict[str, Any] = {}
    for name, spec in specs.items():
        if name not in raw:
            if spec.required:
                raise fail(f"{label}: missing required key {name!r} ({spec.doc})", line)
            continue
        try:
            values[name] = spec.parse(raw[name])
        except ValueError as exc:
            raise fail(f"{label}: {name} {exc}", lines.key(line, name)) from None
    entry = cls(line=line, **values)
    try:
        entry.check()
    except ValueError as exc:
        raise fail(f"{label}: {exc}", line) from None
    return entry


TABLES_BY_CLASS = {kind.cls: name for name, kind in TABLES.items()}


def _submit_order(jobs: list[JobEntry], fail: Any, lines: _Lines) -> list[JobEntry]:
    """File order, except that each job comes after its dependencies (a stable topological sort)."""
    graph = {job.id: job.depends_on for job in jobs}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        cycle: list[str] = list(reversed(exc.args[1]))
        first = next(j for j in jobs if j.id == cycle[0])
        raise fail(
            f"dependency cycle: {' -> '.join(cycle)} (each id depends on the next)",
            lines.key(first.line, "depends_on"),
        ) from None
    index = {job.id: i for i, job in enumerate(jobs)}
    waiting = {job.id: set(job.depends_on) for job in jobs}
    dependents: dict[str, list[str]] = {}
    for job in jobs:
        for dep in job.depends_on:
            dependents.setdefault(dep, []).append(job.id)
    ready = [index[job_id] for job_id, deps in waiting.items() if not deps]
    heapq.heapify(ready)
    order: list[JobEntry] = []
    while ready:
        job = jobs[heapq.heappop(ready)]
        order.append(job)
        for dependent in dependents.get(job.id, ()):
            waiting[dependent].discard(job.id)
            if not waiting[dependent]:
                heapq.heappush(ready, index[dependent])
    return order


def _check_against_plugins(
    settings: SchedulerSettings,
    entries: list[JobTemplate],
    plugins: PluginManager,
    lines: _Lines,
    fail: Any,
    members: Mapping[str, tuple[str, ...]],
) -> None:
    if settings.strategy not in plugins.registry["strategies"]:
        raise fail(
            f"[scheduler]: {plugins.unknown_name_message('strategies', settings.strategy)}",
            lines.key(settings.line, "strategy"),
        )
    for entry in entries:
        try:
            job = build_job(
                entry.type,
                {k: _marker_data(v, members) for k, v in entry.args.items()},
                plugins=plugins,
                label=entry.label,
                **entry.job_options(0.0),
            )
        except JobSpecError as exc:
            text = str(exc)
            key = "type" if "unknown job type" in text else "args"
            # (retry_on after retry: the longer name wins)
            for option in ("retry", "priority", "timeout", "deadline", "retry_on", "no_retry_on"):
                if text.startswith(f"{entry.label}: {option}") or f": {option} " in text:
                    key = option
            raise fail(text, lines.key(entry.line, key)) from None
        trigger = getattr(entry, "trigger", None)
        if trigger is not None:
            try:
                build_trigger(trigger, lambda name: plugins.resolve("triggers", name))
            except (ValueError, TypeError, PluginError) as exc:
                text = str(exc) if str(exc).startswith("trigger") else f"trigger {exc}"
                line = lines.key(entry.line, "trigger")
                raise fail(f"{entry.label}: {text}", line) from None
        if str(job.model) not in plugins.registry["executors"]:
            message = plugins.unknown_name_message("executors", str(job.model))
            raise fail(
                f"{entry.label}: job type {entry.type!r} runs on an executor that is not "
                f"available: {message}",
                lines.key(entry.line, "type"),
            )


def _check_limit_names(
    limits: LimitsSettings, plugins: PluginManager, lines: _Lines, fail: Any
) -> None:
    """Every name in [limits] must be registered: a typo would silently limit nothing."""
    known = {
        "executors": plugins.names("executors"),
        "job_types": plugins.names("job_types"),
        "rates": plugins.names("job_types"),  # rates count starts per job type
    }
    for kind, names in (
        ("executors", limits.executors),
        ("job_types", limits.job_types),
        ("rates", limits.rates),
    ):
        for name in names:
            problem = Limits.unknown_name(kind, name, known[kind])
            if problem is not None:
                raise fail(f"[limits]: {kind}: {problem}", lines.key(limits.line, kind))


__all__ = ["JobFileError", "load_jobfile", "parse_jobfile"]
