"""``python -m jobsched``: the command line."""

import sys

from jobsched.cli import main

sys.exit(main())
