"""jobsched's version: the package's ``__version__``, and what a worker registers."""

__version__ = "0.1.0"
