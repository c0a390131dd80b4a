"""``python -m benchmarks [--quick] [--output PATH]``."""

from benchmarks.suite import main

raise SystemExit(main())
