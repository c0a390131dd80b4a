"""``python -m benchmarks.chaos``: see `benchmarks.chaos.soak`."""

from benchmarks.chaos.soak import main

raise SystemExit(main())
