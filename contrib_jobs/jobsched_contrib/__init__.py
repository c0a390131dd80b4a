"""Contrib job types for jobsched: the reference design's example jobs first."""
