"""A process for the OpenTelemetry tests: ``python otel_proc.py MODE URL OUT``.

Configures the OpenTelemetry SDK with an in-memory exporter, then, by MODE:
``worker`` runs ``jobsched worker --store URL`` until SIGTERM; ``submit``
submits the test jobs with a `Client` inside a ``request`` span and waits for
them. Either way, the spans it recorded are written to OUT as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

EXPORTER = InMemorySpanExporter()


def setup() -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)


def dump(out: Path) -> None:
    spans = [
        {
            "name": s.name,
            "kind": s.kind.name,
            "trace_id": f"{s.context.trace_id:032x}",
            "span_id": f"{s.context.span_id:016x}",
            "parent": None if s.parent is None else f"{s.parent.span_id:016x}",
            "attributes": dict(s.attributes or {}),
            "status": s.status.status_code.name,
            "events": [{"name": e.name, **dict(e.attributes or {})} for e in s.events],
            "links": [f"{link.context.span_id:016x}" for link in s.links],
        }
        for s in EXPORTER.get_finished_spans()
    ]
    out.write_text(json.dumps(spans))


async def submit(url: str) -> dict[str, Any]:
    from jobsched import Client, Submission, build_job

    tracer = trace.get_tracer("test")
    async with Client(url) as client:
        with tracer.start_as_current_span("request"):
            ids = await client.submit_many(
                [
                    Submission(build_job("sleep", {"name": "ok", "seconds": 0}), retry="none"),
                    Submission(
                        build_job("flaky-upload", {"path": "p", "failures": 1}),
                        retry={"policy": "fixed", "seconds": 0, "max_retries": 1},
                    ),
                    Submission(
                        build_job("sleep", {"name": "slow", "seconds": 3600}),
                        timeout=0.05,
                        retry="none",
                    ),
                ]
            )
        infos = await client.wait_many(ids, timeout=120)
    return {"ids": ids, "statuses": [i.status.value for i in infos]}


def main() -> int:
    mode, url, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    setup()
    if mode == "submit":
        result = asyncio.run(submit(url))
        dump(out)
        print(json.dumps(result))
        return 0
    from jobsched.cli import main as jobsched_main

    code = jobsched_main(["worker", "--store", url, "--workers", "2"])
    dump(out)
    return code or 0


if __name__ == "__main__":
    sys.exit(main())
