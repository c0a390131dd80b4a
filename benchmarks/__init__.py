"""jobsched's benchmarks: the kernel against raw asyncio, measured in the same run.

Run them with ``python -m benchmarks`` (``--quick`` for a smoke run with small
counts). See `benchmarks.suite` for what each case measures.
"""
