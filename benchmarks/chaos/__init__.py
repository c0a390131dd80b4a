"""A chaos soak for the shared stores: nothing lost, nothing completed twice.

    python -m benchmarks.chaos --store URL --workers N --jobs M --duration S [--seed K]

Real ``jobsched worker`` processes and `jobsched.Client` producers share one
store (PostgreSQL, or a SQLite file in shared mode) while faults are
injected at random times drawn from the seed. Every execution of a job body
is appended to a ledger the store does not own (an fsync'd file per
process); at the end the ledger and the store are checked against each
other (`benchmarks.chaos.check`). docs/reliability.md says what is checked
and reports a long run.

Modules: `jobs` (the soak's job types, a plugin the workers load through an
entry point; `jobs_old` is an older version of it, for the ``old_module``
fault), `ledger` (the append-only files), `check` (the checker, a pure
function of the ledger, the stored rows and the faults), `producer` (the
producer, canceller and forking-producer processes), `processes` (starting
them and the workers, and what became of each), `faults` (every fault, and
``--faults``), `soak` (the orchestrator). Public jobsched names only.
"""
