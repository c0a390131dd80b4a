"""jobsched's built-in plugins, one module each, each its own ``jobsched`` entry point."""
