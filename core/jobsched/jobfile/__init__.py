"""Job files: a TOML description of jobs to run (see ``docs/jobfile.md``).

``jobsched run FILE.toml`` is `load_jobfile` + `run_jobfile`; both are usable
from Python too::

    jobfile = load_jobfile("jobs.toml", plugins=plugins)
    result = asyncio.run(run_jobfile(jobfile, plugins=plugins))
    print(result.to_json())
"""

from .. import MAX_RETRIES, MAX_WORKERS
from ._load import MAX_JOBFILE_BYTES, JobFileError, load_jobfile, parse_jobfile
from ._model import (
    MAX_DURATION,
    TABLES,
    JobEntry,
    JobFile,
    JobTemplate,
    KeySpec,
    LimitsSettings,
    RecurringEntry,
    SchedulerSettings,
    duration,
    key,
    keys_of,
)
from ._run import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_JOB_FAILED,
    EXIT_OK,
    INTERRUPTED,
    JobOutcome,
    Progress,
    RunResult,
    run_jobfile,
)

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_JOB_FAILED",
    "EXIT_OK",
    "INTERRUPTED",
    "MAX_DURATION",
    "MAX_JOBFILE_BYTES",
    "MAX_RETRIES",
    "MAX_WORKERS",
    "TABLES",
    "JobEntry",
    "JobFile",
    "JobFileError",
    "JobOutcome",
    "JobTemplate",
    "KeySpec",
    "LimitsSettings",
    "Progress",
    "RecurringEntry",
    "RunResult",
    "SchedulerSettings",
    "duration",
    "key",
    "keys_of",
    "load_jobfile",
    "parse_jobfile",
    "run_jobfile",
]
