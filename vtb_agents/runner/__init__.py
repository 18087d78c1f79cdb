"""Batch runs: run tasks, grade them, store results line by line, summarise."""
