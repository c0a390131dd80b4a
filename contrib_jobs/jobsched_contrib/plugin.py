"""The ``contrib`` plugin: registers the example jobs as job types.

Its entry point (``contrib = "jobsched_contrib.plugin"`` in the ``jobsched``
group) is how ``jobsched jobs list`` and job files find them.
"""

from __future__ import annotations

from jobsched import hookimpl
from jobsched.hookspecs import Register

from .jobs import CsvExportJob, EmailJob, FlakyUploadJob, PrimeCountJob, SleepJob


@hookimpl
def jobsched_register_job_types(register: Register) -> None:
    register("email", EmailJob)
    register("flaky-upload", FlakyUploadJob)
    register("sleep", SleepJob)
    register("csv-export", CsvExportJob)
    register("prime-count", PrimeCountJob)
