"""The whole workflow a job belongs to, read through the operator API and laid out.

`read_workflow` walks a job's dependencies (``JobInfo.depends_on``) and
dependents transitively, breadth first from the job, with two batched reads
a wave: ``client.dependents_of(wave)`` and ``client.jobs(ids=new)``. It
stops at `MAX_WORKFLOW` jobs: the jobs found beyond are counted, not read.

`workflow_graph` lays the jobs out in layers, left to right in dependency
order (a job sits one layer right of its furthest dependency), for the job
page's scrollable SVG. Pure: no store, no network.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from jobsched import JobInfo, OperatorAPI

from ._views import GAP_X, GAP_Y, NODE_H, NODE_W, PAD, Edge, Graph, Node, status_name

#: The most jobs the job page reads and draws of one workflow. A workflow
#: with more (a fan-out of thousands) shows the `MAX_WORKFLOW` nearest the
#: job, breadth first, and says how many more it found but did not read.
MAX_WORKFLOW = 150


@attrs.frozen(kw_only=True)
class Workflow:
    """What `read_workflow` found: the jobs by id (None: a dependency that is
    no longer stored), the edges (dependency, dependent), and `more`, how
    many jobs it found beyond its cap and left unread."""

    focus: str
    jobs: dict[str, JobInfo | None]
    edges: frozenset[tuple[str, str]]
    more: int


async def read_workflow(client: OperatorAPI, focus: JobInfo, cap: int = MAX_WORKFLOW) -> Workflow:
    """The connected workflow of `focus`, at most `cap` jobs (`focus` included).

    Costs two reads per wave of the walk (the jobs one step further from
    `focus`): ``dependents_of`` the wave and ``jobs(ids=...)`` of the new
    jobs, whatever the store holds besides: a chain of N steps is 2N reads,
    a fan-out of 1,000 jobs 4.
    """
    jobs: dict[str, JobInfo | None] = {focus.job_id: focus}
    edges: set[tuple[str, str]] = set()
    unread: set[str] = set()
    wave = [focus]
    while wave:
        found: list[str] = []
        # A job purged since it was read has no entry: no dependents.
        below = await client.dependents_of([info.job_id for info in wave])
        for info in wave:
            for up in info.depends_on:
                edges.add((up, info.job_id))
                found.append(up)
            for down in below.get(info.job_id, ()):
                edges.add((info.job_id, down))
                found.append(down)
        new = [job_id for job_id in dict.fromkeys(found) if job_id not in jobs]
        room = max(cap - len(jobs), 0)
        take = new[:room]
        unread.update(new[room:])
        read = {info.job_id: info for info in await client.jobs(ids=take)} if take else {}
        for job_id in take:
            jobs[job_id] = read.get(job_id)  # None: purged (or never stored)
            unread.discard(job_id)
        wave = [read[job_id] for job_id in take if job_id in read]
    return Workflow(
        focus=focus.job_id,
        jobs=jobs,
        edges=frozenset((a, b) for a, b in edges if a in jobs and b in jobs),
        more=len(unread),
    )


def layers(ids: Iterable[str], edges: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Each job's layer: 0 for one with no dependency among `ids`, else one
    more than its furthest dependency's (the longest path to it). Kahn's
    order; a cycle (which a store refuses, so never expected) is put after
    the rest rather than looping."""
    nodes = list(dict.fromkeys(ids))
    parents: dict[str, list[str]] = {n: [] for n in nodes}
    children: dict[str, list[str]] = {n: [] for n in nodes}
    for up, down in edges:
        if up in parents and down in parents and up != down:
            parents[down].append(up)
            children[up].append(down)
    waiting = {n: len(parents[n]) for n in nodes}
    layer = {n: 0 for n in nodes if not waiting[n]}
    ready = [n for n in nodes if not waiting[n]]
    while ready:
        node = ready.pop()
        for child in children[node]:
            layer[child] = max(layer.get(child, 0), layer[node] + 1)
            waiting[child] -= 1
            if not waiting[child]:
                ready.append(child)
    last = max(layer.values(), default=-1)
    for node in nodes:
        if node not in layer:
            layer[node] = last + 1
    return layer


def _title(job: Any) -> str:
    text = str(job.name or job.type)
    return text if len(text) <= 24 else text[:23] + "…"


def workflow_graph(workflow: Workflow) -> Graph:
    """The workflow laid out left to right by `layers`, one column a layer.

    In a column, jobs are ordered by the mean row of their dependencies
    (fewer crossing edges), then by submit time and id; the focus is marked
    and a job no longer stored is a grey node without a link. The drawing
    has no size limit: the page scrolls it (`read_workflow` caps the jobs).
    """
    jobs = workflow.jobs
    layer = layers(jobs, workflow.edges)
    parents: dict[str, list[str]] = {}
    for up, down in workflow.edges:
        parents.setdefault(down, []).append(up)
    columns: dict[int, list[str]] = {}
    for job_id, at in layer.items():
        columns.setdefault(at, []).append(job_id)
    row: dict[str, int] = {}
    for at in sorted(columns):

        def order(job_id: str) -> tuple[float, float, str]:
            above = [row[p] for p in parents.get(job_id, ()) if p in row]
            mean = sum(above) / len(above) if above else -1.0
            return (mean, getattr(jobs[job_id], "submitted_at", 0.0), job_id)

        columns[at].sort(key=order)
        row.update((job_id, n) for n, job_id in enumerate(columns[at]))
    tallest = max((len(c) for c in columns.values()), default=1)
    width = PAD * 2 + len(columns) * NODE_W + (len(columns) - 1) * GAP_X
    height = PAD * 2 + tallest * NODE_H + (tallest - 1) * GAP_Y
    nodes: list[Node] = []
    where: dict[str, tuple[int, int]] = {}
    for at, ids in sorted(columns.items()):
        x = PAD + at * (NODE_W + GAP_X)
        y0 = PAD + (tallest - len(ids)) * (NODE_H + GAP_Y) // 2
        for n, job_id in enumerate(ids):
            y = y0 + n * (NODE_H + GAP_Y)
            where[job_id] = (x, y)
            job = jobs[job_id]
            nodes.append(
                Node(
                    job_id=job_id,
                    title=_title(job) if job is not None else "(not stored)",
                    status=status_name(job.status) if job is not None else "cancelled",
                    x=x,
                    y=y,
                    focus=job_id == workflow.focus,
                    link=job is not None,
                )
            )
    edges: list[Edge] = []
    for up, down in sorted(workflow.edges):
        (sx, sy), (dx, dy) = where[up], where[down]
        x1, y1 = sx + NODE_W, sy + NODE_H / 2
        x2, y2 = dx - 6, dy + NODE_H / 2
        bend = (x2 - x1) / 2
        edges.append(
            Edge(path=f"M{x1},{y1:g} C{x1 + bend:g},{y1:g} {x2 - bend:g},{y2:g} {x2},{y2:g}")
        )
    return Graph(width=width, height=height, nodes=nodes, edges=edges, more=workflow.more)
