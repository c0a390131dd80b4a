"""The example app's tasks: what its workers run (they import this module)."""

from __future__ import annotations

from jobsched import task


@task(no_retry_on=[ValueError])
async def send_welcome(email: str, name: str = "there") -> str:
    """Send a new user their welcome mail (pretend)."""
    if "@" not in email:
        raise ValueError(f"not an address: {email!r}")
    return f"welcomed {name} at {email}"
