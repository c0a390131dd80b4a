"""Contrib job types for jobsched: the reference design's example jobs first.

Registered as the job types ``email``, ``flaky-upload``, ``sleep``,
``csv-export`` and ``prime-count`` by the ``contrib`` plugin.
"""

from .jobs import CsvExportJob, EmailJob, FlakyUploadJob, PrimeCountJob, SleepJob

__all__ = ["CsvExportJob", "EmailJob", "FlakyUploadJob", "PrimeCountJob", "SleepJob"]
